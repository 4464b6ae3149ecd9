"""The run log: one record for the simulator and the Ray replay (docs/design.md).

Both drivers report what happens — nodes, job submissions and rejections, task
attempts starting and ending, share changes, anything else as a free-form event
— and ``RunLog.write`` lays out the run directory whose columns, types and
summary.json keys ``rayrm.rm.runs.schema`` defines (the readers use the same).

Times are trace seconds; ``wall_time`` is seconds since the replay's clock
started (empty in the simulator, which has no wall clock).  Share rows are
written when an app's running count changes, coalesced per instant, so a
time-weighted average over them is exact.

A log made with ``out=`` *streams*: tasks, shares and events go to the run directory
in batches of ``BATCH`` rows as the run goes (a task row once its attempt ends), and
summary.json's task figures are accumulated batch by batch, so its memory grows with
the running attempts, not with the trace.  Without ``out`` (the Ray replay, which
reads its rows back) everything stays in memory until ``write``.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rayrm.rm.core.model import AppSpec, NodeSpec
from rayrm.rm.core.native import compiled, core_name
from rayrm.rm.runs.columns import ColumnBuffer
from rayrm.rm.runs.encoding import cell, cells
from rayrm.rm.runs.schema import JOBS_DEFAULTS, PREEMPTED, TABLES, TASK_STATUSES, job_columns, node_columns
from rayrm.rm.runs.writer import Background, TableSink, choose_format

__all__ = ["BATCH", "RunLog", "run_log"]

#: rows per batch a streaming log writes at once
BATCH = 200_000


@dataclass
class _TaskStats:
    """summary.json's task figures, accumulated over batches of ended attempts."""

    counts: Counter = field(default_factory=Counter)
    waits: list = field(default_factory=list)      # arrays of start − submit of started attempts
    finish_max: float = -math.inf
    busy: np.ndarray | None = None                 # Σ d_app (finish − start), per dim

    def add(self, tasks: "ColumnBuffer", demand_of) -> None:
        """Add a batch of task rows (a ``ColumnBuffer`` of the tasks table)."""
        if not len(tasks):
            return
        apps, status = tasks.cols[0], tasks.cols[7]
        self.counts.update(status)
        submit, start, finish = tasks.floats(4), tasks.floats(5), tasks.floats(6)
        self.waits.append((start - submit)[~np.isnan(start)])
        done = ~np.isnan(finish)
        if done.any():
            self.finish_max = max(self.finish_max, float(finish[done].max()))
        # each row's demand vector, from a table of the batch's apps (one row per app)
        code = {a: k for k, a in enumerate(set(apps))}
        table = np.array([demand_of(a) for a in code], dtype=float)
        per_attempt = table[np.fromiter(map(code.__getitem__, apps), np.intp, len(apps))]
        ran = finish - start
        busy = (per_attempt[done] * ran[done][:, None]).sum(axis=0)
        self.busy = busy if self.busy is None else self.busy + busy


class RunLog:
    """Collects a run's rows and writes the run directory: streamed with ``out``, else at the end."""

    #: the text columns of a streaming log's events and shares (None: lists)
    _text_column: type | None = None
    #: the compiled CSV formatter of the tables (``TableSink``'s ``lines``), None: pyarrow's
    _csv_lines: Callable | None = None

    def __init__(self, dims: tuple[str, ...], *, mode: str, policy: str, name: str = "",
                 seed: int | None = None, out: str | Path | None = None, fmt: str | None = None,
                 total_tasks: int = 0):
        self.dims = tuple(dims)
        self.mode, self.policy, self.name, self.seed = mode, policy, name, seed
        #: the config's queue tree as its ``queues:`` list (queues.json), None when it has none
        self.queues: list[dict] | None = None
        self.nodes: dict[str, dict] = {}
        self.jobs: dict[str, dict] = {}
        self.tasks: dict[tuple[str, int, int], list] = {}    # streaming: the running attempts only
        text = self._text_column if out is not None else None
        self._events = ColumnBuffer("events", text)
        self._shares = ColumnBuffer("shares", text)
        self._share_time: float | None = None
        self._share_pending: dict[str, tuple] = {}
        self.started = 0                                      # attempts started so far
        #: event kind -> trace time of its first row logged by ``event`` (what ``watch`` waits for)
        self.first_at: dict[str, float] = {}
        self._watches: dict[str, list[Callable[[float], None]]] = {}
        self._ended = ColumnBuffer("tasks")                        # streaming: ended, not yet written
        self._bind()
        self._stats = _TaskStats()
        self._demand: dict[str, tuple] = {}
        self._out: Path | None = None
        self._sinks: dict[str, TableSink] = {}
        if out is not None:
            self._out = Path(out)
            self._out.mkdir(parents=True, exist_ok=True)
            self.format = choose_format(fmt, total_tasks)
            self._background = Background()
            self._sinks = {t: TableSink(self._out, t, self.format, self._background, self._csv_lines)
                           for t in TABLES}
        else:
            self.format = fmt

    def _bind(self) -> None:
        """The column appends of the hot paths (after each flush: new columns)."""
        self._event_cols = tuple(c.append for c in self._events.cols)
        self._share_cols = tuple(c.append for c in self._shares.cols)
        self._ended_cols = tuple(c.append for c in self._ended.cols)
        # their time columns: len() of one is the rows held, without a Python-level __len__
        self._event_times, self._share_times = self._events.cols[0], self._shares.cols[0]

    @property
    def events(self) -> list[tuple]:
        """The event rows not yet written, as tuples (wall_time None in the simulator)."""
        return self._events.rows()

    @property
    def share_rows(self) -> list[tuple]:
        """The share rows not yet written, as tuples."""
        return self._shares.rows()

    # ----- what drivers report -------------------------------------------------

    def add_node(self, spec: NodeSpec, time: float, wall: float | None = None,
                 ray_node: str | None = None) -> None:
        row = self.nodes.setdefault(spec.name, {"spec": spec, "ray_node": ray_node})
        if ray_node is not None:
            row["ray_node"] = ray_node
        self.event("node_join", time, wall, node=spec.name)

    def remove_node(self, name: str, time: float, wall: float | None = None, detail: str = "") -> None:
        self.event("node_lost", time, wall, node=name, detail=detail)

    def submit(self, app: AppSpec, time: float, wall: float | None = None) -> None:
        self.jobs[app.app_id] = {"spec": app, "status": "running", "submit": time,
                                 "first_start": None, "finish": None, "reason": ""}
        self.event("submit", time, wall, app=app.app_id)

    def reject(self, app: AppSpec, reason: str, time: float, wall: float | None = None) -> None:
        self.jobs[app.app_id] = {"spec": app, "status": "rejected", "submit": time,
                                 "first_start": None, "finish": None, "reason": reason}
        self.event("reject", time, wall, app=app.app_id, detail=reason)

    def start(self, app: str, task: int, attempt: int, node: str, submit: float, time: float,
              wall: float | None = None, container: int | str = "") -> None:
        """A task attempt starts running (``submit`` is when this attempt was asked for)."""
        self.tasks[(app, task, attempt)] = [app, task, attempt, node, submit, time, None, "running"]
        self.started += 1
        job = self.jobs.get(app)
        if job is not None and job["first_start"] is None:
            job["first_start"] = time
        e_time, e_wall, e_kind, e_app, e_task, e_container, e_node, e_detail = self._event_cols
        e_time(time)
        e_wall(math.nan if wall is None else wall)
        e_kind("start")
        e_app(app)
        e_task(task)
        e_container(container)
        e_node(node)
        e_detail("")
        if self._sinks and len(self._event_times) >= BATCH:
            self._flush()

    def end(self, app: str, task: int, attempt: int, status: str, time: float,
            wall: float | None = None, container: int | str = "", detail: str = "") -> None:
        """A task attempt ends: finished, lost (its node died), killed or preempted.

        One that ends before its recorded start (a simulated launch delay not yet over)
        never ran: its start becomes its end.
        """
        if self._sinks:
            _, _, _, node, submit, start, _, _ = self.tasks.pop((app, task, attempt))
            if start > time:
                start = time
            t_app, t_task, t_attempt, t_node, t_submit, t_start, t_finish, t_status = self._ended_cols
            t_app(app)
            t_task(task)
            t_attempt(attempt)
            t_node(node)
            t_submit(submit)
            t_start(start)
            t_finish(time)
            t_status(status)
        else:
            row = self.tasks[(app, task, attempt)]
            if row[5] > time:
                row[5] = time
            row[6], row[7] = time, status
            node = row[3]
        e_time, e_wall, e_kind, e_app, e_task, e_container, e_node, e_detail = self._event_cols
        e_time(time)
        e_wall(math.nan if wall is None else wall)
        e_kind(status)
        e_app(app)
        e_task(task)
        e_container(container)
        e_node(node)
        e_detail(detail)
        if self._sinks and len(self._event_times) >= BATCH:
            self._flush()

    def app_done(self, app: str, time: float, wall: float | None = None, status: str = "finished") -> None:
        job = self.jobs[app]
        job["status"], job["finish"] = status, time
        self.event("app_" + status, time, wall, app=app)

    def mark(self, app: str, status: str, reason: str = "") -> None:
        """Set a job's final status without a finish time (e.g. 'unfinished' at the end of a run)."""
        job = self.jobs[app]
        job["status"] = status
        if reason:
            job["reason"] = reason

    def event(self, kind: str, time: float, wall: float | None = None, *, app: str = "",
              task: int | str = "", container: int | str = "", node: str = "", detail: str = "") -> None:
        self._events.append((time, wall, kind, app, task, container, node, detail))
        if kind not in self.first_at:
            self.first_at[kind] = time
            for then in self._watches.pop(kind, ()):
                then(time)
        if self._sinks and len(self._event_times) >= BATCH:
            self._flush()

    def watch(self, kind: str, then: Callable[[float], None]) -> None:
        """``then(t)``, once, with the trace time t of the first event of ``kind`` logged by
        ``event``: now if there was one, else when it comes.  A watch is the caller's, not
        part of the run's record: the log pickles without it."""
        if kind in self.first_at:
            then(self.first_at[kind])
        else:
            self._watches.setdefault(kind, []).append(then)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_watches": {}}

    def share(self, time: float, app: str, shares: tuple[float, float, float, float], running: int) -> None:
        """An app's shares changed at ``time``; rows at one instant collapse to the last."""
        if self._share_time is not None and time != self._share_time:
            self._flush_shares()
        self._share_time = time
        self._share_pending[app] = (time, app) + tuple(shares) + (running,)

    def shares_at(self, time: float, apps) -> None:
        """Share rows of one instant from a driver that coalesces them itself: at most one
        per app, each given as (app, running n, units u) for the row's shares n × u (u: one
        task's task, dominant, cpu and memory share, ``share_units``)."""
        if self._share_pending:
            self._flush_shares()
        self._share_time = None
        s_time, s_app, s_task, s_dominant, s_cpu, s_mem, s_running = self._share_cols
        for app, n, u in apps:
            s_time(time)
            s_app(app)
            s_task(n * u[0])
            s_dominant(n * u[1])
            s_cpu(n * u[2])
            s_mem(n * u[3])
            s_running(n)
        if self._sinks and len(self._share_times) >= BATCH:
            self._flush()

    def shares_of(self, time: float, changed: dict, apps: dict) -> None:
        """``shares_at`` for the apps of ``changed`` (app -> its job, whose ``units`` are one
        task's shares), in its order, each with its running count from ``apps`` (app -> its
        state's ``running``; 0 once it has left them)."""
        rows = []
        for app, job in changed.items():
            state = apps.get(app)
            rows.append((app, state.running if state is not None else 0, job.units))
        self.shares_at(time, rows)

    def _flush_shares(self) -> None:
        self._shares.extend(self._share_pending.values())
        self._share_pending.clear()

    def _demand_of(self, app: str) -> tuple:
        vec = self._demand.get(app)
        if vec is None:
            vec = self._demand[app] = self.jobs[app]["spec"].demand.vector(self.dims)
        return vec

    def _flush(self) -> None:
        """Streaming: write the ended attempts, events and share rows gathered so far."""
        ended = self._ended.take()
        self._stats.add(ended, self._demand_of)
        self._sinks["tasks"].write(ended)
        self._sinks["events"].write(self._events.take())
        self._sinks["shares"].write(self._shares.take())
        self._bind()

    # ----- the run directory ---------------------------------------------------

    def job_rows(self) -> list[dict]:
        rows = []
        for app_id, job in self.jobs.items():
            spec: AppSpec = job["spec"]
            submit, first, finish = job["submit"], job["first_start"], job["finish"]
            row = {"app": app_id, "status": job["status"], "num_tasks": spec.num_tasks,
                   "weight": spec.weight}
            row.update({f"demand.{d}": spec.demand[d] for d in self.dims})
            row.update({"constraint": str(spec.constraint), "submit": submit, "first_start": first,
                        "finish": finish,
                        "queueing_delay": first - submit if first is not None else None,
                        "completion_time": finish - submit if finish is not None else None,
                        "reason": job["reason"], "queue": f"root.{spec.queue}", "user": spec.user})
            rows.append(row)
        return rows

    def summary(self, wall_seconds: float | None = None, **extra) -> dict:
        """The headline numbers of the run (summary.json; keys in ``schema.SUMMARY_KEYS``)."""
        return self._summary(self.job_rows(), wall_seconds, extra)

    def _summary(self, jobs: list[dict], wall_seconds: float | None, extra: dict) -> dict:
        """``summary`` from the run's ``job_rows``."""
        done = [j for j in jobs if j["completion_time"] is not None]
        stats = _TaskStats(Counter(self._stats.counts), list(self._stats.waits), self._stats.finish_max,
                           self._stats.busy)
        stats.add(self._ended, self._demand_of)
        stats.add(ColumnBuffer.of("tasks", self.tasks.values()), self._demand_of)
        first_submit = min((j["submit"] for j in jobs), default=0.0)
        makespan = stats.finish_max - first_submit if stats.finish_max > -math.inf else 0.0 - first_submit
        waits = np.concatenate(stats.waits) if stats.waits else np.zeros(0)

        def pct(values) -> dict:
            if not len(values):
                return {}
            arr = np.asarray(values, dtype=float)
            return {f"p{q}": round(float(np.percentile(arr, q)), 6) for q in (50, 90, 99)} | {
                "mean": round(float(arr.mean()), 6), "max": round(float(arr.max()), 6)}

        statuses: dict[str, int] = {}
        for j in jobs:
            statuses[j["status"]] = statuses.get(j["status"], 0) + 1
        out = {
            "name": self.name, "policy": self.policy, "mode": self.mode, "seed": self.seed,
            "makespan": round(makespan, 6),
            "jobs": statuses,
            "tasks": {s: stats.counts.get(s, 0) for s in TASK_STATUSES}
            | ({PREEMPTED: stats.counts[PREEMPTED]} if stats.counts.get(PREEMPTED) else {}),
            "job_queueing_delay": pct([j["queueing_delay"] for j in jobs if j["queueing_delay"] is not None]),
            "job_completion_time": pct([j["completion_time"] for j in done]),
            "task_queueing_delay": pct(waits),
            "utilization": self._utilization(makespan, stats.busy),
            "wall_seconds": round(wall_seconds, 3) if wall_seconds is not None else None,
        }
        if self.format is not None:
            out["format"] = self.format
        out.update(extra)
        return out

    def _utilization(self, makespan: float, busy: np.ndarray | None) -> dict:
        """Mean fraction of each resource busy over the makespan: Σ_attempts d_app × (finish −
        start) / (Σ_m C_m × makespan); ``busy`` is that numerator per dim (None: no attempt)."""
        if makespan <= 0:
            return {}
        totals = {d: 0.0 for d in self.dims}
        for node in self.nodes.values():
            for d in self.dims:
                totals[d] += node["spec"].capacity[d]
        if busy is None:
            busy = np.zeros(len(self.dims))
        return {d: round(float(busy[k]) / (totals[d] * makespan), 6)
                for k, d in enumerate(self.dims) if totals[d] > 0}

    def write(self, out: str | Path, wall_seconds: float | None = None, fmt: str | None = None,
              **extra) -> dict:
        """Write the run directory (the rest of it, when streaming); returns the summary.

        ``fmt``: 'csv', 'parquet' or None/'auto' (Parquet above PARQUET_FROM task rows); a
        streaming log keeps the format it chose when it opened its files.
        """
        out = Path(out)
        self._flush_shares()
        if self._sinks:
            if out.resolve() != self._out.resolve():
                raise ValueError(f"this log streams to {self._out}, not {out}")
            self._ended.extend(self.tasks.values())     # still running at the end: their rows, last
            self.tasks = {}
            self._flush()
            jobs = self.job_rows()
            summary = self._summary(jobs, wall_seconds, extra)
            try:
                self._write_small_tables(out, jobs)     # while the writer thread ends its batches
                self._background.drain()
            finally:
                for sink in self._sinks.values():
                    sink.close()
                self._sinks = {}
        else:
            out.mkdir(parents=True, exist_ok=True)
            self.format = choose_format(fmt or self.format, len(self.tasks))
            jobs = self.job_rows()
            summary = self._summary(jobs, wall_seconds, extra)
            for table, rows in (("tasks", self.tasks.values()), ("shares", self._shares),
                                ("events", self._events)):
                sink = TableSink(out, table, self.format, lines=self._csv_lines)
                sink.write(rows)
                sink.close()
            self._write_small_tables(out, jobs)
        if self.queues is not None:
            (out / "queues.json").write_text(json.dumps(self.queues, indent=1) + "\n")
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary

    def _write_small_tables(self, out: Path, jobs: list[dict]) -> None:
        """nodes.csv and jobs.csv (``jobs``: the ``job_rows``), by ``csv.writer``."""
        attrs = sorted({a for n in self.nodes.values() for a in n["spec"].attributes})
        with_ray = any(n["ray_node"] for n in self.nodes.values())
        with open(out / "nodes.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(node_columns(self.dims, attrs, with_ray))
            for name, n in self.nodes.items():
                spec = n["spec"]
                w.writerow([name, *(cell(spec.capacity[d]) for d in self.dims),
                            *(spec.attributes.get(a, "") for a in attrs)]
                           + ([n["ray_node"] or ""] if with_ray else []))
        with open(out / "jobs.csv", "w", newline="") as fh:
            flat = self.queues is None and all((j["queue"], j["user"]) == tuple(JOBS_DEFAULTS.values())
                                               for j in jobs)
            header = job_columns(self.dims, with_queues=not flat)
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(zip(*(cells([j[h] for j in jobs]) for h in header)))


def run_log(dims: tuple[str, ...], core: str | None = None, **kwargs) -> RunLog:
    """A RunLog of ``core`` ('python' or 'native'; default: the one ``RAYRM_CORE`` selects):
    under the native core its hot recording paths are compiled (``NativeRunLog``)."""
    if (core or core_name()) == "native":
        module = compiled("_runlog")
        module.set_batch(BATCH)         # read at each log: a test may lower it
        return _native_class(module)(dims, **kwargs)
    return RunLog(dims, **kwargs)


_NATIVE: dict = {}


def _native_class(module) -> type:
    """``RunLog`` with ``start``, ``end``, ``shares_at`` and ``shares_of`` from the compiled ``module``
    (rm/core/native/_runlog.pyx, the same records as the Python methods), and, streaming,
    its ``TextColumn`` for the text of events and shares (the same cells as lists give);
    its ``csv_lines`` formats the CSV tables (the same bytes as pyarrow)."""
    cls = _NATIVE.get(module)
    if cls is None:
        cls = _NATIVE[module] = type("NativeRunLog", (RunLog,), {
            "__doc__": RunLog.__doc__ + " (hot paths compiled)", "__module__": __name__,
            "start": module.start, "end": module.end, "shares_at": module.shares_at,
            "shares_of": module.shares_of,
            "_text_column": module.TextColumn, "_csv_lines": staticmethod(module.csv_lines)})
    return cls
