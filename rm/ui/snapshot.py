"""The RM's compact view for the UI: what the actor hands the driver, at most once per poll.

``rm_snapshot(state, now, memo, pace)`` reads the RM's state without changing it and
returns plain tuples (cheap to build and to pickle): every node's free vector and
liveness, every app still running, the apps that ended since the last snapshot (``memo``
is the actor's record of those already sent, so an ended app crosses once) and the
pace so far, and with preemption on its counts (``preemption``).  An app's shares are its running count times the shares of one task
(``share_units``: task share 1/(h_i w_i), dominant share max_r d_ir/total_r, and the
share the policy ranks by, ``Policy.share`` of one task or, for a policy that defines only
``unit``, the unit the scheduler asked it for), computed once per distinct (demand, h,
h^c, weight).  Cost: one pass over the nodes and the jobs,
about 5 ms for 1,000 nodes and 4,500 apps all running, paid once per poll and never
per HTTP request.
"""

from __future__ import annotations

from rayrm.rm.core.shares import Holders, defined, share_units

#: the positions of an app tuple in ``rm_snapshot``'s ``apps``
APP_FIELDS = ("app", "status", "submit", "first_start", "finish", "reason", "attempts", "finished",
              "running", "pending", "task_share", "dominant_share", "eligible", "share")


def rm_snapshot(state, now: float, memo: dict, pace=None) -> dict:
    """The RM's state at wall time ``now`` (see the module docstring).

    ``memo`` is the caller's between snapshots: the ended apps already sent, and the RM's
    pace ticks counted so far.  ``pace`` (the actor's ``PaceMeter``): its lag now, and the
    ticks more than one heartbeat interval behind, counted over the new samples only.
    """
    sent_done = memo.setdefault("sent", set())
    lag, behind = pace.current() if pace is not None else (0.0, False)
    if pace is not None:
        fresh = pace.samples[memo.get("ticks", 0):]
        memo["ticks"] = memo.get("ticks", 0) + len(fresh)
        memo["over"] = memo.get("over", 0) + sum(1 for _, x in fresh if x > pace.interval)
    cluster = state.scheduler.cluster
    k = len(cluster.dims)
    records = state.nodes.table
    nodes = []
    for n in cluster.nodes:
        rec = records.get(n.name)
        alive = bool(rec is not None and rec.alive and n.alive)
        nodes.append((n.name, alive, tuple(n.free[:k]), len(n.containers),
                      rec.last_seen if rec is not None else 0.0))
    apps = []
    units: dict[tuple, tuple] = {}          # (demand, h, h^c, weight) -> the shares of one task
    own = state.scheduler.policy.share
    for app_id, job in state.log.jobs.items():
        done = job["status"] != "running"
        if done and app_id in sent_done:
            continue
        rec = state.apps.table.get(app_id)
        live = cluster.apps.get(app_id)
        if live is not None:
            key = (live.demand, live.h, live.h_c, live.weight)
            unit = units.get(key)
            if unit is None:
                mine = own.unit(Holders.one(live, cluster)) if own is not None else live.unit
                unit = units[key] = share_units(live, cluster) + (mine,)
            n = live.running
            row = (n, live.pending, n * unit[0], n * unit[1], live.eligible_count, defined(n * unit[4]) if n else 0.0)
        else:
            row = (0, 0, 0.0, 0.0, -1, 0.0)
        apps.append((app_id, job["status"], job["submit"], job["first_start"], job["finish"], job["reason"],
                     rec.attempt if rec is not None else 0, len(rec.finished_tasks) if rec is not None else 0)
                    + row)
        if done:
            sent_done.add(app_id)
    r = state.records
    start = r.clock.start if r.clock is not None else None
    out = {"time": r.trace(now), "wall": now, "start_wall": start, "nodes": nodes,
           "apps": apps, "allocations": r.allocations, "finished": r.finished,
           "epoch": state.resync.epoch, "lag": lag, "behind": behind, "ticks": memo.get("ticks", 0),
           "ticks_behind": memo.get("over", 0)}
    if state.preemptions.rules is not None:
        # containers preempted per app and queue so far, warned now, spared (``Preemptions.counts``)
        out["preemption"] = state.preemptions.counts()
    return out
