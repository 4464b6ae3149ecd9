"""Hadoop Scheduler Load Simulator (SLS) inputs as a rayrm config: SLS JSON, Rumen and SYNTH.

SLS takes three trace types (``--trace-type``); each FILE's type is told from its
first JSON value unless given: a Rumen job history (``jobID``, ``mapTasks``: see
``rumen.py``), a SYNTH workload spec (``workloads``: see ``synth.py``) or SLS's own
JSON (``job.tasks``, ``num.nodes``).  Rumen jobs and SYNTH draws become SLS job
objects, so every type is grouped and mapped by the rules below.  JSON comments
and trailing commas are tolerated, as Hadoop's readers do.

SLS JSON follows hadoop-sls (``SLSConfiguration``, ``AMDefinitionSLS``,
``TaskContainerDefinition``, ``SLSUtils``):

* **Jobs file(s)** — a stream of JSON objects (or one JSON array), one per job:
  ``job.id``, ``job.start.ms``, ``job.end.ms``, ``job.queue.name``, ``job.user``,
  ``job.count``, ``job.label.expression``, ``am.type`` and ``job.tasks``, a list of
  ``{count, container.host, container.start.ms, container.end.ms,
  container.duration.ms (or legacy duration.ms), container.priority,
  container.type, container.<resource>}``.  An object with ``num.nodes`` /
  ``num.racks`` and no tasks sizes a generated cluster.
* **Node file** (``--nodes FILE``, SLS's topology file) — a stream of
  ``{"rack": R, "nodes": [{"node": N, "memory-mb": M, "vcores": V,
  "labels": "l1, l2(exclusive=false)"}]}``.

Mapping and assumptions:

* Resources: ``memory-mb`` (or ``memory``) -> ``memory_mb``, ``vcores`` -> ``cpu``,
  ``yarn.io/gpu`` -> ``gpu``, any other name with non-word characters as ``_``.
  Unset amounts take SLS's defaults: containers ``cpu:1;memory_mb:1024``
  (``yarn.sls.container.*``), nodes ``cpu:10;memory_mb:10240`` (``yarn.sls.nm.*``).
* Without a node file the nodes are the hosts the tasks name (``/rack/host``; for
  Rumen the successful attempts' ``hostName``), plus generated ``node<k>`` up to
  ``num.nodes`` when a header gives it, plus a SYNTH spec's ``num_nodes`` nodes.
  Nodes without a capacity get ``--nm-resource`` (SLS's ``yarn.sls.nm.*``).
* Nodes get ``rack`` and, per label L, ``label.L: yes``.  A label expression
  ``L`` (or ``L1 && L2``) becomes ``label.L exists`` (and ...); YARN puts a job
  without one in the default partition, so it gets ``label.X not exists`` for
  every exclusive label X (labels are exclusive unless ``(exclusive=false)``;
  ``--shared-labels`` drops this).  ``||`` cannot be a conjunction: that job is skipped.
* One rayrm job per (container type, resource vector) of an SLS job: ``<id>`` when
  there is one such group, else ``<id>-map``, ``<id>-reduce`` (``-reduce2``, ...).
  Tasks keep their own durations (``container.duration.ms``, else ``duration.ms``,
  else end - start; ``count`` repeats a task).  Groups are submitted at
  ``job.start.ms``, except a reduce group of a job that also has maps, which is
  submitted at its earliest ``container.start.ms`` (the observed end of the map
  stage: rayrm has no stage dependency).  ``job.count = n`` makes ``<id>_1..n``; a
  job without ``job.id`` is ``job_<k>``, k its position among the jobs (from 1).
* ``container.host`` is a locality preference in YARN, so it is not a constraint
  unless ``--pin-hosts`` (then ``node in (hosts)``).  ``container.priority``,
  ``job.end.ms`` and ``am.type`` are not used; the AM container is not modelled.
* Every job keeps its queue (``job.queue.name``; Rumen's ``queue``, SYNTH's
  ``queue_name``) and user (``job.user``; Rumen's ``user``, SYNTH's ``user_name``), and
  weight 1: the queue's weight is the tree's.  The tree is ``--queue-file`` (a Fair
  Scheduler allocation file, a capacity-scheduler.xml or YAML) and/or
  ``--queue-weights q1=2,q2=1``, else the queues the jobs name, weight 1 each (see
  ``queues.py``).
* Skipped: an object that is not a job, a job without tasks, a task without a
  positive duration or with a bad resource amount (the rest of its job is kept),
  a job with a ``||`` label expression; Rumen's own rules are in ``rumen.py``.  A
  malformed JSON stream, a file whose type cannot be told and a bad SYNTH spec (one
  value spoils every draw after it) stop the import with one line.
* Sizes one number asks for are refused, with one line naming the file, the job's line
  and the field, before anything of that size is built: more than 10,000,000 tasks in
  a job (the ``count`` of its tasks summed; SWIM's FB-2010 sample, 22.7 M tasks in all,
  has 443,932 in its largest job), a ``job.count`` above 100,000 or making more than
  100,000,000 tasks (the job's tasks x job.count), ``num.nodes`` above 1,000,000.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from rayrm.rm.core.config import MAX_GROUP, MAX_JOB_TASKS
from rayrm.rm.core.jobs import Durations, JobSpec
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import DEFAULT_QUEUE, DEFAULT_USER, AppSpec, NodeSpec, Resources, queue_path
from rayrm.traces.importers.common import (ImportResult, SkipReport, amount, at_most, dims_of, parse_resources,
                                           token)
from rayrm.traces.importers.reading import json_stream
from rayrm.traces.importers.queues import QueueTree, check_jobs, jobs_tree, queue_tree, without_policies
from rayrm.traces.importers.sls_nodes import label_constraint, read_nodes, resource_name
from rayrm.traces.importers.rumen import is_rumen, rumen_to_sls
from rayrm.traces.importers.synth import is_synth, synth_to_sls

HELP = "Hadoop Scheduler Load Simulator inputs: SLS JSON jobs, Rumen job histories, SYNTH specs"
TRACE_TYPES = ("auto", "rumen", "sls", "synth")
NM_DEFAULT = "cpu:10;memory_mb:10240"             # yarn.sls.nm.vcores / yarn.sls.nm.memory.mb
#: copies one ``job.count`` makes, and the tasks they hold in all (the job's tasks x job.count);
#: 22.7 M tasks is SWIM's whole FB-2010 day
MAX_COPIES, MAX_COPIED_TASKS = 100_000, 100_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="FILE", help="SLS jobs, Rumen or SYNTH file(s)")
    parser.add_argument("--trace-type", choices=TRACE_TYPES, default="auto",
                        help="the files' type (default auto: told from each file's content)")
    parser.add_argument("--nodes", metavar="JSON", help="SLS node (topology) file")
    parser.add_argument("--nm-resource", metavar="memory_mb=M,cpu=V",
                        help="capacity of a node that does not give one (default memory_mb=10240,cpu=10, "
                             "SLS's yarn.sls.nm.*); same as --node-capacity")
    parser.add_argument("--node-capacity", default=None, metavar="cpu:V;memory_mb:M",
                        help="capacity of a node that does not give one (SLS default cpu:10;memory_mb:10240)")
    parser.add_argument("--synth-time-unit", choices=("ms", "s"), default="ms",
                        help="unit of SYNTH task times (default ms, as SLS runs them)")
    parser.add_argument("--synth-seed", type=int, default=None, metavar="N",
                        help="draw SYNTH specs with seed N instead of their rand_seed (one workload, several seeds)")
    parser.add_argument("--container-default", default="cpu:1;memory_mb:1024",
                        help="demand of a task that does not give one (SLS default)")
    parser.add_argument("--queue-weights", metavar="Q=W,...",
                        help="queue weights, e.g. a=2,eng.batch=1: a flat tree, or weights set in --queue-file's")
    parser.add_argument("--queue-file", metavar="FILE",
                        help="the queue tree: a Fair Scheduler allocation file, a capacity-scheduler.xml, "
                             "or YAML/JSON (a queues: list or {queue: weight})")
    parser.add_argument("--drop-queue-policies", action="store_true",
                        help="queues follow the config's policy, not the queue file's schedulingPolicy")
    parser.add_argument("--shared-labels", action="store_true",
                        help="treat every node label as non-exclusive")
    parser.add_argument("--pin-hosts", action="store_true",
                        help="constrain each job to the hosts its tasks name")


def load(args: argparse.Namespace, report: SkipReport) -> ImportResult:
    tree = queue_tree(args.queue_weights, args.queue_file, report)
    if tree is not None and args.drop_queue_policies:
        tree = without_policies(tree)
    if args.nm_resource and args.node_capacity:
        raise InputError("give --nm-resource or --node-capacity, not both", field="--nm-resource")
    capacity = nm_resource(args.nm_resource) if args.nm_resource else (args.node_capacity or NM_DEFAULT)
    return import_sls(args.inputs, report, nodes_file=args.nodes, node_capacity=capacity,
                      container_default=args.container_default, queues=tree,
                      shared_labels=args.shared_labels, pin_hosts=args.pin_hosts,
                      trace_type=args.trace_type, synth_time_unit=args.synth_time_unit,
                      synth_seed=args.synth_seed)


def nm_resource(text: str) -> str:
    """``memory_mb=8192,cpu=8`` (SLS names memory-mb and vcores too) as a resource literal."""
    parts = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, eq, value = item.partition("=")
        if not eq or amount(value.strip()) is None:
            raise InputError(f"write memory_mb=8192,cpu=8, got {item!r}", field="--nm-resource")
        parts.append(f"{resource_name(name.strip())}:{value.strip()}")
    if not parts:
        raise InputError("write memory_mb=8192,cpu=8", field="--nm-resource")
    return ";".join(parts)


# ----- SLS job objects into task groups ------------------------------------------------
#
# A task group is the tasks of one SLS job that share a container type and a resource
# vector: rayrm gives every task of an app one demand vector, so each group becomes one job.

NOT_RESOURCES = {"host", "start.ms", "end.ms", "duration.ms", "priority", "type", "execution.type",
                 "allocation.id", "request.delay"}


@dataclass
class TaskGroup:
    kind: str                                   # container.type (map, reduce, ...)
    demand: Resources
    durations: list[float] = field(default_factory=list)
    starts: list[float | None] = field(default_factory=list)
    hosts: list[tuple[str, str]] = field(default_factory=list)   # (rack, host) per task that names one


@dataclass
class SlsJob:
    job_id: str
    file: str
    line: int
    start: float
    queue: str
    user: str
    label_expression: str
    count: int
    groups: list[TaskGroup]


@dataclass
class ParsedJobs:
    jobs: list[SlsJob]
    num_nodes: int = 0


def _task_duration(task: dict) -> tuple[float | None, str]:
    """Seconds, as TaskContainerDefinition: container.duration.ms, duration.ms, end - start."""
    for key in ("container.duration.ms", "duration.ms"):
        if key in task:
            return _ms(task[key]), key
    if "container.start.ms" in task and "container.end.ms" in task:
        start, end = _ms(task["container.start.ms"]), _ms(task["container.end.ms"])
        if start is None or end is None:
            return None, "container.start.ms"
        return end - start, "container.end.ms"
    return None, "container.duration.ms"


def _ms(value) -> float | None:
    x = amount(value)
    return None if x is None else x / 1000.0


def split_host(text) -> tuple[str, str] | None:
    """``/rack/host`` -> (rack, host); a bare ``host`` is in ``default-rack``."""
    parts = [p for p in str(text or "").strip().split("/") if p]
    if not parts:
        return None
    return token("/".join(parts[:-1]) or "default-rack"), token(parts[-1])


def read_records(inputs: list, report: SkipReport, trace_type: str = "auto",
                 synth_time_unit: str = "ms", synth_seed: int | None = None) -> tuple[list[tuple[str, int, object]], list[tuple[str, str]]]:
    """Every file as SLS (file, line, value) records, plus the nodes SYNTH specs ask for.

    A file's type is ``trace_type`` or, with ``auto``, told from its first value.
    Rumen jobs of all files are converted together (one time baseline).
    """
    records: list[tuple[str, int, object]] = []
    rumen: list[tuple[str, int, dict]] = []
    synth_nodes: dict[tuple[str, str], None] = {}          # ordered, without repeats
    for path in inputs:
        values = list(json_stream(path))
        kind = trace_type if trace_type != "auto" else detect_type(values, str(path))
        if kind == "sls":
            records += [(str(path), line, obj) for line, obj in values]
        elif kind == "rumen":
            for line, obj in values:
                if isinstance(obj, dict):
                    rumen.append((str(path), line, obj))
                else:
                    report.skip("not a JSON object", file=path, row=line)
        else:
            for line, obj in values:
                if not is_synth(obj):
                    raise InputError("not a SYNTH spec (an object with workloads)", file=str(path), row=line)
                jobs, nodes = synth_to_sls(obj, str(path), time_unit=synth_time_unit, seed=synth_seed)
                records += [(str(path), line, job) for job in jobs]
                synth_nodes.update(dict.fromkeys(nodes))
    records += rumen_to_sls(rumen, report)
    return records, list(synth_nodes)


def detect_type(values: list, path: str) -> str:
    """``rumen``, ``synth`` or ``sls`` from a file's first JSON value."""
    if not values:
        raise InputError("holds no JSON value", file=path)
    line, first = values[0]
    if is_rumen(first):
        return "rumen"
    if is_synth(first):
        return "synth"
    if isinstance(first, dict) and ({"job.tasks", "num.nodes", "num.racks"} & set(first)):
        return "sls"
    raise InputError("cannot tell the trace type: Rumen jobs have jobID and mapTasks, SLS jobs job.tasks, "
                     "SYNTH specs workloads (give --trace-type)", file=path, row=line)


def read_jobs(records, report: SkipReport, default_demand: Resources) -> ParsedJobs:
    """SLS job objects into jobs of task groups; ``num.nodes`` headers size the cluster."""
    out = ParsedJobs([])
    index = 0
    for path, line, obj in records:
        if not isinstance(obj, dict):
            report.skip("not a JSON object", file=path, row=line)
            continue
        if "job.tasks" not in obj and ("num.nodes" in obj or "num.racks" in obj):
            n = amount(obj.get("num.nodes", 0))
            if n is None or n != int(n):
                report.skip("not a whole number", file=path, row=line, field="num.nodes")
            else:
                n = at_most(n, MAX_GROUP, "nodes", file=path, row=line, field="num.nodes")
                out.num_nodes = max(out.num_nodes, n)
            continue
        job = _read_job(obj, str(path), line, index, report, default_demand)
        index += 1
        if job is not None:
            out.jobs.append(job)
    return out


def _read_job(obj: dict, path: str, line: int, index: int, report: SkipReport,
              default_demand: Resources) -> SlsJob | None:
    tasks = obj.get("job.tasks")
    if not isinstance(tasks, list) or not tasks:
        report.skip("a job needs a non-empty job.tasks list", file=path, row=line, field="job.tasks")
        return None
    start = _ms(obj.get("job.start.ms", 0))
    if start is None:
        report.skip(f"not a non-negative number: {obj.get('job.start.ms')!r}", file=path, row=line,
                    field="job.start.ms")
        return None
    count = amount(obj.get("job.count", 1))
    if count is None or count != int(count):
        report.skip(f"not a whole number: {obj.get('job.count')!r}", file=path, row=line, field="job.count")
        return None
    copies = at_most(max(count, 1), MAX_COPIES, "copies of a job", file=path, row=line, field="job.count")
    groups: dict[tuple, TaskGroup] = {}
    total = 0
    known: dict[int, tuple] = {}        # a SYNTH job repeats one task object for the tasks it draws alike
    for k, task in enumerate(tasks):
        parsed = known.get(id(task)) or _read_task(task, f"job.tasks[{k}]", path, line, report, default_demand)
        if parsed is None:
            continue
        known[id(task)] = parsed
        kind, resources, seconds, task_start, host, reps = parsed
        reps = at_most(total + reps, MAX_JOB_TASKS, "tasks per job", file=path, row=line,
                       field=f"job.tasks[{k}].count") - total
        total += reps
        group = groups.setdefault((kind, resources), TaskGroup(kind, resources))
        group.durations.extend([seconds] * reps)
        group.starts.extend([task_start] * reps)
        if host:
            group.hosts.extend([host] * reps)
    if not groups:
        report.note("jobs left with no usable task (their tasks are listed as skipped)")
        return None
    at_most(copies * total, MAX_COPIED_TASKS, f"tasks in a job's copies ({total:,} tasks x job.count)",
            file=path, row=line, field="job.count")
    job_id = str(obj.get("job.id") or f"job_{index + 1}").strip()
    return SlsJob(job_id, path, line, start, _name(obj.get("job.queue.name"), DEFAULT_QUEUE),
                  _name(obj.get("job.user"), DEFAULT_USER),
                  str(obj.get("job.label.expression") or ""), copies, list(groups.values()))


def _name(value, default: str) -> str:
    """A queue or user as a job names it (``root.a`` is queue ``a``); empty is the default."""
    text = str(value).strip() if value is not None else ""
    return queue_path(text) if default == DEFAULT_QUEUE and text else (text or default)


def _read_task(task, where: str, path: str, line: int, report: SkipReport, default_demand: Resources):
    """(type, demand, seconds, start, host, count) of one SLS task, or None (skipped and reported)."""
    if not isinstance(task, dict):
        report.skip("a task must be a JSON object", file=path, row=line, field=where)
        return None
    reps = amount(task.get("count", 1))
    if reps is None or reps != int(reps):
        report.skip(f"not a whole number: {task.get('count')!r}", file=path, row=line, field=f"{where}.count")
        return None
    seconds, key = _task_duration(task)
    if seconds is None or seconds <= 0:
        report.skip("a task needs a positive duration", file=path, row=line, field=f"{where}.{key}")
        return None
    demand = dict(default_demand)
    for name, value in task.items():
        if not name.startswith("container.") or name[len("container."):] in NOT_RESOURCES:
            continue
        x = amount(value)
        if x is None:
            demand = {}
            where = f"{where}.{name}"
            break
        demand[resource_name(name[len("container."):])] = x
    if not any(v > 0 for v in demand.values()):
        report.skip("a resource amount must be a non-negative number, not all zero", file=path, row=line,
                    field=where)
        return None
    kind = token(str(task.get("container.type", "map")).strip() or "map")
    start = _ms(task.get("container.start.ms")) if "container.start.ms" in task else None
    return kind, Resources(demand), round(seconds, 3), start, split_host(task.get("container.host")), max(reps, 1)


def import_sls(inputs, report: SkipReport, *, nodes_file=None, node_capacity=NM_DEFAULT,
               container_default="cpu:1;memory_mb:1024", queues: QueueTree | None = None, shared_labels=False,
               pin_hosts=False, trace_type="auto", synth_time_unit="ms", synth_seed=None) -> ImportResult:
    if trace_type not in TRACE_TYPES:
        raise InputError(f"choose from {', '.join(TRACE_TYPES)}, got {trace_type!r}", field="--trace-type")
    default_cap = parse_resources(node_capacity, "--node-capacity")
    default_demand = parse_resources(container_default, "--container-default")
    inputs = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    exclusive: set[str] = set()
    if nodes_file:
        nodes, exclusive = read_nodes(nodes_file, default_cap, report)
    else:
        nodes = []
    records, synth_nodes = read_records(inputs, report, trace_type, synth_time_unit, synth_seed)
    parsed = read_jobs(records, report, default_demand)
    if not nodes_file:
        hosts: dict[str, str] = {}
        for job in parsed.jobs:
            for group in job.groups:
                for rack, host in group.hosts:
                    hosts.setdefault(host, rack)
        for rack, host in synth_nodes:
            hosts.setdefault(host, rack)
        nodes = [NodeSpec(h, default_cap, {"rack": r}) for h, r in hosts.items()]
        k = 0
        while len(nodes) < parsed.num_nodes:
            k += 1
            if f"node{k}" not in hosts:
                nodes.append(NodeSpec(f"node{k}", default_cap, {"rack": "default-rack"}))
        if not nodes:
            skipped = f" ({report.why()})" if report.skipped else ""
            raise InputError("no nodes: give an SLS node file (--nodes), container.host in the tasks, "
                             f"hostName in Rumen attempts or num_nodes in a SYNTH spec{skipped}", file=str(inputs[0]))
    jobs = build_jobs(parsed, {n.name for n in nodes}, exclusive, report,
                      shared_labels=shared_labels, pin_hosts=pin_hosts)
    named = [j.queue for j in parsed.jobs]
    if queues is None or queues.open:
        before = queues.leaves() if queues else set()
        queues = jobs_tree(named, queues)
        made = (queues.leaves() - before - {DEFAULT_QUEUE}) if queues is not None else ()
        report.note("queues the jobs name and no queue file defines, made with weight 1 (as the Fair "
                    "Scheduler makes them)", len(made))
    if queues is not None:
        dims = dims_of(nodes, jobs)
        queues.check(dims, {d: sum(n.capacity.get(d, 0.0) for n in nodes) for d in dims})
        check_jobs(queues, named, report)
    names = ", ".join(Path(p).name for p in inputs)
    return ImportResult(nodes, jobs, description=f"SLS inputs {names} (rayrm trace import sls)",
                        queues=queues.queues if queues else None, policy=queues.policy if queues else None,
                        preemption=queues.preemption if queues else None)


def build_jobs(parsed: ParsedJobs, node_names: set[str], exclusive: set[str],
               report: SkipReport, *, shared_labels=False, pin_hosts=False) -> list[JobSpec]:
    """One rayrm job per task group of each SLS job (see the module docstring)."""
    jobs: list[JobSpec] = []
    used: set[str] = set()
    for job in parsed.jobs:
        constraint = label_constraint(job.label_expression, exclusive, shared_labels)
        if constraint is None:
            report.skip(f"label expression {job.label_expression!r} uses || (rayrm constraints are "
                        f"conjunctions)", file=job.file, row=job.line, field="job.label.expression", rule=True)
            continue
        apps = _group_apps(job, constraint, node_names, report, pin_hosts=pin_hosts)
        for copy in range(1, job.count + 1):        # the copies share every group's durations
            base = job.job_id if job.count == 1 else f"{job.job_id}_{copy}"
            if base in used:
                n = 2
                while f"{base}.{n}" in used:
                    n += 1
                report.note("job ids used before, renamed <id>.<n>")
                base = f"{base}.{n}"
            used.add(base)
            jobs += [JobSpec(dataclasses.replace(app, app_id=base + suffix), d) for suffix, app, d in apps]
    return jobs


def _group_apps(job: SlsJob, constraint: Constraint, node_names: set[str],
                report: SkipReport, *, pin_hosts: bool) -> list[tuple[str, AppSpec, Durations]]:
    """(app id suffix, app, durations) of each task group of one copy of ``job``."""
    has_maps = any(g.kind == "map" for g in job.groups)
    seen: dict[str, int] = {}
    out = []
    for g in job.groups:
        seen[g.kind] = seen.get(g.kind, 0) + 1
        suffix = "" if len(job.groups) == 1 else f"-{g.kind}" + (str(seen[g.kind]) if seen[g.kind] > 1 else "")
        submit = job.start
        if g.kind == "reduce" and has_maps and g.starts and all(s is not None for s in g.starts):
            submit = max(job.start, min(g.starts))
            report.note("reduce stages submitted at their first container.start.ms", job.count)
        c = constraint
        hosts = {h for _, h in g.hosts}
        if pin_hosts and hosts:
            c = c & Constraint.whitelist(sorted(hosts))
        missing = hosts - node_names
        report.note("tasks name a host that is not a node", job.count * sum(h in missing for _, h in g.hosts))
        app = AppSpec("", g.demand, len(g.durations), 1.0, round(submit, 3), c, job.queue, job.user)
        out.append((suffix, app, Durations("list", values=tuple(g.durations))))
    return out
