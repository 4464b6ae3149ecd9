"""Jobs as a config or a job table gives them: one job's fields, and the CSV job table.

The job table (CSV, one job per row, header required) has columns ``id, submit, tasks,
duration`` and ``demand.<dim>`` per dimension, optionally ``weight``, ``constraint``,
``queue`` and ``user``; ``duration`` takes the compact forms of ``rayrm.rm.core.jobs``.
A job's ``queue`` is a leaf of the queue tree (``eng.batch`` or ``root.eng.batch``;
default ``default``) and ``user`` who submits it (default ``default``); whether the queue
exists is the scheduler's question, asked when the job arrives (``rayrm.rm.core.queues``).
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path
from typing import Any

from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.fields import integer as _integer, number as _number, resources as _resources
from rayrm.rm.core.jobs import Durations, JobSpec, parse_durations
from rayrm.rm.core.model import DEFAULT_QUEUE, DEFAULT_USER, AppSpec, queue_path

#: sizes one number in a config or a trace may ask for (refused above)
MAX_JOB_TASKS = 10_000_000     # tasks in one job


@functools.lru_cache(maxsize=4096)
def _parse_constraint(text: str) -> Constraint:
    """Constraint.parse, once per text (a Constraint is immutable; traces repeat them)."""
    return Constraint.parse(text)


def _constraint(value: Any, where: str) -> Constraint:
    if value is None or value == "":
        return Constraint()
    try:
        return _parse_constraint(str(value))
    except InputError as e:
        raise e.at(field=where) from None


@functools.lru_cache(maxsize=4096)
def _durations_of_text(text: str) -> Durations:
    """parse_durations of a text that lists no durations, once per text (a Durations is
    immutable, and a trace's job table repeats its duration cells)."""
    return parse_durations(text)


def _durations(value: Any, tasks: int) -> Durations:
    """parse_durations(value, tasks): a list is checked against ``tasks``, nothing else is."""
    if isinstance(value, str) and "|" not in value:
        return _durations_of_text(value)
    return parse_durations(value, tasks)


def _name(value: Any, where: str, default: str) -> str:
    """A queue or user name as a job gives it; empty means ``default``."""
    if value is None or value == "":
        return default
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise InputError(f"must be a name, got {value!r}", field=where)
    return str(value).strip() or default


JOB_KEYS = {"id", "submit", "tasks", "demand", "duration", "weight", "constraint", "queue", "user"}


def job_from_fields(raw: dict, where: str = "", *, row: int | None = None, file: str | None = None) -> JobSpec:
    """A JobSpec from one job's fields (a YAML mapping or a CSV row made into one)."""
    def fld(name: str) -> str:
        return f"{where}.{name}" if where else name
    try:
        missing = [k for k in ("id", "tasks", "demand", "duration") if raw.get(k) in (None, "")]
        if missing:
            raise InputError("is missing", field=fld(missing[0]))
        job_id = str(raw["id"]).strip()
        tasks = _integer(raw["tasks"], fld("tasks"), minimum=1)
        if tasks > MAX_JOB_TASKS:
            raise InputError(f"at most {MAX_JOB_TASKS:,} tasks per job, got {tasks:,}", field=fld("tasks"))
        demand = _resources(raw["demand"], fld("demand"), positive=False)
        submit = _number(raw.get("submit") or 0, fld("submit"), non_negative=True)
        weight = _number(raw.get("weight") or 1, fld("weight"), positive=True)
        constraint = _constraint(raw.get("constraint"), fld("constraint"))
        try:
            durations = _durations(raw["duration"], tasks)
        except InputError as e:
            raise e.at(field=fld("duration")) from None
        queue = _name(raw.get("queue"), fld("queue"), DEFAULT_QUEUE)
        user = _name(raw.get("user"), fld("user"), DEFAULT_USER)
        app = AppSpec(job_id, demand, tasks, weight, submit, constraint, queue_path(queue), user)
    except InputError as e:
        raise e.at(file=file, row=row) from None
    return JobSpec(app, durations)


def read_job_table(path: Path) -> list[JobSpec]:
    """Jobs from a CSV job table (see the module docstring); errors name the row and column."""
    try:
        handle = open(path, newline="")
    except OSError as e:
        raise InputError(f"cannot read job table: {e.strerror}", file=str(path)) from None
    jobs = []
    try:
        with handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            for col in ("id", "tasks", "duration"):
                if col not in header:
                    raise InputError(f"the header has no '{col}' column", file=str(path), row=1)
            dims = [c for c in header if c.startswith("demand.")]
            if not dims:
                raise InputError("the header has no demand.<resource> column", file=str(path), row=1)
            for rowno, row in enumerate(reader, start=2):
                if None in row:
                    raise InputError("more cells than header columns", file=str(path), row=rowno)
                raw = {k: row.get(k) for k in ("id", "submit", "tasks", "duration", "weight", "constraint",
                                               "queue", "user")}
                demand = {}
                for c in dims:
                    cell = (row.get(c) or "").strip()
                    demand[c[len("demand."):]] = cell or 0
                raw["demand"] = demand
                jobs.append(job_from_fields(raw, row=rowno, file=str(path)))
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read job table: not UTF-8 text (byte {e.start + 1})", file=str(path)) from None
    except csv.Error as e:
        raise InputError(f"malformed CSV: {e}", file=str(path)) from None
    return jobs


def write_job_table(path: Path, jobs: list[JobSpec], dims: tuple[str, ...]) -> None:
    """The inverse of ``read_job_table`` (used by the generator and the importers); the
    ``queue`` and ``user`` columns only when some job names a queue or a user."""
    named = any(j.app.queue != DEFAULT_QUEUE or j.app.user != DEFAULT_USER for j in jobs)
    with open(path, "w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(["id", "submit", "tasks", "weight", "constraint", "duration"]
                   + [f"demand.{d}" for d in dims] + (["queue", "user"] if named else []))
        for j in jobs:
            a = j.app
            w.writerow([a.app_id, f"{a.submit:g}", a.num_tasks, f"{a.weight:g}", str(a.constraint),
                        j.durations.to_cell()] + [f"{a.demand[d]:g}" for d in dims]
                       + ([a.queue, a.user] if named else []))


