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
kill-ray-node  host's death), or, when the RM was down    the next attempt of each attempt lost there
               through the expiry, its registration into  before the NM registered again); the
               the restarted RM that lost its attempts    detection time when nothing was running
kill-am        the attempt declared FAILED                the new attempt has registered and holds the
               (``am_expired``)                           app's finished tasks and running containers
                                                          (``am_registered``); it asks for the rest in
                                                          the same heartbeat cycle
kill-rm        the restarted RM has rebuilt its state     every live NM and AM has resynchronised
               and serves calls (``rm_recovered``)        with that RM (``rm_resynced``, same epoch);
                                                          NMs lost and AM attempts failed meanwhile
                                                          do not count
============== ========================================== =============================================

A partition or a slow NM host is measured as an NM fault (the NMs behind it), a partition
or a slow AM host as an AM host's (its apps' attempts), a lossy link is not (what it lost
is in summary.json ``faults.link_lost``).  ``work_lost`` is the work the fault threw away,
in task-seconds: Σ (stop − start) over the task attempts that ended ``lost`` from the
fault until its NMs registered again, on its NMs (an AM fault loses none), where stop
is the fault's time for a kill (the work dies with it) and the attempt's end otherwise (it
ran on behind a partition or a slow link until the RM gave it up).  Faults that overlap
on the same NMs each count the attempts lost there in their windows.
``availability`` over a run is the share of node-seconds usable:

    A = Σ_m alive_m / Σ_m (end − join_m)

alive_m the time NM m was registered (node_join to node_lost) before the run's end (its
last task's finish), join_m its first join.

A fault whose recovery is not in the log (the run ended first) has ``None``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from rayrm.rm.core.fault_rules import am_host_died
from rayrm.rm.core.faults import LASTING, parse_fault
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
    faults = ev[ev.kind == "fault"]
    for f in faults.itertuples(index=False):
        spec = f.detail.split(" ")[0]
        kind = spec.split("@")[0].split(":")[0]
        after = ev[ev.time >= f.time]
        detecting = after[after.time < _detect_until(faults, f, spec)]
        lost, work = 0, 0.0                        # an AM fault loses no task attempt
        if kind == "kill-am":
            detected = _first(after, "am_expired", app=f.app)
            recovered = _first(after, "am_registered", app=f.app)
        elif kind in ("partition-am-host", "slow-am-host"):
            # detected: the first of its apps' attempts failed; recovered: each registered again
            apps = affected_nodes(kind, f.node, f.detail)
            expired = detecting[(detecting.kind == "am_expired") & detecting.app.isin(apps)]
            detected = _row(expired.iloc[0]) if len(expired) else None
            back = [after[(after.kind == "am_registered") & (after.app == a)] for a in expired.app.unique()]
            recovered = max((_row(b.iloc[0]) for b in back if len(b)), default=detected) \
                if all(len(b) for b in back) else None
        elif kind == "drop":
            detected = recovered = None            # nothing is lost for good: retried calls
        elif kind == "kill-am-host":
            # detected: the RM failed the host's attempts; recovered: the last of them has
            # registered its new attempt (on the restarted host)
            host = am_host_died(f"am-{spec.split('@')[0].split(':')[1]}")
            expired = detecting[(detecting.kind == "am_expired") & detecting.detail.str.contains(host, regex=False)]
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
            detected, hit = _nm_losses(after, detecting, tasks, f, affected_nodes(kind, f.node, f.detail))
            lost, work = len(hit), work_lost(hit, kind, float(f.time))
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
                    "work_lost": work,
                    "detected": _since(detected, f.time), "recovered": _since(recovered, f.time),
                    "detected_wall": _since(detected, f.wall_time, 1),
                    "recovered_wall": _since(recovered, f.wall_time, 1)})
    return out


def work_lost(hit, kind: str, at: float) -> float:
    """Task-seconds of the attempts ``hit`` a fault at ``at`` lost (module docstring)."""
    # a kill stops the work at the fault; behind a partition or a slow link it runs on, and
    # is thrown away, until the RM declares the attempt lost
    stop = hit.finish.clip(upper=at) if kind.startswith("kill") else hit.finish
    return round(float((stop - hit.start).clip(lower=0).sum()), 3)


def availability(path: str | Path) -> float | None:
    """A = Σ alive node-seconds / Σ node-seconds from each node's first join to the run's
    end (module docstring); None for a run without tasks."""
    run = RunDir(path)
    ev, tasks = run.events, run.tasks
    if not len(tasks):
        return None
    end = float(tasks.finish.max())
    alive = total = 0.0
    for node, rows in ev[ev.kind.isin(["node_join", "node_lost"])].groupby("node"):
        since, first = None, None
        for r in rows.sort_values("time", kind="stable").itertuples(index=False):
            t = min(float(r.time), end)
            if r.kind == "node_join" and since is None:
                since = t
                first = t if first is None else first
            elif r.kind == "node_lost" and since is not None:
                alive += t - since
                since = None
        if since is not None:
            alive += end - since
        if first is not None:
            total += end - first
    return round(alive / total, 4) if total > 0 else None


def _nm_losses(after, detecting, tasks, f, nodes: list[str]):
    """(detected, the attempts lost) of an NM fault at ``f`` on ``nodes``; ``after``: the
    events from the fault on, ``detecting``: those a loss can be this fault's among.

    Each NM's window runs from the fault to its first registration after it, as a new NM
    (``node_join``, once declared lost) or into a restarted RM (``node_resync``: an RM down
    through the NM's expiry learns of the crash only then, and loses what the NM no longer
    reports); a later loss of the node is another fault's.  Detected: the first NM declared
    lost in its window, or that registration when it lost attempts."""
    kinds = ["node_lost", "node_join", "node_resync"]
    marks = after[after.node.isin(nodes) & after.kind.isin(kinds)]
    lost = tasks[(tasks.status == "lost") & tasks.node.isin(nodes) & (tasks.finish >= f.time)]
    back, detections = {}, []
    for node, rows in marks.groupby("node", sort=False):
        again = rows[rows.kind != "node_lost"]
        back[node] = float(again.time.iloc[0]) if len(again) else math.inf
        gone = rows[(rows.kind == "node_lost") & (rows.time <= back[node]) & rows.index.isin(detecting.index)]
        if len(gone):
            detections.append(_row(gone.iloc[0]))
        elif len(again) and ((lost.node == node) & ((lost.finish - back[node]).abs() < 1e-6)).any():
            detections.append(_row(again.iloc[0]))
    if not detections:
        return None, lost.iloc[:0]
    until = [back.get(node, -math.inf) for node in lost.node]      # a node never back: none of its own
    return min(detections), lost[lost.finish.to_numpy(dtype=float) <= until]


def _detect_until(faults, f, spec: str) -> float:
    """Until when a loss can be this fault's: before the next fault on the same target (what
    that one causes is its own), and within a partition or slow link while it lasts (the
    RM hears the silence then), with 5% + 1 trace s of slack."""
    same = faults.detail.str.split(" ").str[0].str.split("@").str[0] == spec.split("@")[0]
    again = faults[(faults.time > f.time) & same]
    until = float(again.time.min()) if len(again) else math.inf
    lasting = parse_fault(spec).duration if spec.split("@")[0].split(":")[0] in LASTING else 0.0
    return min(until, float(f.time) + 1.05 * lasting + 1.0) if lasting else until


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


def write_costs(path: str | Path, summary: dict) -> dict:
    """What the faults of the run in ``path`` cost: ``faults.json`` (per fault, the rows of
    ``recovery_times``) and, in summary.json's ``faults``, the availability, the worst
    recovery (trace s) and the work lost (task-seconds).  Returns the summary."""
    import json  # noqa: PLC0415
    rows = recovery_times(path)
    avail = availability(path)
    (Path(path) / "faults.json").write_text(json.dumps({"faults": rows, "availability": avail}, indent=2) + "\n")
    faults = summary.setdefault("faults", {})
    faults["availability"] = avail
    faults["worst_recovery"] = max((r["recovered"] for r in rows if r["recovered"] is not None), default=None)
    faults["work_lost"] = round(sum(r["work_lost"] for r in rows), 3)
    faults["unrecovered"] = [r["fault"] for r in rows if r["detected"] is not None and r["recovered"] is None]
    (Path(path) / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
