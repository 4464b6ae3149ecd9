"""Time from each injected fault to recovery, read back from a run directory's events.csv.

Every fault is logged by the RM as a ``fault`` event just before it is injected
(detail: the spec, and for host or Ray-node faults the NMs it takes down).  For
each one, two durations are measured from the fault, in trace seconds (and wall
seconds from the ``wall_time`` column):

============== ========================================== =============================================
fault          detected                                   recovered ("full recovery")
============== ========================================== =============================================
kill-nm,       the first of its NMs declared LOST         every task that was running on those NMs is
kill-nm-host,  (``node_lost``: heartbeat expiry or the    running again elsewhere (the latest start of
kill-ray-node  host's death)                              the next attempt of each attempt lost there
                                                          before the NM registered again); the
                                                          detection time when nothing was running
kill-am        the attempt declared FAILED                the new attempt has registered and holds the
               (``am_expired``)                           app's finished tasks and running containers
                                                          (``am_registered``); it asks for the rest in
                                                          the same heartbeat cycle
kill-rm        the restarted RM has rebuilt its state     every live NM and AM has resynchronised
               and serves calls (``rm_recovered``)        with that RM (``rm_resynced``, same epoch);
                                                          NMs lost and AM attempts failed meanwhile
                                                          do not count
============== ========================================== =============================================

A fault whose recovery is not in the log (the run ended first) has ``None``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from rayrm.rm.runs.reader import RunDir

_NODES = re.compile(r"\(.*?:\s*([^)]*)\)\s*$")


def affected_nodes(kind: str, node: str, detail: str) -> list[str]:
    """The NMs a fault takes down, from its event (kill-nm names one; the others list them)."""
    if kind == "kill-nm":
        return [node]
    m = _NODES.search(detail)
    return m.group(1).split() if m else []


def recovery_times(path: str | Path) -> list[dict]:
    """One dict per fault: kind, spec, time, detected, recovered (trace seconds after the
    fault), the same in wall seconds, and how many task attempts it cost (``lost``)."""
    run = RunDir(path)
    ev, tasks = run.events, run.tasks
    out = []
    for f in ev[ev.kind == "fault"].itertuples(index=False):
        spec = f.detail.split(" ")[0]
        kind = spec.split("@")[0].split(":")[0]
        after = ev[ev.time >= f.time]
        lost = 0
        if kind == "kill-am":
            detected = _first(after, "am_expired", app=f.app)
            recovered = _first(after, "am_registered", app=f.app)
        elif kind == "kill-am-host":
            # detected: the RM failed the host's attempts; recovered: the last of them has
            # registered its new attempt (on the restarted host)
            host = f"AM host am-{spec.split('@')[0].split(':')[1]} died"
            expired = after[(after.kind == "am_expired") & after.detail.str.contains(host, regex=False)]
            detected = _row(expired.iloc[0]) if len(expired) else None
            recovered = detected
            for app in expired.app.unique():
                back = after[(after.kind == "am_registered") & (after.app == app)]
                if not len(back):
                    recovered = None
                    break
                if recovered is not None and float(back.iloc[0].time) > recovered[0]:
                    recovered = _row(back.iloc[0])
        elif kind == "stall-rm":
            detected = recovered = None            # nothing fails: the RM's pace shows the stall
        elif kind == "kill-rm":
            detected = _first(after, "rm_recovered")
            recovered = None
            if detected is not None:               # the resync of the same RM incarnation
                back = after[after.kind == "rm_recovered"].iloc[0]
                epoch = back.detail.split(";")[0]
                synced = after[(after.kind == "rm_resynced") & after.detail.str.startswith(epoch + ":")]
                recovered = _row(synced.iloc[0]) if len(synced) else None
        else:
            nodes = affected_nodes(kind, f.node, f.detail)
            gone = after[(after.kind == "node_lost") & after.node.isin(nodes)]
            detected = _row(gone.iloc[0]) if len(gone) else None
            # the attempts lost with those NMs until each registered again: a later loss of
            # the same node (another fault) is not this fault's
            back = {n: float(ev[(ev.kind == "node_join") & (ev.node == n)
                                & (ev.time > float(g.time))].time.min())
                    for n, g in gone.groupby("node").first().iterrows()} if len(gone) else {}
            until = tasks.node.map(back).fillna(math.inf)
            hit = tasks[(tasks.status == "lost") & tasks.node.isin(nodes) & (tasks.finish >= f.time)
                        & (tasks.finish <= until)]
            lost = len(hit)
            recovered = detected
            for t in hit.itertuples(index=False):
                nxt = tasks[(tasks.app == t.app) & (tasks.task == t.task) & (tasks.attempt > t.attempt)]
                if not len(nxt):
                    recovered = None
                    break
                start = float(nxt.start.min())
                if recovered is not None and start > recovered[0]:
                    recovered = (start, _wall_at(ev, start))
        out.append({"kind": kind, "fault": spec, "time": float(f.time), "lost_attempts": lost,
                    "detected": _since(detected, f.time), "recovered": _since(recovered, f.time),
                    "detected_wall": _since(detected, f.wall_time, 1),
                    "recovered_wall": _since(recovered, f.wall_time, 1)})
    return out


def _first(ev, kind: str, app: str | None = None):
    hit = ev[(ev.kind == kind) & ((ev.app == app) if app is not None else True)]
    return _row(hit.iloc[0]) if len(hit) else None


def _row(row) -> tuple[float, float]:
    return float(row.time), float(row.wall_time)


def _wall_at(ev, t: float) -> float:
    """Wall time at trace time ``t``, interpolated from the event log (the clock is linear)."""
    a, b = ev.iloc[0], ev.iloc[-1]
    if b.time == a.time:
        return float(a.wall_time)
    return float(a.wall_time + (t - a.time) * (b.wall_time - a.wall_time) / (b.time - a.time))


def _since(point, origin: float, index: int = 0) -> float | None:
    if point is None or origin is None or (isinstance(origin, float) and math.isnan(origin)):
        return None
    return round(point[index] - origin, 3)


def format_times(rows: list[dict]) -> str:
    """A table: fault, at, detected and recovered after (trace s and wall s), attempts lost."""
    lines = [f"{'fault':<28} {'at':>7} {'detected':>9} {'recovered':>10} {'(wall s)':>17} {'lost':>5}"]
    for r in rows:
        def cell(x):
            return "-" if x is None else f"{x:.2f}"
        wall = f"{cell(r['detected_wall'])} / {cell(r['recovered_wall'])}"
        lines.append(f"{r['fault']:<28} {r['time']:7.1f} {cell(r['detected']):>9} {cell(r['recovered']):>10} "
                     f"{wall:>17} {r['lost_attempts']:5d}")
    return "\n".join(lines)
