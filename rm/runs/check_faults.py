"""``rayrm check``'s invariants of a run with faults, from events.csv and tasks.csv alone.

A node is *held lost* from its ``node_lost`` event to its next ``node_join`` (for ever
when it never joins again).  Two things must never happen while it is:

4. **No attempt starts on a node the RM holds lost** (``started_on_lost``): an attempt
   with start in (lost, join) — the RM allocated there, or counted a container its NM
   ran after the RM gave it up.
5. **No finish on a node lost while it ran is counted** (``finished_on_lost``): an
   attempt with status ``finished`` whose node was lost in (start, finish) — a container
   of a killed or partitioned NM counted as its task's finish.  Its attempt must end
   ``lost`` at the loss, and a later report of it is ``ignored_finish``.

(3, a task finished twice, is ``rayrm.rm.runs.check``'s.)  Times are trace seconds;
a start or finish equal to a loss counts as before it.
"""

from __future__ import annotations

import math

import numpy as np


#: the events that open and close a span in which the RM holds a node lost
LOSS_KINDS = ("node_lost", "node_join")


def lost_spans(events) -> dict[str, list[tuple[float, float]]]:
    """Per node, the (lost, joined again) spans in which the RM held it lost."""
    spans: dict[str, list[tuple[float, float]]] = {}
    rows = events[events.kind.isin(LOSS_KINDS)]
    for node, ev in rows.groupby("node"):
        since = None
        for kind, t in zip(ev.kind, ev.time.astype(float)):
            if kind == "node_lost" and since is None:
                since = t
            elif kind == "node_join" and since is not None:
                spans.setdefault(node, []).append((since, t))
                since = None
        if since is not None:
            spans.setdefault(node, []).append((since, math.inf))
    return spans


def check_lost_nodes(events, tasks, result) -> None:
    """Counts invariants 4 and 5 into ``result`` (a CheckResult), with examples."""
    started = finished = 0
    spans = lost_spans(events)
    for node, node_spans in spans.items():
        on = tasks[tasks.node == node]
        if not len(on):
            continue
        start = on.start.to_numpy(dtype=float)
        finish = on.finish.to_numpy(dtype=float)
        done = (on.status == "finished").to_numpy()
        for lost, back in node_spans:
            bad_start = (start > lost) & (start < back)
            bad_finish = done & (start < lost) & (np.nan_to_num(finish, nan=-math.inf) > lost)
            for row in on[bad_start].itertuples(index=False):
                result.note("started_on_lost", f"{row.app} task {row.task} attempt {row.attempt} started on "
                                               f"{node} at {row.start:g}, lost {lost:g}..{back:g}")
            for row in on[bad_finish].itertuples(index=False):
                result.note("finished_on_lost", f"{row.app} task {row.task} attempt {row.attempt} finished on "
                                                f"{node} at {row.finish:g}; the node was lost at {lost:g}")
            started += int(bad_start.sum())
            finished += int(bad_finish.sum())
    result.started_on_lost, result.finished_on_lost = started, finished
