"""The ``ray-native`` baseline: the trace submitted straight to Ray's own scheduler, no RM.

What a Ray user would do without rayrm: every task becomes a Ray task submitted at
its job's submit time, asking for its demand as custom resources, with a label
selector for its constraint; Ray's scheduler decides which waits and where it runs.

* **Node capacities as custom resources.**  A Ray node per *pool* carries the sum
  of its trace nodes' capacities as ``rayrm_<dim>`` resources.  A pool is a set of
  trace nodes every job constraint treats alike (the constraint "atoms"), so one
  pool is one Ray node only when constraints need it: an unconstrained trace is
  one pool.  Packing is therefore per pool, not per machine — coarser than the
  real cluster; where a task's start finds no single trace node with room (the
  run log names a node per attempt), it is counted in ``packing_overflows``.
* **Constraints as label selectors.**  Each pool's Ray node has the label
  ``rayrm-pool=<id>``; a job's tasks carry ``label_selector={"rayrm-pool":
  "in(p0,p2,...)"}``, the pools its constraint admits (any constraint is
  expressible this way because pools are its atoms).
* **Where it runs.**  Without an address, a local ``ray.cluster_utils.Cluster``
  with one Ray node per pool is started (``ray_start_args`` gives the nodes; the
  head is pool 0).  With an address, or in an already initialised session, the
  cluster must already have them (``ray start --resources ... --labels
  rayrm-pool=p0``): otherwise an InputError lists the nodes to start.
* **The run directory.**  Tasks report where and when they ran; afterwards the
  attempts are replayed in time order onto the trace's nodes (first fit within
  the pool) to write the same tables as the other modes (``build_log``, below).
  Workers are pre-started on every pool node before t = 0, like the replay's.

The run log (``build_log``): Ray reports, per task, the pool (Ray node) it ran on
and its start and finish.  The attempts are swept in time order — finishes
before starts at equal times — through a ``ClusterState`` of the trace's nodes: a
start takes the first node of its pool where the task fits (first fit), a finish
releases it, and every change writes a share row, so tasks.csv, shares.csv and
jobs.csv read like any other mode's.  A start that fits no single node of its
pool (the pool as a whole had room) goes to the pool's least-loaded eligible node
and is counted as a packing overflow.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import ray

from rayrm.rm.core.clock import TraceClock
from rayrm.rm.core.cluster import ClusterState
from rayrm.rm.core.config import ExperimentConfig
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import AppSpec
from rayrm.rm.core.shares import app_shares, tasks_fit
from rayrm.rm.runs.log import RunLog
from rayrm.rm.runtime.session import SYSTEM_CONFIG, connect
from rayrm.rm.service.protocol import NAMESPACE

POOL_LABEL = "rayrm-pool"
PREFIX = "rayrm_"
WARM_CAP = 128            # at most this many warm workers per pool node
_LABEL_OK = re.compile(r"^[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$")


@dataclass(frozen=True)
class Pool:
    pool_id: str
    nodes: tuple[str, ...]
    resources: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def pools(cfg: ExperimentConfig) -> list[Pool]:
    """Trace nodes grouped by which job constraints admit them (first appearance order)."""
    constraints = list({str(j.app.constraint): j.app.constraint for j in cfg.jobs}.values())
    groups: dict[tuple, list] = {}
    for n in cfg.nodes:
        groups.setdefault(tuple(c.matches(n.name, n.attributes) for c in constraints), []).append(n)
    out = []
    for i, members in enumerate(groups.values()):
        res = {f"{PREFIX}{d}": sum(n.capacity[d] for n in members) for d in cfg.dims}
        shared = dict(members[0].attributes)
        for n in members[1:]:
            shared = {k: v for k, v in shared.items() if n.attributes.get(k) == v}
        labels = {k: str(v) for k, v in shared.items() if _LABEL_OK.match(k) and _LABEL_OK.match(str(v))}
        out.append(Pool(f"p{i}", tuple(n.name for n in members), res, labels | {POOL_LABEL: f"p{i}"}))
    return out


def ray_start_args(cfg: ExperimentConfig) -> list[dict]:
    """Keyword arguments for one Ray node per pool (ray.cluster_utils.Cluster.add_node)."""
    return [{"num_cpus": 0, "resources": dict(p.resources), "labels": dict(p.labels)} for p in pools(cfg)]


def eligible_pools(app: AppSpec, cfg: ExperimentConfig, pool_list: list[Pool]) -> list[str]:
    """Pools whose nodes the app may use and where one of its tasks fits a node."""
    specs = {n.name: n for n in cfg.nodes}
    demand = app.demand.vector(cfg.dims)
    out = []
    for p in pool_list:
        n = specs[p.nodes[0]]
        if app.constraint.matches(n.name, n.attributes) and any(
                tasks_fit(specs[m].capacity.vector(cfg.dims), demand) >= 1 for m in p.nodes):
            out.append(p.pool_id)
    return out


def start_local_cluster(cfg: ExperimentConfig):
    """A local Cluster with one Ray node per pool (the head is pool 0); connects to it."""
    from ray.cluster_utils import Cluster  # noqa: PLC0415

    args = ray_start_args(cfg)
    small = 80 * 1024 * 1024
    cluster = Cluster(initialize_head=True, head_node_args={
        **args[0], "num_cpus": 1, "object_store_memory": small, "include_dashboard": False,
        "_system_config": SYSTEM_CONFIG})
    for a in args[1:]:
        cluster.add_node(**a, object_store_memory=small)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace=NAMESPACE, logging_level="ERROR")
    return cluster


def _pool_nodes(pool_list: list[Pool]) -> dict[str, str]:
    """pool id -> Ray node id, from the live cluster's labels; InputError if any is missing."""
    found = {}
    for n in ray.nodes():
        pid = (n.get("Labels") or {}).get(POOL_LABEL)
        if n.get("Alive") and pid:
            found[pid] = n["NodeID"]
    missing = [p for p in pool_list if p.pool_id not in found]
    if missing:
        lines = "; ".join(
            f"ray start --num-cpus 0 --resources '{_json(p.resources)}' "
            f"--labels {','.join(f'{k}={v}' for k, v in p.labels.items())}" for p in missing)
        raise InputError(f"ray-native needs one Ray node per pool of trace nodes; start: {lines}")
    return found


def _json(d: dict) -> str:
    import json  # noqa: PLC0415
    return json.dumps(d, separators=(",", ":"))


def replay_native(cfg: ExperimentConfig, *, out=None, time_scale: float, address: str | None = None,
                  payload: str = "sleep", seed: int, progress: bool | None = None, twin: bool = False) -> dict:
    """Run the trace on Ray's scheduler alone; returns the summary (see the module docstring)."""
    pool_list = pools(cfg)
    cluster = None
    started = False
    if not ray.is_initialized():
        if address:
            connect(address)
        else:
            cluster = start_local_cluster(cfg)
        started = True
    try:
        run = NativeRun(cfg, pool_list, _pool_nodes(pool_list), time_scale, payload, seed)
        run.warm()
        run.execute(progress)
    finally:
        if started:
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
    summary = run.write(out)
    if twin:
        summary["twin"] = {"note": "ray-native has no simulator twin (Ray's scheduler is not a policy)"}
    return summary


class NativeRun:
    """Submit, wait, and turn what Ray did into a run log."""

    def __init__(self, cfg, pool_list, pool_nodes, scale, payload, seed):
        self.cfg, self.pools, self.pool_nodes = cfg, pool_list, pool_nodes
        self.scale, self.payload, self.seed = scale, payload, seed
        self.pool_of_node = {n: p.pool_id for p in pool_list for n in p.nodes}
        self.pool_of_ray = {rid: pid for pid, rid in pool_nodes.items()}
        self.results: list[tuple] = []          # (app, task, start, finish, pool)
        self.submitted: dict[str, float] = {}   # app -> wall submit time
        self.rejected: dict[str, str] = {}
        self.clock: TraceClock | None = None    # t = 0 a moment after ``execute`` starts
        self.wall_seconds = 0.0

    def warm(self) -> None:
        """Start workers on every pool node (at most WARM_CAP each) and leave them idle."""
        from rayrm.nodes.executors import peak_containers  # noqa: PLC0415
        specs = {n.name: n for n in self.cfg.nodes}
        barrier = _Barrier.options(num_cpus=0).remote()
        refs = []
        for p in self.pools:
            count = min(WARM_CAP, peak_containers([specs[n] for n in p.nodes], self.cfg.apps, self.cfg.dims))
            refs += [_warm.options(label_selector={POOL_LABEL: p.pool_id}).remote(barrier)
                     for _ in range(count)]
        ray.get(barrier.expect.remote(len(refs)))
        ray.wait(refs, num_returns=len(refs), timeout=300)   # workers that could not start: go on
        ray.get(barrier.release.remote())
        ray.get(refs)
        ray.kill(barrier)

    def execute(self, progress: bool | None) -> None:
        jobs = sorted(self.cfg.jobs, key=lambda j: (j.app.submit, j.app.app_id))
        total = sum(j.app.num_tasks for j in jobs)
        show = sys.stderr.isatty() if progress is None else progress
        self.clock = clock = TraceClock(time.time() + 0.3, self.scale)
        pending: dict = {}
        k, last_print = 0, 0.0
        while k < len(jobs) or pending:
            now = time.time()
            while k < len(jobs) and clock.wall(jobs[k].app.submit) <= now:
                pending.update(self._submit(jobs[k], now))
                k += 1
            next_submit = clock.wall(jobs[k].app.submit) if k < len(jobs) else None
            timeout = 0.5 if next_submit is None else max(0.0, min(0.5, next_submit - time.time()))
            if pending:
                ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=timeout)
                for ref, (start, finish, ray_node) in zip(ready, ray.get(ready)):
                    app, task = pending.pop(ref)
                    self.results.append((app, task, start, finish, self.pool_of_ray.get(ray_node, "")))
            elif timeout > 0:
                time.sleep(timeout)
            if show and time.time() - last_print >= (0.5 if sys.stderr.isatty() else 10.0):
                t = clock.trace(time.time())
                line = f"rayrm replay [ray-native] t={t:8.1f}s  finished {len(self.results)}/{total}"
                print("\r" + line if sys.stderr.isatty() else line, end="" if sys.stderr.isatty() else "\n",
                      file=sys.stderr, flush=True)
                last_print = time.time()
        if show and sys.stderr.isatty():
            print(file=sys.stderr)
        self.wall_seconds = clock.elapsed(time.time())

    def _submit(self, job, now: float) -> dict:
        app = job.app
        self.submitted[app.app_id] = now
        allowed = eligible_pools(app, self.cfg, self.pools)
        if not allowed:
            self.rejected[app.app_id] = f"no node can run a task of {app.app_id} (constraint or size)"
            return {}
        selector = {POOL_LABEL: allowed[0] if len(allowed) == 1 else f"in({','.join(allowed)})"}
        resources = {f"{PREFIX}{d}": float(app.demand[d]) for d in self.cfg.dims if app.demand[d] > 0}
        durations = job.task_durations(self.seed)
        return {_native_task.options(resources=resources, label_selector=selector, name=f"{app.app_id}-{t}")
                .remote(self.clock.wall_seconds(float(durations[t])), self.payload): (app.app_id, t)
                for t in range(app.num_tasks)}

    def write(self, out) -> dict:
        log, overflows = build_log(self)
        extra = {"time_scale": self.scale, "executor": "ray-task", "payload": self.payload,
                 "ray_nodes": len(self.pools), "pools": {p.pool_id: len(p.nodes) for p in self.pools},
                 "packing_overflows": overflows, "tasks_finished_twice": 0}
        if out is not None:
            return log.write(Path(out), wall_seconds=self.wall_seconds, **extra)
        return log.summary(wall_seconds=self.wall_seconds, **extra)


def build_log(run: "NativeRun") -> tuple[RunLog, int]:
    """(run log, packing overflows) for a finished native run."""
    cfg = run.cfg
    trace, elapsed = run.clock.trace, run.clock.elapsed

    log = RunLog(cfg.dims, mode="ray", policy="ray-native", name=cfg.name, seed=run.seed)
    cluster = ClusterState(cfg.dims)
    for spec in cfg.nodes:
        cluster.add_node(spec)
        log.add_node(spec, 0.0, 0.0, ray_node=run.pool_nodes[run.pool_of_node[spec.name]])
    specs = {j.app.app_id: j.app for j in cfg.jobs}
    for app_id, wall in sorted(run.submitted.items(), key=lambda kv: kv[1]):
        spec = specs[app_id]
        if app_id in run.rejected:
            log.reject(spec, run.rejected[app_id], trace(wall), elapsed(wall))
        else:
            log.submit(spec, trace(wall), elapsed(wall))
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
            log.start(app_id, task, 0, node.name, trace(run.submitted[app_id]), t, elapsed(wall),
                      container=c.container_id)
        else:
            cid = held.pop((app_id, task))
            cluster.release(cid)
            log.end(app_id, task, 0, "finished", t, elapsed(wall), container=cid)
            left[app_id] -= 1
            last_finish[app_id] = t
        log.share(t, app_id, app_shares(app, cluster), app.running)
        if kind != 1 and left[app_id] == 0:
            log.app_done(app_id, t, elapsed(wall))
    return log, overflows


@ray.remote(num_cpus=0, max_retries=0)
def _native_task(seconds: float, kind: str) -> tuple[float, float, str]:
    from rayrm.nodes.executors import payload  # noqa: PLC0415
    start = time.time()
    start, finish = payload(start + seconds, kind)
    return start, finish, ray.get_runtime_context().get_node_id()


@ray.remote(num_cpus=0)
class _Barrier:
    """Holds warm-up tasks until all have arrived, so each one is a distinct worker."""

    def __init__(self):
        import asyncio  # noqa: PLC0415
        self.count, self.target, self.done = 0, None, asyncio.Event()

    async def expect(self, n: int) -> None:
        self.target = n
        if self.count >= n:
            self.done.set()

    async def release(self) -> None:
        self.done.set()

    async def arrive(self) -> None:
        self.count += 1
        if self.target is not None and self.count >= self.target:
            self.done.set()
        await self.done.wait()


@ray.remote(num_cpus=0, max_retries=0)
def _warm(barrier) -> int:
    import os  # noqa: PLC0415
    ray.get(barrier.arrive.remote())
    return os.getpid()
