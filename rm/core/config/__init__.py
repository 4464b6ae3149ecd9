"""Experiment configs (``configs/*.yaml``): cluster, workload, policy, run settings.

::

    name: paper-micro
    resources: [cpu, memory_mb]          # optional; default: every dimension nodes name
    cluster:
      nodes:                             # groups; a group with count > 1 names nodes by pattern
        - {name: "n{i:02d}", count: 25, start: 1, capacity: {cpu: 1, memory_mb: 1024},
           attributes: {disk: ssd}}
      events:                            # optional: the cluster changing over time
        - {time: 100, leave: n03}
        - {time: 200, join: {name: x1, capacity: {cpu: 4, memory_mb: 8192}}}
    workload:
      jobs:                              # inline jobs ...
        - {id: job1, submit: 0, tasks: 1000, demand: {cpu: 1, memory_mb: 512},
           duration: {mean: 23.2, jitter: 0.2}, weight: 1, constraint: "node in (n01..n50)"}
      file: jobs.csv                     # ... and/or a job table next to the config
    policy: tsf
    run: {seed: 1, time_scale: 1.0, heartbeat_interval: 1.0}   # RunSettings: every setting,
                                                               # its default and its meaning
    faults: [kill-nm:n03@60, kill-rm@100]    # injected by `rayrm replay` (rm/core/faults.py),
                                             # modelled by `rayrm simulate` (rm/sim/faults.py)

A job may name its ``queue`` and ``user``; the ``queues:`` tree is read by
``rayrm.rm.core.queues`` (its schema there).  The job table (CSV) is read by
``rayrm.rm.core.config.jobtable``.

Every error names the file, the row (CSV) and the field, e.g.
``configs/x.yaml: field 'cluster.nodes[1].capacity.cpu': must be positive, got -2``.
"""

from __future__ import annotations

import re
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rayrm.rm.core.jobs import JobSpec
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.fields import integer as _integer, listing as _list, mapping as _mapping
from rayrm.rm.core.fields import number as _number, resources as _resources
from rayrm.rm.core.config.yamlload import YamlLoader as _YAML_LOADER
from rayrm.rm.core.config.jobtable import (JOB_KEYS, MAX_JOB_TASKS, job_from_fields,  # noqa: F401 (also here)
                                    read_job_table, write_job_table)
from rayrm.rm.core.queues.scheduler import check_tree_policies
from rayrm.rm.core.queues.preemption import PreemptionConfig, check_preemption
from rayrm.rm.core.queues.tree import QueueTree, default_tree, parse_queues
from rayrm.rm.core.faults import parse_faults
from rayrm.rm.core.model import AppSpec, NodeSpec, paused_gc
from rayrm.rm.core.policies.plugins import resolve_policy
from rayrm.rm.core.policies import PolicyError

#: Sizes one number in a config or a trace may ask for; refused above, not filling memory.  Far
#: beyond public traces: FB-2010's largest job has 443,932 reduces, Google's 2011 cell ~12,500 machines.
MAX_GROUP = 1_000_000          # nodes in one cluster.nodes group, in the cluster, in its events
MAX_NAME = 255                 # characters in a node name a group's pattern makes (a DNS name's bound)

#: an NM (or AM) is declared lost after nm_expiry (am_expiry) heartbeats, but never sooner
#: than this (wall seconds): at small time scales ten heartbeats are a fraction of a
#: second, shorter than a busy machine may take to schedule a process.  The replay's RM
#: and the simulator's fault model both apply it.
MIN_EXPIRY_WALL = 1.0

PAYLOADS = ("sleep", "cpu")


@dataclass(frozen=True)
class RunSettings:
    """A config's ``run:`` block: how a trace is run, as opposed to what it contains.

    Validated once, when the config is read (``RunSettings.parse``); every reader takes the
    typed fields, and nothing changes them afterwards (an override is a new value, made with
    ``dataclasses.replace``).  Each field's default and meaning:

    * ``seed`` (1) — seeds the task durations, drawn from the seed and the job id alone, so
      the simulator and the Ray replay run the same durations.
    * ``time_scale`` (1.0) — wall seconds per trace second in a Ray replay; the simulator
      reads it only for the wall-clock floor of the expiries (``MIN_EXPIRY_WALL``).
    * ``heartbeat_interval`` (1.0) — trace seconds between two NodeManager heartbeats; the
      RM schedules on heartbeats.
    * ``nm_expiry`` (10), ``am_expiry`` (10) — heartbeats of silence after which the RM
      declares a NodeManager LOST or fails an ApplicationMaster's attempt (never sooner
      than ``MIN_EXPIRY_WALL`` wall seconds).
    * ``max_attempts`` (2) — attempts of each ApplicationMaster before its app fails.
    * ``payload`` ("sleep") — what a replayed container runs: ``sleep`` or ``cpu`` (a busy
      loop for its duration).
    * ``slots_per_node`` (14) — the ``slots`` policy's k: the largest node is cut into k slots.
    * ``rm_restart`` (1.0) — heartbeats the simulator's RM is down after ``kill-rm``.
    * ``am_hosts`` (0) — ApplicationMaster host actors the apps are dealt to; 0: one per Ray
      node with CPUs in a replay, one in the simulator.
    * ``nm_hosts`` (0) — NodeManager hosts the simulator deals the NMs to (``partition-nm-host``);
      0: one.  A replay runs one per Ray node with NMs.
    * ``host_silence`` (30) — expiries a replay's RM hears nothing at all from an NM or AM
      host (it hung, or its link is cut) before it loses the host's NMs and AMs: a host on an
      overloaded machine is slow to send, not dead (rm/service/liveness.py).  At 1 a host
      partitioned for longer than the expiry is lost, as in YARN.
    """

    seed: int = 1
    time_scale: float = 1.0
    heartbeat_interval: float = 1.0
    nm_expiry: int = 10
    am_expiry: int = 10
    max_attempts: int = 2
    payload: str = "sleep"
    slots_per_node: int = 14
    rm_restart: float = 1.0
    am_hosts: int = 0
    nm_hosts: int = 0
    host_silence: float = 30.0

    @classmethod
    def parse(cls, doc: Any, where: str = "run") -> "RunSettings":
        """The settings a ``run:`` mapping gives (None: every default); an unknown key or a
        bad value is an InputError naming ``run.<key>``."""
        raw = _mapping(doc or {}, where)
        known = [f.name for f in dataclasses.fields(cls)]
        for k in raw:
            if k not in known:
                raise InputError(f"unknown setting (known: {', '.join(known)})", field=f"{where}.{k}")
        values = {**{k: getattr(cls, k) for k in known}, **raw}
        payload = values["payload"]
        if payload not in PAYLOADS:
            raise InputError(f"must be one of {', '.join(PAYLOADS)}, got {payload!r}", field=f"{where}.payload")
        return cls(
            seed=_integer(values["seed"], f"{where}.seed", minimum=0),
            time_scale=_number(values["time_scale"], f"{where}.time_scale", positive=True),
            heartbeat_interval=_number(values["heartbeat_interval"], f"{where}.heartbeat_interval",
                                       positive=True),
            nm_expiry=_integer(values["nm_expiry"], f"{where}.nm_expiry", minimum=1),
            am_expiry=_integer(values["am_expiry"], f"{where}.am_expiry", minimum=1),
            max_attempts=_integer(values["max_attempts"], f"{where}.max_attempts", minimum=1),
            payload=payload,
            slots_per_node=_integer(values["slots_per_node"], f"{where}.slots_per_node", minimum=1),
            rm_restart=_number(values["rm_restart"], f"{where}.rm_restart", non_negative=True),
            am_hosts=_integer(values["am_hosts"], f"{where}.am_hosts", minimum=0),
            nm_hosts=_integer(values["nm_hosts"], f"{where}.nm_hosts", minimum=0),
            host_silence=_number(values["host_silence"], f"{where}.host_silence", positive=True),
        )


@dataclass(frozen=True)
class NodeEvent:
    """A node joining (``spec`` set) or leaving (``spec`` None) at trace time ``time``."""

    time: float
    node: str
    spec: NodeSpec | None = None


@dataclass
class ExperimentConfig:
    name: str
    dims: tuple[str, ...]
    nodes: list[NodeSpec]
    jobs: list[JobSpec]
    policy: str = "tsf"
    run: RunSettings = field(default_factory=RunSettings)
    node_events: list[NodeEvent] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    path: Path | None = None
    queues: QueueTree = field(default_factory=default_tree)
    preemption: PreemptionConfig = field(default_factory=PreemptionConfig)

    @property
    def seed(self) -> int:
        return self.run.seed

    @property
    def apps(self) -> list[AppSpec]:
        return [j.app for j in self.jobs]


def _attributes(value: Any, where: str) -> dict:
    attrs = {}
    for k, v in _mapping(value or {}, where).items():
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            v = str(v).lower() if isinstance(v, bool) else v
            if not isinstance(v, str):
                raise InputError(f"attribute values are strings or numbers, got {v!r}", field=f"{where}.{k}")
        attrs[str(k)] = v
    return attrs


# ----- nodes --------------------------------------------------------------------

def node_group(group: Any, where: str) -> list[NodeSpec]:
    """The nodes of one ``cluster.nodes`` group (expanding ``count`` with the name pattern)."""
    group = _mapping(group, where)
    unknown = set(group) - {"name", "count", "start", "capacity", "attributes"}
    if unknown:
        raise InputError(f"unknown key(s) {', '.join(sorted(map(str, unknown)))}", field=where)
    if "capacity" not in group:
        raise InputError("is missing", field=f"{where}.capacity")
    capacity = _resources(group["capacity"], f"{where}.capacity", positive=True)
    attrs = _attributes(group.get("attributes"), f"{where}.attributes")
    count = _integer(group.get("count", 1), f"{where}.count", minimum=1)
    if count > MAX_GROUP:
        raise InputError(f"at most {MAX_GROUP:,} nodes per group, got {count}", field=f"{where}.count")
    start = _integer(group.get("start", 1), f"{where}.start")
    pattern = str(group.get("name", "node{i:03d}" if count > 1 else ""))
    if not pattern:
        raise InputError("is missing", field=f"{where}.name")
    if count > 1 and "{" not in pattern:
        raise InputError(f"a group of {count} nodes needs a name pattern such as 'n{{i:02d}}'",
                         field=f"{where}.name")
    names = []
    for i in range(start, start + count):
        try:
            if re.search(r"\{[^}]*\d{4,}", pattern):       # {i:1000000000} would fill memory
                raise ValueError(pattern)
            names.append(pattern.format(i=i))
        except (KeyError, IndexError, ValueError, TypeError, AttributeError):
            raise InputError(f"bad name pattern {pattern!r} (use {{i}} or {{i:03d}})",
                             field=f"{where}.name") from None
        if count > 1 and len(names[-1]) > MAX_NAME:        # {i:999} x 1,000,000 nodes: 1 GB of names
            raise InputError(f"names of at most {MAX_NAME} characters, got {len(names[-1])} from "
                             f"{pattern!r}", field=f"{where}.name")
    return [NodeSpec(n, capacity, attrs) for n in names]


def _node_events(value: Any, where: str) -> list[NodeEvent]:
    events = []
    for k, ev in enumerate(_list(value, where)):
        w = f"{where}[{k}]"
        ev = _mapping(ev, w)
        t = _number(ev.get("time"), f"{w}.time", non_negative=True)
        if "leave" in ev:
            events.append(NodeEvent(t, str(ev["leave"])))
        elif "join" in ev:
            joining = node_group(ev["join"], f"{w}.join")
            if len(events) + len(joining) > MAX_GROUP:
                raise InputError(f"at most {MAX_GROUP:,} node events in all", field=f"{w}.join")
            events += [NodeEvent(t, spec.name, spec) for spec in joining]
        else:
            raise InputError("needs 'join' or 'leave'", field=w)
    return sorted(events, key=lambda e: e.time)


# ----- the whole config ---------------------------------------------------------

def parse_config(doc: Any, path: Path | None = None) -> ExperimentConfig:
    """An ExperimentConfig from a parsed YAML document; errors name ``path`` and the field."""
    file = str(path) if path else None
    base = path.parent if path else Path(".")
    try:
        doc = _mapping(doc, "(top level)")
        unknown = set(doc) - {"name", "resources", "cluster", "workload", "policy", "run", "faults",
                              "description", "queues", "preemption"}
        if unknown:
            raise InputError(f"unknown key(s) {', '.join(sorted(map(str, unknown)))}", field="(top level)")
        cluster = _mapping(doc.get("cluster"), "cluster")
        groups = cluster.get("nodes")
        if not isinstance(groups, list) or not groups:
            raise InputError("needs a list of node groups", field="cluster.nodes")
        nodes: list[NodeSpec] = []
        for k, g in enumerate(groups):
            nodes.extend(node_group(g, f"cluster.nodes[{k}]"))
            if len(nodes) > MAX_GROUP:
                raise InputError(f"at most {MAX_GROUP:,} nodes in all, got {len(nodes):,} by this group",
                                 field=f"cluster.nodes[{k}]")
        seen: set[str] = set()
        for n in nodes:
            if n.name in seen:
                raise InputError(f"node name {n.name!r} is used twice", field="cluster.nodes")
            seen.add(n.name)
        events = _node_events(cluster.get("events"), "cluster.events")
        node_dims = sorted({d for n in nodes for d in n.capacity}
                           | {d for e in events if e.spec for d in e.spec.capacity})
        if "resources" in doc:
            dims = tuple(str(d) for d in _list(doc["resources"], "resources"))
            if not dims:
                raise InputError("needs at least one resource name", field="resources")
        else:
            # cpu first when present: drfh best fit and slot sizes read the first dimension.
            dims = tuple(sorted(node_dims, key=lambda d: (d != "cpu", d.startswith("gpu"), d)))

        workload = _mapping(doc.get("workload"), "workload")
        jobs: list[JobSpec] = []
        for k, raw in enumerate(_list(workload.get("jobs"), "workload.jobs")):
            raw = _mapping(raw, f"workload.jobs[{k}]")
            extra = set(raw) - JOB_KEYS
            if extra:
                raise InputError(f"unknown key(s) {', '.join(sorted(map(str, extra)))}", field=f"workload.jobs[{k}]")
            jobs.append(job_from_fields(raw, f"workload.jobs[{k}]"))
        table = workload.get("file")
        if table:
            jobs.extend(read_job_table(base / str(table)))
        if not jobs:
            raise InputError("has no jobs (give 'jobs' or 'file')", field="workload")
        ids: set[str] = set()
        for j in jobs:
            if j.job_id in ids:
                raise InputError(f"job id {j.job_id!r} is used twice", field="workload")
            ids.add(j.job_id)

        policy = str(doc.get("policy", "tsf"))
        if policy != "ray-native":
            try:
                resolve_policy(policy)          # a built-in, a plugin, FILE.py:Class or module:Class
            except PolicyError as e:
                raise InputError(str(e), field="policy") from None
        total = {d: sum(n.capacity[d] for n in nodes) for d in dims}
        queues = parse_queues(doc.get("queues"), dims, total)
        if not queues.flat and policy == "ray-native":
            raise InputError("ray-native schedules without rayrm's queues; use another policy", field="queues")
        check_tree_policies(queues, policy)
        preemption = PreemptionConfig.parse(doc.get("preemption"))
        check_preemption(preemption, queues, policy)
        run = RunSettings.parse(doc.get("run"))
        faults = [str(f) for f in _list(doc.get("faults"), "faults")]
        parse_faults(faults, {n.name for n in nodes} | {e.node for e in events if e.spec is not None},
                     {j.job_id for j in jobs}, where="faults")
        return ExperimentConfig(str(doc.get("name") or (path.stem if path else "experiment")),
                                dims, nodes, jobs, policy, run, events, faults, path, queues, preemption)
    except InputError as e:
        raise e.at(file=file) from None


def load_config(path: str | Path) -> ExperimentConfig:
    """Read and validate a YAML config; every error is an InputError naming the file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError(f"cannot read config: {e.strerror}", file=str(path)) from None
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read config: not UTF-8 text (byte {e.start + 1})", file=str(path)) from None
    with paused_gc():       # the parse builds ~10^5 objects, none in a cycle
        try:
            doc = yaml.load(text, Loader=_YAML_LOADER)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            problem = getattr(e, "problem", None) or "malformed YAML"
            raise InputError(f"malformed YAML: {problem}", file=str(path),
                             row=mark.line + 1 if mark else None) from None
        except (ValueError, RecursionError) as e:      # e.g. a timestamp like 2001-02-30
            raise InputError(f"malformed YAML: {e}", file=str(path)) from None
        return parse_config(doc, path)
