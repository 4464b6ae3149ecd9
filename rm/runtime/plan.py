"""A replay's plan: where its NodeManagers and ApplicationMaster hosts live and how their
containers run, computed from the config and the Ray nodes alone (no actor, no Ray call),
so it can be tested without a cluster."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rayrm.nodes.placement import place_nodes
from rayrm.rm.core.config import ExperimentConfig
from rayrm.rm.core.queues.preemption import Preemption


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


def am_host_nodes(ray_nodes: list, count: int | None = None) -> list[str]:
    """Ray node ids for the AM hosts: by default one per Ray node with CPUs (the driver's
    first), else the driver's node; ``count`` hosts dealt over those nodes in turn."""
    with_cpus = [r.node_id for r in ray_nodes if r.cpus > 0] or [ray_nodes[0].node_id]
    n = len(with_cpus) if count is None else max(1, int(count))
    return [with_cpus[i % len(with_cpus)] for i in range(n)]


def preemption_rules(cfg: ExperimentConfig):
    """The preemption rules the replay's RM decides by (rm/core, the simulator's), or None
    when the config leaves preemption off: then the RM never preempts and its protocol is
    the same as without."""
    if not cfg.preemption.enabled:
        return None
    return Preemption(cfg.preemption, cfg.queues)
