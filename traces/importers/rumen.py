"""Rumen job histories (Hadoop's ``LoggedJob`` JSON) as SLS job objects, for ``sls.py``.

Rumen is the main input of Hadoop's Scheduler Load Simulator (``AMDefinitionRumen``):
a file of concatenated JSON objects, one per job, as Rumen's ``JobTraceReader``
reads them (``json_stream`` also tolerates the ``/* licence */`` block some open with).
A job object has ``jobID``, ``submitTime`` (ms since the epoch), ``queue``,
``jobProperties`` (the job's configuration, strings) and ``mapTasks`` /
``reduceTasks`` / ``otherTasks``, lists of ``LoggedTask`` objects: ``taskID``,
``taskType``, ``attempts``, each attempt a ``LoggedTaskAttempt`` with ``attemptID``,
``result`` (SUCCESS, FAILED, KILLED), ``startTime``, ``finishTime`` (ms) and
``hostName`` (``/rack/host``).

This module turns each job into the SLS job object ``sls.py`` reads (``job.id``,
``job.start.ms``, ``job.queue.name``, ``job.tasks`` of ``container.*`` keys), so one
code path groups tasks and builds rayrm jobs.  Rules, applied per task:

* A map or reduce task runs once, for its **successful attempt**: from the attempt's
  ``startTime`` to its ``finishTime``, on its ``hostName`` (a locality hint, see
  ``sls.py``).  When a task has several successful attempts (speculative execution)
  the last one is used.
* **Failed and killed attempts** are not replayed: rayrm replays tasks, not retries,
  and the time those containers held is not charged to the job (a note counts them).
* A task with **no attempt**, or whose attempts all failed or were killed (the work
  never completed), is **left out by rule** and reported.  SLS throws on the first
  and replays the last attempt of the second; neither is a task that finished.
* ``otherTasks`` (setup and cleanup) are not replayed; the job's ``outcome`` is not
  used (its successful attempts are replayed either way).
* **Resources** per task type from ``jobProperties``: ``mapreduce.{map,reduce}.memory.mb``
  (or the older ``mapred.job.{map,reduce}.memory.mb``) and
  ``mapreduce.{map,reduce}.cpu.vcores``; a value missing or not a positive number
  leaves SLS's container default (``--container-default``, 1 vcore and 1024 MB), as
  SLS itself always uses for Rumen.
* **Times** are shifted so the earliest ``submitTime`` of all jobs read is 0 (SLS
  shifts by its first job's).  A job's start is its ``submitTime``.
* **Bad** (``--strict`` stops): a job without a numeric ``submitTime``; an attempt
  without numeric times or that ends before it starts.
"""

from __future__ import annotations

from rayrm.traces.importers.common import SkipReport, amount

TASK_LISTS = (("mapTasks", "map"), ("reduceTasks", "reduce"))
MEMORY_KEYS = {"map": ("mapreduce.map.memory.mb", "mapred.job.map.memory.mb"),
               "reduce": ("mapreduce.reduce.memory.mb", "mapred.job.reduce.memory.mb")}
VCORE_KEYS = {"map": ("mapreduce.map.cpu.vcores",), "reduce": ("mapreduce.reduce.cpu.vcores",)}


def is_rumen(obj) -> bool:
    """A Rumen ``LoggedJob``: it has ``jobID`` or task lists, and no SLS ``job.tasks``."""
    return isinstance(obj, dict) and "job.tasks" not in obj and (
        "jobID" in obj or "mapTasks" in obj or "reduceTasks" in obj)


def rumen_to_sls(records: list[tuple[str, int, dict]], report: SkipReport) -> list[tuple[str, int, dict]]:
    """(file, line, LoggedJob) -> (file, line, SLS job object), by the module's rules."""
    submits = [amount(obj.get("submitTime")) for _, _, obj in records]
    valid = [s for s in submits if s is not None]
    baseline = min(valid) if valid else 0.0
    out = []
    for (path, line, obj), submit in zip(records, submits):
        if submit is None:
            report.skip(f"not a non-negative number: {obj.get('submitTime')!r}", file=path, row=line,
                        field="submitTime")
            continue
        tasks = []
        for key, kind in TASK_LISTS:
            demand = _demand(obj.get("jobProperties"), kind)
            entries = obj.get(key) or []
            if not isinstance(entries, list):
                report.skip("not a list of tasks", file=path, row=line, field=key)
                continue
            for k, task in enumerate(entries):
                container = _container(task, f"{key}[{k}]", path, line, baseline, report)
                if container is not None:
                    tasks.append({**container, "container.type": kind, **demand})
        others = obj.get("otherTasks")
        report.note("setup/cleanup tasks (otherTasks) not replayed", len(others) if isinstance(others, list) else 0)
        if not tasks:
            report.skip("a job with no successful map or reduce attempt", file=path, row=line,
                        field="mapTasks", rule=True)
            continue
        job = {"job.start.ms": submit - baseline, "job.tasks": tasks,
               "job.queue.name": str(obj.get("queue") or "default"),
               "job.user": str(obj.get("user") or "default")}
        if obj.get("jobID"):
            job["job.id"] = str(obj["jobID"])
        out.append((path, line, job))
    return out


def _container(task, where: str, path: str, line: int, baseline: float, report: SkipReport) -> dict | None:
    """The SLS container of one task's successful attempt, or None (skipped and reported)."""
    attempts = task.get("attempts") if isinstance(task, dict) else None
    if not isinstance(attempts, list) or not attempts:
        report.skip("a task without attempts", file=path, row=line, field=f"{where}.attempts", rule=True)
        return None
    done = [a for a in attempts if isinstance(a, dict) and str(a.get("result", "")).upper() == "SUCCESS"]
    if not done:
        report.skip("a task whose attempts all failed or were killed", file=path, row=line,
                    field=f"{where}.attempts", rule=True)
        return None
    report.note("failed, killed or speculative attempts not replayed (the task runs once)", len(attempts) - 1)
    attempt = done[-1]
    start, finish = amount(attempt.get("startTime")), amount(attempt.get("finishTime"))
    if start is None or finish is None or finish <= start:
        report.skip("an attempt needs startTime < finishTime (ms)", file=path, row=line,
                    field=f"{where}.attempts[{attempts.index(attempt)}]")
        return None
    container = {"container.start.ms": start - baseline, "container.end.ms": finish - baseline}
    if attempt.get("hostName"):
        container["container.host"] = str(attempt["hostName"])
    return container


def _demand(props, kind: str) -> dict:
    """``container.memory-mb`` / ``container.vcores`` from the job's properties, where given."""
    props = props if isinstance(props, dict) else {}
    out = {}
    for keys, name in ((MEMORY_KEYS[kind], "container.memory-mb"), (VCORE_KEYS[kind], "container.vcores")):
        for key in keys:
            value = amount(props.get(key))
            if value:
                out[name] = value
                break
    return out
