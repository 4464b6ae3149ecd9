"""The Ray replay driver: a trace replayed by RM, NM and AM actors running real timed tasks.

``replay(config, policy=..., out=..., time_scale=..., address=...)`` returns the
run's summary (summary.json) and writes the run directory of docs/design.md to ``out``.
After connecting to Ray (``address=None`` starts a local Ray; an address or ``auto``
joins a cluster; a session already initialised, as in tests, is used), one replay runs
in named stages, as Nomad's scheduler runs Process -> computeJobAllocs -> computePlacements:

1. **plan** (``plan_stage``, no actor yet) — the trace's nodes assigned to Ray nodes
   (``rayrm.nodes.placement``), one NodeManager host per Ray node that got NMs, the
   executor chosen (``rayrm.nodes.executors.choose_executor``), the AM hosts' Ray nodes
   (none on a node a kill-ray-node fault takes down), the faults checked against them.
2. **start** (``start_stage``) — the RM actor (``rayrm-rm``), pinned to the driver's node
   where it keeps its snapshot and journal (``<out>/rm-state``); the NM hosts, warmed up
   and registered; the AM hosts with their jobs dealt round-robin in submit order
   (``rayrm.rm.core.faults.am_host_of``); then t = 0 a moment ahead: one ``TraceClock``
   (``rayrm.rm.core.clock``) that the RM, the hosts and the supervisor all read.
3. **supervise** (``supervise_stage``) — until every AM host is done: progress on
   stderr, NM and AM hosts watched and restarted, the faults injected
   (``rayrm.rm.runtime.supervisor``); a signal or ``until`` ends it early.
4. **collect** (``collect_stage``) — the hosts stopped and the RM's run log exported.
   The one place an interrupt changes the ending: what the AMs know so far is merged, a
   busy RM is not waited for (its last snapshot stands in), and jobs not done are marked
   ``unfinished``.
5. **summarize** (``summarize_stage``) — summary.json's replay figures
   (``rayrm.rm.runtime.summary``) and the run directory written.

``replay`` adds the twin, the simulator's run of the same trace and seed, with
``twin=True``.  Something that watches a replay while it runs (a web UI, say) starts
after **start**, when the actors exist, and stops after **collect**.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rayrm.rm.core import fault_rules, recovery
from rayrm.rm.core.config import MIN_EXPIRY_WALL, PAYLOADS, ExperimentConfig, load_config
from rayrm.rm.core.errors import InputError, RunError
from rayrm.rm.core.clock import TraceClock
from rayrm.rm.core.chaos import ChaosSpec, draw_schedule, parse_chaos, shape_of
from rayrm.rm.core.faults import Fault, am_host_of, check_cluster, check_times, config_faults, earliest_end
from rayrm.rm.core.policies import policy_for_run
from rayrm.rm.core.policies.plugins import policy_source
from rayrm.nodes.placement import Homes, alive_ray_nodes, lost_ray_nodes, where_figures
from rayrm.rm.runtime.pace import pace_warning
from rayrm.rm.runtime.rmactor.journal import export_from_store
from rayrm.rm.runtime.plan import Plan, am_host_nodes, plan_replay, preemption_rules
from rayrm.rm.runs.recovery import write_costs
from rayrm.rm.runtime.session import NodeLeft, Session, connect
from rayrm.rm.runtime.shipping import rm_node, rm_runtime_env
from rayrm.rm.runtime.summary import replay_figures, twin_comparison
from rayrm.rm.runtime.supervisor import (AM_HOST_RESTARTS, NM_HOST_RESTARTS, FaultInjector, StopSignal, Supervisor,
                                         link_losses, merge_outcomes, rm_call)
from rayrm.rm.runtime.webui import start_live_ui
from rayrm.rm.service.calls import Call
from rayrm.rm.service.protocol import NAMESPACE, RM_NAME

START_LEAD = 0.3          # wall seconds between the last preparation and t = 0
INTERRUPT_EXPORT_WAIT = 3.0   # wall seconds an interrupted replay waits for the RM's run log
SETUP_TRIES = 3               # plans of a replay whose Ray nodes leave before t = 0
NODE_DEATH_WAIT = 5.0         # wall seconds for Ray to list a node dead after its actor


def replay(config: ExperimentConfig | str | Path, policy: str | None = None, out: str | Path | None = None,
           time_scale: float | None = None, address: str | None = None, *, executor: str = "auto",
           payload: str | None = None, twin: bool = False, seed: int | None = None,
           progress: bool | None = None, faults=(), kill_ray_node=None, until: float | None = None,
           am_hosts: int | None = None, ui=None, chaos: str | None = None, keep_state: bool = False) -> dict:
    """Replay ``config`` on Ray under ``policy``; see the module docstring.

    ``ui``: a ``rayrm.rm.ui.server.UISettings`` to serve the web UI and YARN's REST API
    while the replay runs (``rayrm.rm.runtime.webui``); None: no UI.

    ``faults`` are fault specs (``rayrm.rm.core.faults``) injected besides the config's own;
    ``chaos`` (``SEED[:RATE]``) adds a schedule the nemesis draws (``rayrm.rm.core.chaos``);
    ``keep_state``: keep every snapshot and journal of the RM in ``<out>/rm-state``
    (``rayrm check --restores`` then verifies each restore; default: removed at the end).
    ``kill_ray_node(node_id)`` replaces how kill-ray-node takes a Ray node down
    (default: kill its raylet), e.g. ``ray.cluster_utils.Cluster.remove_node``.

    Interrupts: SIGINT or SIGTERM (or trace time ``until``) end the run within a few
    seconds; the run directory is still written with what ran — jobs not done are
    ``unfinished``, summary.json has ``"interrupted": true`` and the reason — and the
    actors are killed.  ``--twin`` of an interrupted run is skipped.
    """
    cfg = config if isinstance(config, ExperimentConfig) else load_config(config)
    policy_name = policy or cfg.policy
    scale = float(time_scale if time_scale is not None else cfg.run.time_scale)
    if not scale > 0:
        raise InputError(f"--time-scale must be positive, got {time_scale}")
    fault_list = config_faults(cfg, faults)
    if until is not None and not until > 0:
        raise InputError(f"--until must be a positive number of trace seconds, got {until}")
    for warning in check_times(fault_list, until, earliest_end(cfg)) if fault_list else ():
        print(f"rayrm replay: warning: {warning}", file=sys.stderr, flush=True)
    if twin and out is None:
        raise InputError("--twin needs --out (the twin's run directory goes under it)")
    chaos_spec = parse_chaos(chaos) if chaos is not None else None
    run_seed = cfg.seed if seed is None else int(seed)
    kind = payload or cfg.run.payload
    if kind not in PAYLOADS:
        raise InputError(f"unknown payload '{kind}' (choose from {', '.join(PAYLOADS)})", field="run.payload")
    if policy_name == "ray-native":
        if fault_list or chaos_spec:
            raise InputError("faults need rayrm's ResourceManager; the ray-native baseline has none")
        from rayrm.rm.runtime.native import replay_native  # noqa: PLC0415
        return replay_native(cfg, out=out, time_scale=scale, address=address, payload=kind,
                             seed=run_seed, progress=progress, twin=twin)
    run = ReplayRun(cfg, policy_name, policy_for_run(policy_name, cfg.run), scale, executor, kind, run_seed,
                    out, progress, fault_list, kill_ray_node, until, am_hosts, chaos=chaos_spec,
                    keep_state=keep_state)
    summary = _in_ray_session(run, address, ui)
    warning = pace_warning(summary.get("pace") or {}, scale)
    if warning and progress is not False:
        print(f"rayrm replay: {warning}", file=sys.stderr, flush=True)
    if twin and summary.get("interrupted"):
        summary["twin"] = {"note": "skipped: the replay was interrupted"}
    elif twin:
        summary["twin"] = twin_comparison(cfg, policy_name, run_seed, out, summary, faults=faults)
        if out is not None:
            (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


@dataclass
class ReplayRun:
    """What one replay was asked to do, as every stage reads it (validated by ``replay``)."""

    cfg: ExperimentConfig
    policy_name: str
    policy: object                # the Policy the RM orders apps by
    scale: float                  # wall seconds per trace second
    executor: str                 # auto | task | actor
    payload: str                  # sleep | cpu
    seed: int
    out: str | Path | None
    progress: bool | None
    faults: list[Fault]
    kill_ray_node: object = None
    until: float | None = None
    am_hosts: int | None = None
    stop: StopSignal | None = None
    chaos: ChaosSpec | None = None
    drawn: list[Fault] = field(default_factory=list)    # the nemesis's schedule
    keep_state: bool = False      # every snapshot and journal kept (StateStore keep)

    @property
    def interval_wall(self) -> float:
        """The NM heartbeat interval in wall seconds."""
        return self.cfg.run.heartbeat_interval * self.scale


def _in_ray_session(run: ReplayRun, address: str | None, ui=None) -> dict:
    """Connect to Ray, serve the web UI (``ui``), run the stages, and always kill the
    actors, stop the UI, restore the signal handlers and shut down a Ray this replay started."""
    started = connect(address)
    run.stop = StopSignal()              # after ray.init, which installs its own SIGTERM handler
    web = None
    try:
        web = start_live_ui(run.cfg, run.policy_name, run.scale, run.faults, ui) if ui is not None else None
        session = Session()
        try:
            return _run(run, session)
        finally:
            session.close()
    finally:
        if web is not None:
            web.close()
        run.stop.restore()
        if started:
            import ray  # noqa: PLC0415
            ray.shutdown()


def _run(run: ReplayRun, session: Session) -> dict:
    """The stages, in order (module docstring)."""
    placed, actors = _set_up(run, session)
    supervised = supervise_stage(run, placed, actors)
    exported, host_stats = collect_stage(run, actors, supervised)
    return summarize_stage(run, placed, supervised, exported, host_stats)


def _set_up(run: ReplayRun, session: Session) -> tuple["Placement", "Actors"]:
    """The plan and start stages.  A Ray node lost before t = 0 fails the start (an actor
    pinned to it is unschedulable or dies, or ``Session.get`` sees the node gone first):
    nothing has run yet, so the actors started are killed and both stages run again on
    the nodes still alive, at most ``SETUP_TRIES`` times; a failure with every planned
    node alive is not retried."""
    import ray  # noqa: PLC0415
    asked = list(run.faults)
    for attempt in range(1, SETUP_TRIES + 1):
        run.faults, run.drawn = list(asked), []        # the nemesis draws for the nodes now alive
        placed = plan_stage(run)
        session.nodes = placed.ray_nodes
        try:
            return placed, start_stage(run, placed, session)
        except (ray.exceptions.RayError, NodeLeft) as e:
            session.close()
            lost = _lost_nodes(placed.ray_nodes)
            cause = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if not lost:
                raise RunError(f"the replay's actors could not start: {cause}") from None
            gone = ", ".join(f"{r.node_id[:8]} ({r.address})" for r in lost)
            if attempt == SETUP_TRIES:
                raise RunError(f"Ray nodes kept leaving before t = 0 (last: {gone}); "
                               f"gave up after {SETUP_TRIES} tries") from None
            print(f"rayrm replay: Ray node {gone} left before t = 0; placing the replay again "
                  f"on the nodes still alive", file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


def _lost_nodes(planned: list) -> list:
    """The planned Ray nodes Ray no longer lists alive.  An actor's death can reach the
    driver a moment before the node's: wait up to ``NODE_DEATH_WAIT`` wall seconds for it."""
    deadline = time.monotonic() + NODE_DEATH_WAIT
    while True:
        lost = lost_ray_nodes(planned)
        if lost or time.monotonic() >= deadline:
            return lost
        time.sleep(0.2)


@dataclass
class Placement:
    """The plan stage's result: where everything goes, before any actor exists."""

    plan: Plan
    ray_nodes: list               # the alive Ray nodes, in placement order
    am_nodes: list[str]           # Ray node id of each AM host
    driver_node: str = ""         # the Ray node the driver (and so the RM) runs on


def plan_stage(run: ReplayRun) -> Placement:
    """Place the NMs and AM hosts on the Ray nodes and check the faults against them."""
    ray_nodes = alive_ray_nodes()
    plan = plan_replay(run.cfg, ray_nodes, run.executor)
    doomed = {ray_nodes[f.index].node_id for f in run.faults
              if f.kind == "kill-ray-node" and f.index < len(ray_nodes)}
    am_nodes = am_host_nodes([r for r in ray_nodes if r.node_id not in doomed] or ray_nodes[:1],
                             run.am_hosts if run.am_hosts is not None else (run.cfg.run.am_hosts or None))
    if run.chaos is not None:
        shape = shape_of(run.cfg, run.scale, len(plan.hosted), len(am_nodes), len(ray_nodes), run.until)
        run.drawn = draw_schedule(run.chaos, shape)
        run.faults = sorted(run.faults + run.drawn, key=lambda f: f.time)
        if run.progress is not False:
            print(f"rayrm replay: chaos {run.chaos.seed}: {len(run.drawn)} faults: "
                  f"{' '.join('--fault ' + f.text for f in run.drawn)}", file=sys.stderr, flush=True)
    check_cluster(run.faults, len(ray_nodes), len(plan.hosted), len(am_nodes))
    import ray  # noqa: PLC0415
    return Placement(plan, ray_nodes, am_nodes, ray.get_runtime_context().get_node_id())


@dataclass
class Actors:
    """The start stage's result: the running actors and the replay's t = 0."""

    rm: object
    hosts: dict                   # "nm-I" -> NodeManagerHost
    host_of_node: dict            # NM name -> "nm-I"
    ams: dict                     # "am-I" -> ApplicationMasterHost
    am_of_app: dict               # app id -> its ApplicationMasterHost
    jobs: list                    # AMJobs, with their task durations
    state_dir: Path
    make_am_host: object = None               # (I, Ray node id) -> a new AM host am-I there
    clock: TraceClock | None = None           # t = 0, set once every actor has started


def start_stage(run: ReplayRun, placed: Placement, session: Session) -> Actors:
    """Start the RM, the NM hosts (warmed up, registered) and the AM hosts; set t = 0."""
    import ray  # noqa: PLC0415
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as Affinity  # noqa: PLC0415

    from rayrm.rm.runtime.actor import RM_MAX_RESTARTS, ResourceManager  # noqa: PLC0415

    cfg, plan = run.cfg, placed.plan
    state_dir = _state_dir(run.out)
    secret = os.urandom(16)
    # The RM is pinned to the driver's node (or the Ray node offering resource RM_RESOURCE),
    # where its snapshot and journal are written, so a restart (max_restarts) reads them
    # back (rm/service/store.py).  A policy from outside rayrm travels with it (py_modules),
    # so any Ray node can import it.
    here = ray.get_runtime_context().get_node_id()
    rm = session.add(ResourceManager.options(
        name=RM_NAME, namespace=NAMESPACE, max_restarts=RM_MAX_RESTARTS,
        scheduling_strategy=Affinity(rm_node() or here, soft=False), **rm_runtime_env(run.policy_name)).remote(
        dims=cfg.dims, nodes=session.pin(cfg.nodes), policy=run.policy, policy_name=run.policy_name,
        time_scale=run.scale, heartbeat_interval=cfg.run.heartbeat_interval, nm_expiry=cfg.run.nm_expiry,
        am_expiry=cfg.run.am_expiry, max_attempts=cfg.run.max_attempts,
        state_dir=str(state_dir), secret=secret, name=cfg.name, seed=run.seed,
        host_silence=cfg.run.host_silence, keep_state=run.keep_state, queues=cfg.queues,
        preemption=preemption_rules(cfg)))
    hosts, host_of_node = _start_nm_hosts(run, plan, session, secret)
    jobs, ams, am_of_app, make_am_host = _start_am_hosts(run, placed.am_nodes, hosts, session)
    actors = Actors(rm, hosts, host_of_node, ams, am_of_app, jobs, state_dir, make_am_host=make_am_host)
    actors.clock = TraceClock(time.time() + START_LEAD, run.scale)
    session.get([rm.call.remote(Call.START_CLOCK, actors.clock)] + [h.start.remote(actors.clock) for h in hosts.values()])
    return actors


def _start_nm_hosts(run: ReplayRun, plan: Plan, session: Session, secret: bytes) -> tuple[dict, dict]:
    """One NodeManager host per Ray node that got NMs, its workers pre-started and its NMs
    registered; returns the hosts and each NM's host."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as Affinity  # noqa: PLC0415

    from rayrm.nodes.executors import make_container_executor  # noqa: PLC0415
    from rayrm.nodes.host import NodeManagerHost  # noqa: PLC0415

    hosts, host_of_node = {}, {}
    for i, (rid, specs) in enumerate(plan.hosted.items()):
        container_actor = (session.add(make_container_executor(rid))
                           if plan.executor == "actor" and run.payload == "cpu" else None)
        hosts[f"nm-{i}"] = session.add(NodeManagerHost.options(
            name=f"rayrm-nm-{i}", namespace=NAMESPACE, max_restarts=NM_HOST_RESTARTS,
            scheduling_strategy=Affinity(rid, soft=False)).remote(
            f"nm-{i}", RM_NAME, session.pin(specs), rid, interval_wall=run.interval_wall, executor=plan.executor,
            container_actor=container_actor, events=session.pin(plan.events.get(rid, ())), secret=secret))
        host_of_node.update({s.name: f"nm-{i}" for s in specs})
        host_of_node.update({e[2]: f"nm-{i}" for e in plan.events.get(rid, ()) if e[1] == "join"})
    session.get([h.prewarm.remote(plan.warm[rid]) for h, rid in zip(hosts.values(), plan.hosted)])
    session.get([h.register.remote() for h in hosts.values()])
    return hosts, host_of_node


def _start_am_hosts(run: ReplayRun, am_nodes: list[str], hosts: dict, session: Session) -> tuple:
    """The ApplicationMaster hosts, spread over the Ray nodes like the NM hosts so that the
    RM is the only central actor, each with the jobs dealt to it round-robin in submit
    order (``am_host_of``, which the simulator's kill-am-host follows)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as Affinity  # noqa: PLC0415

    from rayrm.apps.am import AMJob, ApplicationMasterHost  # noqa: PLC0415

    jobs = [AMJob(j.app, tuple(float(x) for x in j.task_durations(run.seed))) for j in run.cfg.jobs]
    dealt: list[list] = [[] for _ in am_nodes]
    host_of = am_host_of([j.spec for j in jobs], len(am_nodes))
    for job in sorted(jobs, key=lambda j: (j.spec.submit, j.spec.app_id)):
        dealt[host_of[job.spec.app_id]].append(job)
    pinned = [session.pin(mine) for mine in dealt]

    def make_am_host(i: int, rid: str):     # also when its node is gone (nodes/placement.py)
        return session.add(ApplicationMasterHost.options(
            name=f"rayrm-am-{i}", namespace=NAMESPACE, max_restarts=AM_HOST_RESTARTS,
            scheduling_strategy=Affinity(rid, soft=False)).remote(
            f"am-{i}", RM_NAME, {h: f"rayrm-{h}" for h in hosts}, pinned[i],
            interval_wall=run.interval_wall, payload=run.payload))

    ams, am_of_app = {}, {}
    for i, (rid, mine) in enumerate(zip(am_nodes, dealt)):
        ams[f"am-{i}"] = make_am_host(i, rid)
        am_of_app.update({j.spec.app_id: ams[f"am-{i}"] for j in mine})
    session.get([am.ready.remote() for am in ams.values()])
    return jobs, ams, am_of_app, make_am_host


@dataclass
class Supervised:
    """The supervise stage's result: how the run ended."""

    supervisor: Supervisor
    injector: FaultInjector | None
    outcome: dict                 # the AM hosts' outcomes, merged
    interrupted: str              # why the run was cut short; "" when every AM finished
    wall_seconds: float


def supervise_stage(run: ReplayRun, placed: Placement, actors: Actors) -> Supervised:
    """Run the AM hosts from t = 0 and supervise them until they are done or stopped."""
    clock = actors.clock
    done_refs = {am.run.remote(clock): hid for hid, am in actors.ams.items()}
    total = sum(j.app.num_tasks for j in run.cfg.jobs)
    max_task = clock.wall_seconds(max((max(a.durations) if a.durations else 0.0) for a in actors.jobs))
    injector = None
    if run.faults:
        nms_on = {rid: sorted(s.name for s in specs) for rid, specs in placed.plan.hosted.items()}
        expiry = fault_rules.expiry(run.cfg.run.nm_expiry, run.interval_wall, MIN_EXPIRY_WALL)
        injector = FaultInjector(run.faults, clock=clock, rm=actors.rm,
                                 am=actors.am_of_app, am_hosts=actors.ams, hosts=actors.hosts,
                                 host_of_node=actors.host_of_node, ray_nodes=placed.ray_nodes,
                                 nms_on_ray_node=nms_on, nm_restart_after=recovery.nm_restart_after(expiry),
                                 kill_ray_node=run.kill_ray_node)
    homes = Homes(dict(zip(actors.ams, placed.am_nodes)), actors.make_am_host, actors.am_of_app)
    supervisor = Supervisor(actors.rm, actors.hosts, injector, ams=actors.ams, homes=homes, clock=clock,
                            total=total, label=run.policy_name, progress=run.progress,
                            stall_after=120.0 + 3 * max_task, until=run.until, stop=run.stop)
    outcome = supervisor.run(done_refs)
    return Supervised(supervisor, injector, outcome, outcome.get("interrupted", ""), clock.elapsed(time.time()))


def collect_stage(run: ReplayRun, actors: Actors, supervised: Supervised) -> tuple[dict, list]:
    """Stop the hosts and export the RM's run log: (what the RM exported, the NM hosts'
    heartbeat figures).  After a complete run the RM's state directory is removed, unless
    the run keeps it."""
    if supervised.interrupted:
        return _collect_interrupted(actors, supervised, {type(run.policy).__module__})
    host_stats = supervised.supervisor.stop_hosts()
    exported = rm_call(actors.rm.export)
    rm_call(actors.rm.stop)
    if not run.keep_state:
        shutil.rmtree(actors.state_dir, ignore_errors=True)
    return exported, host_stats


def _collect_interrupted(actors: Actors, supervised: Supervised, trusted: set) -> tuple[dict, list]:
    """``collect_stage`` of a run cut short, within seconds: what the AMs know so far (their
    run goes on until they are killed) is merged into the outcome; a busy RM is not waited
    for, its last snapshot stands in for it (and the reason says so); the jobs not done are
    marked ``unfinished``."""
    import ray  # noqa: PLC0415

    ams = actors.ams
    ready, _ = ray.wait([am.outcome_now.remote() for am in ams.values()], num_returns=len(ams), timeout=1.5)
    supervised.outcome |= merge_outcomes([o for o in (_get_or_none(r) for r in ready) if o is not None])
    host_stats = supervised.supervisor.stop_hosts(timeout=1.0, ask_rm=False)
    try:
        exported = ray.get(actors.rm.export.remote(), timeout=INTERRUPT_EXPORT_WAIT)
        actors.rm.stop.remote()
    except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
        exported = export_from_store(actors.state_dir, supervised.wall_seconds, trusted)
        supervised.interrupted += f"; the RM did not answer within {INTERRUPT_EXPORT_WAIT:g}s: " \
                                  f"the run as of its last snapshot (t = {exported['progress']['time']:.0f})"
    log = exported["log"]
    for app, job in log.jobs.items():
        if job["status"] == "running":
            log.mark(app, "unfinished", f"the replay was interrupted ({supervised.interrupted})")
    return exported, host_stats


def summarize_stage(run: ReplayRun, placed: Placement, supervised: Supervised, exported: dict,
                    host_stats: list) -> dict:
    """summary.json: the run log's figures, the replay's own (``replay_figures``), how it
    was interrupted and the faults injected; the run directory written when ``run.out``."""
    plan, interrupted = placed.plan, supervised.interrupted
    extra = {
        "time_scale": run.scale, "heartbeat_interval": run.cfg.run.heartbeat_interval,
        "executor": plan.executor, "payload": run.payload,
        **where_figures(plan.hosted, placed.am_nodes, placed.ray_nodes, placed.driver_node,
                        supervised.supervisor.homes.moves, supervised.supervisor.dead_hosts),
        **replay_figures(exported, supervised.outcome, host_stats, scale=run.scale,
                         wall_seconds=supervised.wall_seconds),
        "interrupted": bool(interrupted),
        "policy_source": policy_source(run.policy_name),
    }
    if exported.get("policy_error"):
        extra["policy_error"] = exported["policy_error"]
    if interrupted:
        extra["interrupt_reason"] = interrupted
    if run.faults:
        supervisor = supervised.supervisor
        extra["faults"] = {"injected": [f.text for f, _ in supervised.injector.done],
                           "rm_restarts": exported["progress"]["epoch"],
                           "nm_host_restarts": supervisor.host_restarts,
                           "am_host_restarts": supervisor.am_host_restarts,
                           "nm_hosts_lost": sorted(supervisor.dead_hosts),
                           "am_crashes": supervised.outcome.get("crashes", 0),
                           "link_lost": link_losses(supervised.outcome, host_stats)}
        if any(f.after for f in run.faults):             # waiting for an event that never came
            extra["faults"]["not_triggered"] = [f.text for f in supervised.injector.waiting]
    if run.chaos is not None:
        extra["chaos"] = {"seed": run.chaos.seed, "rate": run.chaos.rate,
                          "faults": [f.text for f in run.drawn]}
    log = exported["log"]
    if run.out is not None:
        summary = log.write(run.out, wall_seconds=supervised.wall_seconds, **extra)
        return write_costs(run.out, summary) if run.faults else summary
    return log.summary(wall_seconds=supervised.wall_seconds, **extra)


def _get_or_none(ref):
    import ray  # noqa: PLC0415
    try:
        return ray.get(ref)
    except ray.exceptions.RayError:
        return None


def _state_dir(out) -> Path:
    """Where the RM keeps its snapshot and journal: <out>/rm-state (absolute: actors run
    elsewhere), or a fresh temporary directory; emptied first (a new RM must not recover)."""
    import tempfile  # noqa: PLC0415
    if out is None:
        return Path(tempfile.mkdtemp(prefix="rayrm-rm-state-"))
    path = Path(out).resolve() / "rm-state"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path
