"""The Ray replay driver: a trace replayed by RM, NM and AM actors running real timed tasks.

``replay(config, policy=..., out=..., time_scale=..., address=...)`` returns the
run's summary (summary.json) and writes the run directory of docs/design.md to ``out``.

1. **Connect.**  ``address=None`` starts a local Ray (``ray.init`` with this
   machine's CPUs, a small object store, and workers kept warm via
   ``_system_config``); an address (or ``auto``) joins the cluster started with
   ``ray start``; if Ray is already initialised (tests) that session is used.
2. **Place.**  The trace's nodes are assigned to Ray nodes (``rayrm.nodes.placement``);
   one NodeManager host actor per Ray node that got NMs; the executor is chosen
   (``rayrm.nodes.executors.choose_executor``).
3. **Warm up.**  The RM actor (``rayrm-rm``) starts; task-executor workers are
   pre-started, or the container executor actors are; every NM registers.
4. **t = 0.**  ``start_wall`` is set a moment ahead and handed to the RM and the
   AM host; trace time = (wall − start_wall) / time_scale everywhere.
5. **Run.**  The AM host registers each job at its submit time, asks, launches
   and finishes; the driver (``rayrm.rm.runtime.supervisor``) shows progress on stderr (trace
   time, running containers, finished tasks) until every AM is done, watches the
   NM host actors (a dead one's NMs are declared lost and it is resumed), and
   injects the faults asked for (``rayrm.rm.core.faults``: ``--fault`` and the config's
   ``faults:``).  The RM keeps its snapshot and journal in ``<out>/rm-state``
   (removed after a successful run) so that it survives a restart.
6. **Collect.**  The RM's run log is written to ``out``; summary.json gains the
   scheduling latencies, the NM heartbeat figures, the executor, and with
   ``twin=True`` the simulator's run of the same trace and seed with per-job
   completion-time ratios (replay / simulator).
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from rayrm.nodes.placement import alive_ray_nodes, place_nodes
from rayrm.rm.core.config import MIN_EXPIRY_WALL, ExperimentConfig, load_config
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.faults import am_host_of, check_cluster, config_faults
from rayrm.rm.core.policies import policy_for_run
from rayrm.rm.runs.metrics import percentiles
from rayrm.rm.runtime.pace import pace_summary, pace_warning
from rayrm.rm.runtime.session import connect
from rayrm.rm.runtime.webui import start_live_ui
from rayrm.rm.runtime.supervisor import (AM_HOST_RESTARTS, NM_HOST_RESTARTS, FaultInjector, StopSignal, Supervisor, merge_outcomes,
                                         rm_call)
from rayrm.rm.service.protocol import NAMESPACE, RM_NAME
from rayrm.rm.service.store import StateStore
from rayrm.rm.sim.engine import simulate

START_LEAD = 0.3          # wall seconds between the last preparation and t = 0
INTERRUPT_EXPORT_WAIT = 3.0   # wall seconds an interrupted replay waits for the RM's run log


def _scaled(values, scale: float) -> dict:
    """``runs.metrics.percentiles`` of ``values`` × ``scale``, rounded, with their count ``n``."""
    if len(values) == 0:
        return {}
    return {k: round(v * scale, 3) for k, v in percentiles(values).items()} | {"n": len(values)}


def replay(config: ExperimentConfig | str | Path, policy: str | None = None, out: str | Path | None = None,
           time_scale: float | None = None, address: str | None = None, *, executor: str = "auto",
           payload: str | None = None, twin: bool = False, seed: int | None = None,
           progress: bool | None = None, faults=(), kill_ray_node=None, until: float | None = None,
           am_hosts: int | None = None, ui=None) -> dict:
    """Replay ``config`` on Ray under ``policy``; see the module docstring.

    ``ui``: a ``rayrm.rm.ui.server.UISettings`` to serve the web UI and YARN's REST API
    while the replay runs (``rayrm.rm.runtime.webui``); None: no UI.

    ``faults`` are fault specs (``rayrm.rm.core.faults``) injected besides the config's own;
    ``kill_ray_node(node_id)`` replaces how kill-ray-node takes a Ray node down
    (default: kill its raylet), e.g. ``ray.cluster_utils.Cluster.remove_node``.

    Interrupts: SIGINT or SIGTERM (or trace time ``until``) end the run within a few
    seconds; the run directory is still written with what ran — jobs not done are
    ``unfinished``, summary.json has ``"interrupted": true`` and the reason — and the
    actors are killed.  ``--twin`` of an interrupted run is skipped.
    """
    cfg = config if isinstance(config, ExperimentConfig) else load_config(config)
    policy_name = policy or cfg.policy
    scale = float(time_scale if time_scale is not None else cfg.run["time_scale"])
    if not scale > 0:
        raise InputError(f"--time-scale must be positive, got {time_scale}")
    fault_list = config_faults(cfg, faults)
    if until is not None and not until > 0:
        raise InputError(f"--until must be a positive number of trace seconds, got {until}")
    if twin and out is None:
        raise InputError("--twin needs --out (the twin's run directory goes under it)")
    run_seed = cfg.seed if seed is None else int(seed)
    kind = payload or str(cfg.run.get("payload", "sleep"))
    if kind not in ("sleep", "cpu"):
        raise InputError(f"unknown payload '{kind}' (choose from sleep, cpu)", field="run.payload")
    if policy_name == "ray-native":
        if fault_list:
            raise InputError("faults need rayrm's ResourceManager; the ray-native baseline has none")
        from rayrm.rm.runtime.native import replay_native  # noqa: PLC0415
        return replay_native(cfg, out=out, time_scale=scale, address=address, payload=kind,
                             seed=run_seed, progress=progress, twin=twin)
    policy_obj = policy_for_run(policy_name, cfg.run)

    started = connect(address)
    stop = StopSignal()              # after ray.init, which installs its own SIGTERM handler
    web = None
    try:
        web = start_live_ui(cfg, policy_name, scale, fault_list, ui) if ui is not None else None
        session = _Session()
        try:
            summary = _run(cfg, policy_name, policy_obj, scale, executor, kind, run_seed, out, progress,
                           session, fault_list, kill_ray_node, until, stop, am_hosts)
        finally:
            session.close()
    finally:
        if web is not None:
            web.close()
        stop.restore()
        if started:
            import ray  # noqa: PLC0415
            ray.shutdown()
    warning = pace_warning(summary.get("pace") or {}, scale)
    if warning and progress is not False:
        print(f"rayrm replay: {warning}", file=sys.stderr, flush=True)
    if twin and summary.get("interrupted"):
        summary["twin"] = {"note": "skipped: the replay was interrupted"}
    elif twin:
        summary["twin"] = twin_comparison(cfg, policy_name, run_seed, out, summary, faults=faults)
        if out is not None:
            import json  # noqa: PLC0415
            (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


class _Session:
    """The actors of one replay, killed at the end whatever happens."""

    def __init__(self):
        self.actors: list = []
        self.pinned: list = []

    def add(self, actor):
        self.actors.append(actor)
        return actor

    def pin(self, value):
        """``ray.put(value)``, the reference held until the replay ends: a restartable actor
        constructed from it (the RM, NM and AM hosts) can be restarted — Ray re-reads its
        constructor arguments, and large ones live in the object store only while referenced."""
        import ray  # noqa: PLC0415
        ref = ray.put(value)
        self.pinned.append(ref)
        return ref

    def close(self) -> None:
        import ray  # noqa: PLC0415
        for a in reversed(self.actors):
            try:
                ray.kill(a)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors.clear()
        self.pinned.clear()


@dataclass
class Plan:
    """Where a replay's NodeManagers live and how their containers run (no Ray calls)."""

    hosted: dict[str, list]       # Ray node id -> NMs (NodeSpecs) registered before t = 0
    events: dict[str, list]       # Ray node id -> (trace time, join|leave, NM name, spec or None)
    peaks: dict[str, int]         # Ray node id -> most containers that could run there at once
    executor: str                 # task | actor
    warm: dict[str, int]          # Ray node id -> task-executor workers to pre-start


def plan_replay(cfg: ExperimentConfig, ray_nodes: list, executor: str = "auto") -> Plan:
    """Place every NM (the config's nodes and those joining later) and pick the executor."""
    from rayrm.nodes.executors import TASK_WORKERS_PER_CPU, choose_executor, peak_containers  # noqa: PLC0415
    initial = {n.name for n in cfg.nodes}
    joining = {e.node: e.spec for e in cfg.node_events if e.spec is not None and e.node not in initial}
    placement = place_nodes(cfg.nodes + list(joining.values()), ray_nodes)
    hosted: dict[str, list] = defaultdict(list)
    for spec in cfg.nodes:
        hosted[placement[spec.name].node_id].append(spec)
    events: dict[str, list] = defaultdict(list)
    later: dict[str, list] = defaultdict(list)
    for e in cfg.node_events:
        if e.node in placement:
            rid = placement[e.node].node_id
            events[rid].append((e.time, "join" if e.spec is not None else "leave", e.node, e.spec))
            hosted.setdefault(rid, [])
    for name, spec in joining.items():
        later[placement[name].node_id].append(spec)
    cpus = {r.node_id: r.cpus for r in ray_nodes}
    peaks = {rid: peak_containers(specs + later[rid], cfg.apps, cfg.dims) for rid, specs in hosted.items()}
    chosen = choose_executor(executor, peaks, cpus)
    warm = {rid: min(peaks[rid], int(TASK_WORKERS_PER_CPU * max(1.0, cpus[rid]))) for rid in hosted}
    return Plan(dict(hosted), dict(events), peaks, chosen, warm)


def _run(cfg: ExperimentConfig, policy_name: str, policy_obj, scale: float, executor: str, kind: str,
         seed: int, out, progress, session: _Session, faults: list, kill_ray_node,
         until: float | None = None, stop: StopSignal | None = None, am_hosts: int | None = None) -> dict:
    import ray  # noqa: PLC0415
    from ray.util.scheduling_strategies import (
        NodeAffinitySchedulingStrategy as Affinity,  # noqa: PLC0415
    )

    from rayrm.apps.am import AMJob, ApplicationMasterHost  # noqa: PLC0415
    from rayrm.nodes.executors import make_container_executor  # noqa: PLC0415
    from rayrm.nodes.host import NodeManagerHost  # noqa: PLC0415
    from rayrm.rm.runtime.actor import RM_MAX_RESTARTS, ResourceManager  # noqa: PLC0415

    interval_wall = float(cfg.run["heartbeat_interval"]) * scale
    here = ray.get_runtime_context().get_node_id()
    ray_nodes = alive_ray_nodes()
    plan = plan_replay(cfg, ray_nodes, executor)
    doomed = {ray_nodes[f.index].node_id for f in faults if f.kind == "kill-ray-node" and f.index < len(ray_nodes)}
    am_nodes = am_host_nodes([r for r in ray_nodes if r.node_id not in doomed] or ray_nodes[:1],
                             am_hosts if am_hosts is not None else (int(cfg.run.get("am_hosts", 0)) or None))
    check_cluster(faults, len(ray_nodes), len(plan.hosted), len(am_nodes))
    chosen = plan.executor
    state_dir = _state_dir(out)
    secret = os.urandom(16)

    # The RM is pinned to the driver's node, where its snapshot and journal are written,
    # so a restart (max_restarts) reads them back (rm/service/store.py).
    rm = session.add(ResourceManager.options(
        name=RM_NAME, namespace=NAMESPACE, max_restarts=RM_MAX_RESTARTS,
        scheduling_strategy=Affinity(here, soft=False)).remote(
        dims=cfg.dims, nodes=session.pin(cfg.nodes), policy=policy_obj, policy_name=policy_name, time_scale=scale,
        heartbeat_interval=float(cfg.run["heartbeat_interval"]), nm_expiry=int(cfg.run["nm_expiry"]),
        am_expiry=int(cfg.run["am_expiry"]), max_attempts=int(cfg.run["max_attempts"]),
        state_dir=str(state_dir), secret=secret, name=cfg.name, seed=seed))
    hosts, host_of_node = {}, {}
    for i, (rid, specs) in enumerate(plan.hosted.items()):
        container_actor = (session.add(make_container_executor(rid))
                           if chosen == "actor" and kind == "cpu" else None)
        hosts[f"nm-{i}"] = session.add(NodeManagerHost.options(
            name=f"rayrm-nm-{i}", namespace=NAMESPACE, max_restarts=NM_HOST_RESTARTS,
            scheduling_strategy=Affinity(rid, soft=False)).remote(
            f"nm-{i}", RM_NAME, session.pin(specs), rid, interval_wall=interval_wall, executor=chosen,
            container_actor=container_actor, events=session.pin(plan.events.get(rid, ())), secret=secret))
        host_of_node.update({s.name: f"nm-{i}" for s in specs})
        host_of_node.update({e[2]: f"nm-{i}" for e in plan.events.get(rid, ()) if e[1] == "join"})
    ray.get([h.prewarm.remote(plan.warm[rid]) for h, rid in zip(hosts.values(), plan.hosted)])
    ray.get([h.register.remote() for h in hosts.values()])
    jobs = [AMJob(j.app, tuple(float(x) for x in j.task_durations(seed))) for j in cfg.jobs]
    # AM hosts spread over the Ray nodes like NM hosts (one per Ray node with CPUs), so the
    # RM is the only central actor; the jobs are dealt round-robin in submit order
    # (rm.core.faults.am_host_of, which the simulator's kill-am-host follows).  Not on a Ray
    # node a kill-ray-node fault will take down.
    dealt: list[list] = [[] for _ in am_nodes]
    host_of = am_host_of([j.spec for j in jobs], len(am_nodes))
    for job in sorted(jobs, key=lambda j: (j.spec.submit, j.spec.app_id)):
        dealt[host_of[job.spec.app_id]].append(job)
    ams, am_of_app = {}, {}
    for i, (rid, mine) in enumerate(zip(am_nodes, dealt)):
        ams[f"am-{i}"] = session.add(ApplicationMasterHost.options(
            name=f"rayrm-am-{i}", namespace=NAMESPACE, max_restarts=AM_HOST_RESTARTS,
            scheduling_strategy=Affinity(rid, soft=False)).remote(
            f"am-{i}", RM_NAME, {h: f"rayrm-{h}" for h in hosts}, session.pin(mine), time_scale=scale,
            interval_wall=interval_wall, payload=kind))
        am_of_app.update({j.spec.app_id: ams[f"am-{i}"] for j in mine})
    ray.get([am.ready.remote() for am in ams.values()])

    start_wall = time.time() + START_LEAD
    ray.get([rm.start_clock.remote(start_wall)] + [h.start.remote(start_wall, scale) for h in hosts.values()])
    done_refs = {am.run.remote(start_wall): hid for hid, am in ams.items()}
    total = sum(j.app.num_tasks for j in cfg.jobs)
    max_task = max((max(a.durations) if a.durations else 0.0) for a in jobs) * scale
    injector = None
    if faults:
        nms_on = {rid: sorted(s.name for s in specs) for rid, specs in plan.hosted.items()}
        expiry = max(MIN_EXPIRY_WALL, int(cfg.run["nm_expiry"]) * interval_wall)
        injector = FaultInjector(faults, start_wall=start_wall, time_scale=scale, rm=rm, am=am_of_app, am_hosts=ams, hosts=hosts,
                                 host_of_node=host_of_node, ray_nodes=ray_nodes, nms_on_ray_node=nms_on,
                                 nm_restart_after=2 * expiry, kill_ray_node=kill_ray_node)
    supervisor = Supervisor(rm, hosts, injector, ams=ams, start_wall=start_wall, time_scale=scale, total=total,
                            label=policy_name, progress=progress, stall_after=120.0 + 3 * max_task,
                            until=until, stop=stop)
    outcome = supervisor.run(done_refs)
    interrupted = outcome.get("interrupted", "")
    wall_seconds = time.time() - start_wall
    if interrupted:
        # what the AMs know so far (their run goes on until they are killed)
        ready, _ = ray.wait([am.outcome_now.remote() for am in ams.values()], num_returns=len(ams), timeout=1.5)
        outcome |= merge_outcomes([o for o in (_get_or_none(r) for r in ready) if o is not None])
    if interrupted:
        # within seconds: a busy RM is not waited for; its last snapshot stands in for it
        host_stats = supervisor.stop_hosts(timeout=1.0, ask_rm=False)
        try:
            exported = ray.get(rm.export.remote(), timeout=INTERRUPT_EXPORT_WAIT)
            rm.stop.remote()
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
            exported = export_from_store(state_dir, wall_seconds)
            interrupted += f"; the RM did not answer within {INTERRUPT_EXPORT_WAIT:g}s: " \
                           f"the run as of its last snapshot (t = {exported['progress']['time']:.0f})"
    else:
        host_stats = supervisor.stop_hosts()
        exported = rm_call(rm.export)
        rm_call(rm.stop)
        import shutil  # noqa: PLC0415
        shutil.rmtree(state_dir, ignore_errors=True)

    log = exported["log"]
    if interrupted:
        for app, job in log.jobs.items():
            if job["status"] == "running":
                log.mark(app, "unfinished", f"the replay was interrupted ({interrupted})")
    rtt = [x for s in host_stats for x in s["rtt"]]
    lag = [x for s in host_stats for x in s["lag"]]
    a2r = exported["alloc_to_running"]
    extra = {
        "time_scale": scale, "heartbeat_interval": float(cfg.run["heartbeat_interval"]),
        "executor": chosen, "payload": kind,
        "ray_nodes": len(plan.hosted), "nm_hosts": len(hosts), "am_hosts": len(ams),
        "am_host_ray_nodes": {f"am-{i}": rid for i, rid in enumerate(am_nodes)},
        "nm_per_ray_node": {rid: len(specs) for rid, specs in plan.hosted.items()},
        "scheduling_latency": {
            "allocation_to_running_ms": _scaled(a2r, 1000.0),
            "allocation_to_launch_ms": _scaled(exported["alloc_to_launch"], 1000.0),
            "allocation_to_running_trace_s": _scaled(a2r, 1.0 / scale),
        },
        "node_heartbeats": {
            "handled": exported["progress"]["heartbeats"],
            "batch_round_trip_ms": _scaled(rtt, 1000.0),
            "due_to_answer_ms": _scaled(lag, 1000.0),
            "out_of_band": sum(s["oob"] for s in host_stats),
        },
        "tasks_finished_twice": exported["progress"]["duplicate_finishes"]
        + sum(a["duplicates"] for a in outcome["apps"].values()),
        "refused_calls": exported["progress"]["refused"],
        "rm_calls": exported["calls"],
        "pace": pace_summary(exported["pace"], time_scale=scale, delivery=outcome.get("delivery", ()),
                             launch=exported["alloc_to_launch"], cpu_seconds=exported["cpu_seconds"],
                             wall_seconds=wall_seconds),
        "rm": rm_costs(exported),
        "interrupted": bool(interrupted),
    }
    if interrupted:
        extra["interrupt_reason"] = interrupted
    if faults:
        extra["faults"] = {"injected": [f.text for f, _ in injector.done],
                           "rm_restarts": exported["progress"]["epoch"],
                           "nm_host_restarts": supervisor.host_restarts,
                           "am_host_restarts": supervisor.am_host_restarts,
                           "nm_hosts_lost": sorted(supervisor.dead_hosts),
                           "am_crashes": outcome.get("crashes", 0)}
    if out is not None:
        return log.write(out, wall_seconds=wall_seconds, **extra)
    return log.summary(wall_seconds=wall_seconds, **extra)


def am_host_nodes(ray_nodes: list, count: int | None = None) -> list[str]:
    """Ray node ids for the AM hosts: by default one per Ray node with CPUs (the driver's
    first), else the driver's node; ``count`` hosts dealt over those nodes in turn."""
    with_cpus = [r.node_id for r in ray_nodes if r.cpus > 0] or [ray_nodes[0].node_id]
    n = len(with_cpus) if count is None else max(1, int(count))
    return [with_cpus[i % len(with_cpus)] for i in range(n)]


def export_from_store(state_dir: Path, wall_seconds: float) -> dict:
    """What ``ResourceManager.export`` gives, from the RM's last snapshot on disk (the RM
    did not answer an interrupted replay in time); measurements it alone held are empty."""
    store = StateStore(state_dir)
    with open(store.snapshot_path, "rb") as fh:
        import pickle  # noqa: PLC0415
        _, state = pickle.load(fh)
    last = max((x for row in state.log.tasks.values() for x in row[5:7] if x is not None), default=0.0)
    return {"log": state.log, "alloc_to_running": list(state.alloc_to_running),
            "alloc_to_launch": list(state.alloc_to_launch),
            "progress": state.progress(state.start_wall or 0.0) | {"time": last},
            "calls": 0, "pace": {"interval_wall": 0.0, "samples": [], "beat_lags": []},
            "cpu_seconds": 0.0, "peak_rss_mb": 0.0, "snapshots": [], "snapshot_blocked": [],
            "recoveries": list(state.recoveries), "journal_bytes": 0}


def _get_or_none(ref):
    import ray  # noqa: PLC0415
    try:
        return ray.get(ref)
    except ray.exceptions.RayError:
        return None


def rm_costs(exported: dict) -> dict:
    """The RM actor's CPU, memory and state-store costs (summary.json ``rm``)."""
    allocations = exported["progress"]["allocations"]
    snaps = exported["snapshots"]
    return {"cpu_seconds": round(exported["cpu_seconds"], 2),
            "cpu_seconds_per_1000_allocations": round(1000 * exported["cpu_seconds"] / max(1, allocations), 3),
            "peak_rss_mb": round(exported["peak_rss_mb"], 1),
            "snapshots": len(snaps), "snapshot_max_mb": round(max((b for b, _ in snaps), default=0) / 2**20, 2),
            "snapshot_max_s": round(max((t for _, t in snaps), default=0.0), 3),
            "snapshot_total_s": round(sum(t for _, t in snaps), 3),
            "snapshot_loop_blocked_max_s": round(max(exported.get("snapshot_blocked") or [0.0]), 4),
            "journal_mb": round(exported["journal_bytes"] / 2**20, 2),
            "restores": exported.get("recoveries", [])}


def _state_dir(out) -> Path:
    """Where the RM keeps its snapshot and journal: <out>/rm-state (absolute: actors run
    elsewhere), or a fresh temporary directory; emptied first (a new RM must not recover)."""
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415
    if out is None:
        return Path(tempfile.mkdtemp(prefix="rayrm-rm-state-"))
    path = Path(out).resolve() / "rm-state"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def twin_comparison(cfg: ExperimentConfig, policy: str, seed: int, out, summary: dict,
                    spread_runs: int = 10, faults=()) -> dict:
    """Simulate the same trace and seed; per-job completion time ratio replay / simulator.

    With launch jitter U(0, 2 × the replay's median allocation-to-running latency, in
    trace seconds), ``spread_runs`` jittered simulations give each job's range of completion
    times (``rayrm.rm.sim.sensitivity``), also as ratios to the exact simulation: how far the
    replay may stray from the order of events alone.  ``ratio_to_median`` compares the
    replay with the median of those runs, a reference that does not hang on one order.
    ``faults``: the replay's ``--fault`` specs; the simulator models them besides the
    config's own (``rayrm.rm.sim.faults``).
    """
    from rayrm.rm.runs.reader import RunDir  # noqa: PLC0415
    from rayrm.rm.sim.sensitivity import completion_spread  # noqa: PLC0415
    if summary.get("am_hosts"):            # the simulator's kill-am-host deals apps as the replay did
        import dataclasses  # noqa: PLC0415
        cfg = dataclasses.replace(cfg, run=dict(cfg.run, am_hosts=int(summary["am_hosts"])))
    twin_dir = Path(out) / "twin"
    twin = simulate(cfg, policy=policy, seed=seed, out=twin_dir, progress=False, faults=faults)
    mine = RunDir(Path(out)).jobs.set_index("app")
    sim = RunDir(twin_dir).jobs.set_index("app")
    ratios, replayed = {}, {}
    for app in sim.index:
        if app not in mine.index:
            continue
        a, b = float(mine.at[app, "completion_time"]), float(sim.at[app, "completion_time"])
        if a == a and b == b and b > 0:            # both finished (NaN otherwise)
            ratios[app] = round(a / b, 4)
            replayed[app] = a
    worst = max((abs(r - 1.0) for r in ratios.values()), default=0.0)
    result = {"run_dir": str(twin_dir), "completion_time_ratio": ratios, "max_deviation": round(worst, 4),
              "makespan_ratio": round(summary["makespan"] / max(1e-9, twin["makespan"]), 4)}
    # U(0, 2 x median) has the replay's median launch latency; the tail is left out on
    # purpose: under faults it holds containers waiting for a new AM, which the
    # simulator models as the fault itself.
    median = (summary.get("scheduling_latency") or {}).get("allocation_to_running_trace_s", {}).get("p50")
    jitter = round(2 * median, 6) if median else None
    if jitter and spread_runs > 0:
        simulated = sim["completion_time"].dropna()
        table = completion_spread(cfg, policy, seed, jitter=jitter, runs=spread_runs, faults=faults,
                                  exact={app: float(v) for app, v in simulated.items()})
        result["spread"] = {
            "launch_jitter_trace_s": jitter, "runs": spread_runs,
            "completion_time": {app: {k: round(float(v), 3) for k, v in row.items()}
                                for app, row in table.iterrows()},
            "ratio_range": {app: [round(row["min"] / row["exact"], 4), round(row["max"] / row["exact"], 4)]
                            for app, row in table.iterrows() if row["exact"] > 0},
            "ratio_to_median": {app: round(a / table.at[app, "median"], 4)
                                for app, a in replayed.items() if table.at[app, "median"] > 0}}
        # |replay − median| <= max(5% of the median, 2 heartbeat intervals): the order of events
        # alone moves a short job by a heartbeat or two, a long one by a few percent
        beat = float(cfg.run["heartbeat_interval"])
        within = [app for app, a in replayed.items()
                  if abs(a - table.at[app, "median"]) <= max(0.05 * table.at[app, "median"], 2 * beat)]
        result["within_median"] = {"jobs": len(replayed), "within": len(within),
                                   "fraction": round(len(within) / max(1, len(replayed)), 4),
                                   "tolerance": "max(5%, 2 heartbeats)"}
    return result
