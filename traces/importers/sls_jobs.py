"""Reading SLS job objects into task groups (the format is described in ``sls.py``).

A task group is the tasks of one SLS job that share a container type and a
resource vector: rayrm gives every task of an app one demand vector, so each
group becomes one rayrm job.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import Resources
from rayrm.traces.importers.common import SkipReport, token


NOT_RESOURCES = {"host", "start.ms", "end.ms", "duration.ms", "priority", "type", "execution.type",
                 "allocation.id", "request.delay"}
RESOURCE_NAMES = {"memory-mb": "memory_mb", "memory": "memory_mb", "memory_mb": "memory_mb",
                  "vcores": "cpu", "yarn.io/gpu": "gpu", "gpu": "gpu"}


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
    label_expression: str
    count: int
    groups: list[TaskGroup]


@dataclass
class ParsedJobs:
    jobs: list[SlsJob]
    num_nodes: int = 0


def json_stream(path: str | Path):
    """(line, object) for each top-level JSON value (a stream of objects or one array)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", file=str(path)) from None
    decoder = json.JSONDecoder()
    pos, line, n = 0, 1, len(text)
    in_array = False
    while True:
        while pos < n and (text[pos].isspace() or (in_array and text[pos] == ",")):
            line += text[pos] == "\n"
            pos += 1
        if pos >= n:
            return
        if not in_array and text[pos] == "[" and line == 1 and not text[:pos].strip():
            in_array, pos = True, pos + 1
            continue
        if in_array and text[pos] == "]":
            in_array, pos = False, pos + 1
            continue
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InputError(f"malformed JSON: {e.msg}", file=str(path), row=e.lineno) from None
        yield line, obj
        line += text.count("\n", pos, end)
        pos = end


def resource_name(key: str) -> str:
    return RESOURCE_NAMES.get(key, re.sub(r"\W", "_", key))


def _amount(value) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if x >= 0 and x != float("inf") else None


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
    x = _amount(value)
    return None if x is None else x / 1000.0


def split_host(text) -> tuple[str, str] | None:
    """``/rack/host`` -> (rack, host); a bare ``host`` is in ``default-rack``."""
    parts = [p for p in str(text or "").strip().split("/") if p]
    if not parts:
        return None
    return token("/".join(parts[:-1]) or "default-rack"), token(parts[-1])


def read_jobs(inputs: list, report: SkipReport, default_demand: Resources) -> ParsedJobs:
    out = ParsedJobs([])
    index = 0
    for path in inputs:
        for line, obj in json_stream(path):
            if not isinstance(obj, dict):
                report.skip("not a JSON object", file=path, row=line)
                continue
            if "job.tasks" not in obj and ("num.nodes" in obj or "num.racks" in obj):
                n = _amount(obj.get("num.nodes", 0))
                if n is None or n != int(n):
                    report.skip("not a whole number", file=path, row=line, field="num.nodes")
                else:
                    out.num_nodes = max(out.num_nodes, int(n))
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
    count = _amount(obj.get("job.count", 1))
    if count is None or count != int(count):
        report.skip(f"not a whole number: {obj.get('job.count')!r}", file=path, row=line, field="job.count")
        return None
    groups: dict[tuple, TaskGroup] = {}
    for k, task in enumerate(tasks):
        where = f"job.tasks[{k}]"
        if not isinstance(task, dict):
            report.skip("a task must be a JSON object", file=path, row=line, field=where)
            continue
        reps = _amount(task.get("count", 1))
        if reps is None or reps != int(reps):
            report.skip(f"not a whole number: {task.get('count')!r}", file=path, row=line,
                        field=f"{where}.count")
            continue
        seconds, key = _task_duration(task)
        if seconds is None or seconds <= 0:
            report.skip("a task needs a positive duration", file=path, row=line, field=f"{where}.{key}")
            continue
        demand = dict(default_demand)
        bad = None
        for name, value in task.items():
            if not name.startswith("container.") or name[len("container."):] in NOT_RESOURCES:
                continue
            amount = _amount(value)
            if amount is None:
                bad = name
                break
            demand[resource_name(name[len("container."):])] = amount
        if bad or not any(v > 0 for v in demand.values()):
            report.skip("a resource amount must be a non-negative number, not all zero",
                        file=path, row=line, field=f"{where}.{bad}" if bad else where)
            continue
        kind = token(str(task.get("container.type", "map")).strip() or "map")
        resources = Resources(demand)
        group = groups.setdefault((kind, resources), TaskGroup(kind, resources))
        task_start = _ms(task.get("container.start.ms")) if "container.start.ms" in task else None
        host = split_host(task.get("container.host"))
        for _ in range(max(int(reps), 1)):
            group.durations.append(round(seconds, 3))
            group.starts.append(task_start)
            if host:
                group.hosts.append(host)
    if not groups:
        report.note("jobs left with no usable task (their tasks are listed as skipped)")
        return None
    job_id = str(obj.get("job.id") or f"job_{index + 1}").strip()
    return SlsJob(job_id, path, line, start, str(obj.get("job.queue.name", "default")),
                  str(obj.get("job.label.expression") or ""), max(int(count), 1), list(groups.values()))
