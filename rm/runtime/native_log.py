"""The ray-native run as a run log: what Ray did, laid onto the trace's nodes.

Ray reports, per task, the pool (Ray node) it ran on and its start and finish.
The attempts are swept in time order — finishes before starts at equal times —
through a ``ClusterState`` of the trace's nodes: a start takes the first node of
its pool where the task fits (first fit), a finish releases it, and every change
writes a share row, so tasks.csv, shares.csv and jobs.csv read like any other
mode's.  A start that fits no single node of its pool (the pool as a whole had
room) goes to the pool's least-loaded eligible node and is counted as a packing
overflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rayrm.rm.core.cluster import ClusterState
from rayrm.rm.runs.log import RunLog, app_shares

if TYPE_CHECKING:
    from rayrm.rm.runtime.native import _NativeRun


def build_log(run: "_NativeRun") -> tuple[RunLog, int]:
    """(run log, packing overflows) for a finished native run."""
    cfg = run.cfg
    scale, t0 = run.scale, run.start_wall

    def trace(wall: float) -> float:
        return max(0.0, (wall - t0) / scale)

    log = RunLog(cfg.dims, mode="ray", policy="ray-native", name=cfg.name, seed=run.seed)
    cluster = ClusterState(cfg.dims)
    for spec in cfg.nodes:
        cluster.add_node(spec)
        log.add_node(spec, 0.0, 0.0, ray_node=run.pool_nodes[run.pool_of_node[spec.name]])
    specs = {j.app.app_id: j.app for j in cfg.jobs}
    for app_id, wall in sorted(run.submitted.items(), key=lambda kv: kv[1]):
        spec = specs[app_id]
        if app_id in run.rejected:
            log.reject(spec, run.rejected[app_id], trace(wall), wall - t0)
        else:
            log.submit(spec, trace(wall), wall - t0)
            cluster.add_app(spec)

    events = []
    for app, task, start, finish, pool in run.results:
        events.append((finish, 0 if finish > start else 2, app, task, pool))   # a 0 s task: after its start
        events.append((start, 1, app, task, pool))
    events.sort(key=lambda e: (e[0], e[1], e[2], e[3]))
    pool_nodes = {p.pool_id: [cluster.node_index[n] for n in p.nodes] for p in run.pools}
    held: dict[tuple[str, int], int] = {}
    left = {a: s.num_tasks for a, s in specs.items() if a not in run.rejected}
    last_finish: dict[str, float] = {}
    overflows = 0
    for wall, kind, app_id, task, pool in events:
        t = trace(wall)
        app = cluster.apps[app_id]
        if kind == 1:
            candidates = [cluster.nodes[m] for m in pool_nodes.get(pool, []) if app.eligible[m]]
            node = next((n for n in candidates if cluster.fits(app, n)), None)
            if node is None:
                overflows += 1
                node = max(candidates, key=lambda n: min(n.free))
            c = cluster.allocate(app, node, task)
            held[(app_id, task)] = c.container_id
            log.start(app_id, task, 0, node.name, trace(run.submitted[app_id]), t, wall - t0,
                      container=c.container_id)
        else:
            cid = held.pop((app_id, task))
            cluster.release(cid)
            log.end(app_id, task, 0, "finished", t, wall - t0, container=cid)
            left[app_id] -= 1
            last_finish[app_id] = t
        log.share(t, app_id, app_shares(app, cluster), app.running)
        if kind != 1 and left[app_id] == 0:
            log.app_done(app_id, t, wall - t0)
    return log, overflows
