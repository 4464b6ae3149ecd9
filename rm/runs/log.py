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
import re
from array import array
from collections import Counter, deque
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rayrm.rm.core.model import AppSpec, NodeSpec
from rayrm.rm.runs.schema import (FORMATS, PARQUET_FROM, ROUNDED, TABLES, TASK_STATUSES, arrow_schema,
                                  job_columns, node_columns, rounded_positions)

if TYPE_CHECKING:
    from rayrm.rm.core.cluster import AppState, ClusterState


def _dim_index(dims: tuple[str, ...], prefix: str) -> int | None:
    for i, d in enumerate(dims):
        if d == prefix or d.startswith(prefix):
            return i
    return None


def app_shares(app: "AppState", cluster: "ClusterState") -> tuple[float, float, float, float]:
    """(task share, dominant share, cpu share, memory share) of an app right now.

    task share n_i / (h_i w_i) (tsf-paper §V-A); dominant share n_i · max_r d_ir / total_r
    (DRF); cpu and memory shares n_i · d_ir / total_r.
    """
    n = app.running
    total = cluster.total
    task_share = n / (app.h * app.weight) if app.h > 0 else 0.0
    dominant = n * max((d / t for d, t in zip(app.demand, total) if t > 0), default=0.0)
    ci, mi = _dim_index(cluster.dims, "cpu"), _dim_index(cluster.dims, "mem")
    cpu = n * app.demand[ci] / total[ci] if ci is not None and total[ci] else 0.0
    mem = n * app.demand[mi] / total[mi] if mi is not None and total[mi] else 0.0
    return task_share, dominant, cpu, mem


def share_units(app: "AppState", cluster: "ClusterState") -> tuple[float, float, float, float]:
    """The shares of ``app_shares`` per running task: (1/(h_i w_i), max_r d_ir/total_r,
    d_i,cpu/total_cpu, d_i,mem/total_mem).  ``app_shares`` is n_i times this; a driver
    that records many share rows caches it and recomputes it when the cluster changes.
    """
    total = cluster.total
    task_share = 1.0 / (app.h * app.weight) if app.h > 0 else 0.0
    dominant = max((d / t for d, t in zip(app.demand, total) if t > 0), default=0.0)
    ci, mi = _dim_index(cluster.dims, "cpu"), _dim_index(cluster.dims, "mem")
    cpu = app.demand[ci] / total[ci] if ci is not None and total[ci] else 0.0
    mem = app.demand[mi] / total[mi] if mi is not None and total[mi] else 0.0
    return task_share, dominant, cpu, mem


def _fmt(x: Any) -> Any:
    if x is None:
        return ""
    if isinstance(x, float):
        if math.isnan(x):
            return ""
        return round(x, 6)
    return x


def _floats(values: list) -> np.ndarray:
    """A float array of times, None read as NaN."""
    try:
        return np.array(values, dtype=float)
    except TypeError:
        return np.array([math.nan if v is None else v for v in values], dtype=float)


_NEEDS_QUOTES = re.compile(r'[",\r\n]')
_NUMBERS, _NONE = {float, int, type(None)}, {type(None)}


def _quote(text: str) -> str:
    """A cell as csv.writer's minimal quoting writes it."""
    return '"' + text.replace('"', '""') + '"' if _NEEDS_QUOTES.search(text) else text


def _text_column(col: tuple, rounded: bool) -> list[str]:
    """One column's CSV cells: None empty; floats by repr (rounded to 6 decimals, NaN
    empty, when ``rounded``); ints and strings as text, quoted where csv.writer would."""
    kinds = set(map(type, col))
    if rounded and kinds <= _NUMBERS:
        if kinds == _NONE:                # e.g. the simulator's wall_time
            return [""] * len(col)
        arr = _floats(col)
        cells = list(map(repr, np.round(arr, 6).tolist()))
        for i in np.flatnonzero(np.isnan(arr)).tolist():
            cells[i] = ""
        return cells
    if kinds <= {str}:
        return [_quote(v) for v in col] if any(_NEEDS_QUOTES.search(v) for v in set(col)) else list(col)
    if kinds <= {int}:
        return list(map(str, col))
    if kinds <= {int, str}:       # e.g. task numbers, '' where an event has none
        if any(_NEEDS_QUOTES.search(v) for v in set(col) if v.__class__ is str):
            return [_quote(str(v)) for v in col]
        return list(map(str, col))          # str of a str is that str
    return ["" if x is None else _quote(repr(x) if isinstance(x, float) else str(x)) for x in
            (_fmt(v) if isinstance(v, float) and rounded else v for v in col)]


def _columns(rows: list, width: int) -> list[list]:
    """Rows as columns: ``zip(*rows)`` builds an iterator per row, several times slower."""
    return [list(map(itemgetter(i), rows)) for i in range(width)]


#: rows per batch a streaming log writes at once
BATCH = 200_000


def choose_format(fmt: str | None, task_rows: int) -> str:
    """'csv' or 'parquet': ``fmt`` itself, or for None/'auto' Parquet above PARQUET_FROM task rows."""
    if fmt in (None, "auto"):
        return "parquet" if task_rows > PARQUET_FROM else "csv"
    if fmt not in FORMATS:
        raise ValueError(f"unknown run-directory format {fmt!r} (choose from auto, {', '.join(FORMATS)})")
    return fmt


class _Buffer:
    """A large table's rows held as columns until they are written (``TABLES`` order).

    Times, shares and counts are unboxed into ``array('d')``/``array('q')`` as they come
    (None as NaN), text stays a list of str: a batch then becomes Arrow columns without a
    pass over millions of scattered row tuples and float objects, which cost a simulation
    a fifth of its time.  ``append`` takes a row as a tuple; the drivers' hot paths
    (``RunLog.start``/``end``/``shares_at``) append field by field.
    """

    def __init__(self, table: str):
        self.table = table
        self.kinds = tuple(TABLES[table].values())
        self.cols = [array("d") if k.startswith("float") else array("q") if k == "int" else []
                     for k in self.kinds]
        self._floats = [i for i, k in enumerate(self.kinds) if k.startswith("float")]

    def __len__(self) -> int:
        return len(self.cols[0])

    def append(self, row) -> None:
        for col, v in zip(self.cols, row):
            col.append(math.nan if v is None else v)

    def extend(self, rows) -> None:
        for row in rows:
            self.append(row)

    def take(self) -> "_Buffer":
        """These rows as a buffer of their own, this one left empty."""
        taken = _Buffer.__new__(_Buffer)
        taken.table, taken.kinds, taken._floats, taken.cols = self.table, self.kinds, self._floats, self.cols
        self.cols = [type(c)(c.typecode) if isinstance(c, array) else [] for c in self.cols]
        return taken

    def rows(self) -> list[tuple]:
        """The rows as tuples (the Python CSV path and in-memory readers), as the drivers
        gave them: NaN as None, and the count in a float column (shares.running, float for
        Parquet) as an int."""
        cols = [list(c) for c in self.cols]
        rounded = ROUNDED[self.table]
        names = list(TABLES[self.table])
        for i in self._floats:
            if names[i] in rounded:
                cols[i] = [None if v != v else v for v in cols[i]]
            else:
                cols[i] = [None if v != v else int(v) if v.is_integer() else v for v in cols[i]]
        return list(zip(*cols))

    def floats(self, i: int) -> np.ndarray:
        return np.frombuffer(self.cols[i], dtype=np.float64) if len(self.cols[i]) else np.zeros(0)


def _arrow_arrays(buffer: _Buffer, for_csv: bool) -> list:
    """A batch as pyarrow arrays, one per column of ``TABLES[table]``: times and shares to
    6 decimals, NaN null, ints as int64.  Text columns are text for Parquet; for CSV a text
    column of whole numbers and '' (events.task and .container) stays int64 with nulls,
    which writes the same cells without a str() each.

    The arrays are built from numpy and bytes buffers (``_pa_*``), not ``pa.array``: that
    one imports pandas on first use (pyarrow checks every input for pandas types), a fifth
    of a second on every ``rayrm simulate``."""
    arrays = []
    rounded = ROUNDED[buffer.table]
    for i, (name, kind) in enumerate(TABLES[buffer.table].items()):
        col = buffer.cols[i]
        if kind == "str":
            arrays.append(_pa_text(col, for_csv))
        elif kind == "int":
            arrays.append(_pa_ints(np.frombuffer(col, dtype=np.int64) if len(col) else np.zeros(0, np.int64)))
        else:
            values = buffer.floats(i)
            if name in rounded:
                values = np.round(values, 6)
            arrays.append(_pa_floats(values))
    return arrays


def _pa_text(col: list, for_csv: bool):
    """A text column: utf8 when every cell is a str; for CSV, int64 with nulls when the cells
    are ints and '' (``_arrow_arrays``); else the cells as text, '' for None."""
    try:
        return _pa_strings(col)
    except TypeError:               # not all str: "".join refuses the first that is not
        pass
    types = list(map(type, col))
    if for_csv and set(types) <= {int, str} and types.count(str) == col.count(""):
        cells = np.array(col, dtype=object)
        blank = cells == ""
        cells[blank] = 0
        return _pa_ints(cells.astype(np.int64), ~blank)
    return _pa_strings(["" if v is None else v if v.__class__ is str else str(v) for v in col])


def _validity(valid: np.ndarray):
    """An Arrow validity bitmap (None when every value is valid) and the null count."""
    import pyarrow as pa  # noqa: PLC0415

    nulls = len(valid) - int(np.count_nonzero(valid))
    return (pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None), nulls


def _pa_floats(values: np.ndarray):
    """float64 array, NaN null."""
    import pyarrow as pa  # noqa: PLC0415

    bitmap, nulls = _validity(~np.isnan(values))
    values = np.ascontiguousarray(values, dtype=np.float64)
    return pa.Array.from_buffers(pa.float64(), len(values), [bitmap, pa.py_buffer(values)], null_count=nulls)


def _pa_ints(col, valid: np.ndarray | None = None):
    """int64 array of Python ints (or an int64 array); with ``valid``, null where it is False."""
    import pyarrow as pa  # noqa: PLC0415

    values = np.ascontiguousarray(col, dtype=np.int64)
    bitmap, nulls = (None, 0) if valid is None else _validity(valid)
    return pa.Array.from_buffers(pa.int64(), len(values), [bitmap, pa.py_buffer(values)], null_count=nulls)


def _pa_strings(col: list):
    """utf8 array of Python strs: one join, and the offsets from the lengths (characters are
    bytes when the batch is ASCII, the usual case)."""
    import pyarrow as pa  # noqa: PLC0415

    text = "".join(col)
    if text.isascii():
        data, lengths = text.encode("ascii"), np.fromiter(map(len, col), np.int64, len(col))
    else:
        encoded = [v.encode() for v in col]
        data, lengths = b"".join(encoded), np.fromiter(map(len, encoded), np.int64, len(col))
    if len(data) >= 2 ** 31:                    # beyond int32 offsets: let pyarrow chunk it
        return pa.array(col, pa.string())
    offsets = np.zeros(len(col) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(col), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _arrow_table(buffer: _Buffer):
    """A batch as a pyarrow Table of ``arrow_schema(table)`` (``_arrow_arrays``)."""
    import pyarrow as pa  # noqa: PLC0415

    return pa.Table.from_arrays(_arrow_arrays(buffer, False), schema=arrow_schema(buffer.table))


def _csv_table(buffer: _Buffer):
    """A batch as the pyarrow Table ``_csv_text`` writes (``_arrow_arrays``)."""
    import pyarrow as pa  # noqa: PLC0415

    return pa.Table.from_arrays(_arrow_arrays(buffer, True), names=list(TABLES[buffer.table]))


def _csv_text(batch) -> bytes | None:
    """A batch's CSV lines, formatted by pyarrow in C++ (without the GIL) rather than cell
    by cell in Python; None when a text cell needs quoting (the caller then formats the
    batch in Python).

    The cells are those of csv.writer but for the spelling of floats: pyarrow writes the
    shortest decimal that reads back as the same double, without an exponent below 1e10
    and with no trailing '.0' ('1' for 1.0, '0.000098' for 9.8e-05, where repr gives '1.0'
    and '9.8e-05'); every reader parses both to the same value.
    """
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.csv as pacsv  # noqa: PLC0415

    sink = pa.BufferOutputStream()
    try:
        pacsv.write_csv(batch, sink, pacsv.WriteOptions(include_header=False, quoting_style="none", eol="\r\n"))
    except pa.ArrowInvalid:         # a comma, quote or line break in a text cell
        return None
    return sink.getvalue().to_pybytes()


def _buffer_of(table: str, rows) -> _Buffer:
    buffer = _Buffer(table)
    buffer.extend(rows)
    return buffer


def _csv_bytes(table: str, rows: list) -> bytes | None:
    """A batch of row tuples' CSV lines (``_csv_text``), or None when a cell needs quoting."""
    return _csv_text(_csv_table(_buffer_of(table, rows)))


#: batches handed to the writer thread and not yet written, at most (memory stays flat)
MAX_QUEUED = 3


class _Background:
    """One writer thread for a streaming log's tables.

    The simulation builds each batch's Arrow columns (Python work, under the GIL); what is
    left — pyarrow formatting CSV or encoding Parquet in C++, and the file write — releases
    the GIL, so here it runs on another core while the simulation goes on.  Batches are
    written in the order they were handed over; at most ``MAX_QUEUED`` wait, and the
    first error of the thread is raised in the caller at its next hand-over or at ``drain``.
    """

    def __init__(self):
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

        self._pool = ThreadPoolExecutor(1, thread_name_prefix="rayrm-runlog")
        self._queued: deque = deque()

    def submit(self, fn, *args) -> None:
        while len(self._queued) >= MAX_QUEUED:
            self._queued.popleft().result()
        self._queued.append(self._pool.submit(fn, *args))

    def drain(self) -> None:
        """Wait until every batch handed over is written (raising the first error)."""
        try:
            while self._queued:
                self._queued.popleft().result()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)


class _TableSink:
    """One large table of a run directory, written batch by batch as CSV or Parquet; with
    ``background``, each batch's formatting and writing run on its thread."""

    def __init__(self, out: Path, table: str, fmt: str, background: _Background | None = None):
        self.table, self.fmt = table, fmt
        self.path = out / f"{table}.{fmt}"
        self._background = background
        for other in FORMATS:           # a reader takes whichever it finds: leave only this one
            if other != fmt:
                (out / f"{table}.{other}").unlink(missing_ok=True)
        if fmt == "csv":
            self._fh = open(self.path, "wb")
            self._fh.write((",".join(_quote(h) for h in TABLES[table]) + "\r\n").encode())
            self._rounded = rounded_positions(table)
        else:
            import pyarrow.parquet as pq  # noqa: PLC0415

            self._writer = pq.ParquetWriter(self.path, arrow_schema(table))
        self.rows = 0

    def write(self, rows) -> None:
        """Write a batch: a ``_Buffer`` of this table (handed over: the caller keeps no
        reference to it) or row tuples."""
        buffer = rows if isinstance(rows, _Buffer) else _buffer_of(self.table, rows)
        if not len(buffer):
            return
        self.rows += len(buffer)
        if self.fmt == "csv":
            self._run(self._write_csv, buffer)
        else:
            self._run(self._writer.write_table, _arrow_table(buffer))

    def _run(self, fn, *args) -> None:
        if self._background is None:
            fn(*args)
        else:
            self._background.submit(fn, *args)

    def _write_csv(self, buffer: _Buffer) -> None:
        text = _csv_text(_csv_table(buffer))
        if text is None:
            columns = _columns(buffer.rows(), len(TABLES[self.table]))
            cols = [_text_column(c, i in self._rounded) for i, c in enumerate(columns)]
            text = ("\r\n".join(map(",".join, zip(*cols))) + "\r\n").encode()
        self._fh.write(text)

    def close(self) -> None:
        """Close the file; with a writer thread, call after its ``drain``."""
        if self.fmt == "csv":
            self._fh.close()
        else:
            if not self.rows:           # a Parquet file with the schema and no row group
                self._writer.write_table(arrow_schema(self.table).empty_table())
            self._writer.close()


@dataclass
class _TaskStats:
    """summary.json's task figures, accumulated over batches of ended attempts."""

    counts: Counter = field(default_factory=Counter)
    waits: list = field(default_factory=list)      # arrays of start − submit of started attempts
    finish_max: float = -math.inf
    busy: np.ndarray | None = None                 # Σ d_app (finish − start), per dim

    def add(self, tasks: "_Buffer", demand_of) -> None:
        """Add a batch of task rows (a ``_Buffer`` of the tasks table)."""
        if not len(tasks):
            return
        apps, status = tasks.cols[0], tasks.cols[7]
        self.counts.update(status)
        submit, start, finish = tasks.floats(4), tasks.floats(5), tasks.floats(6)
        self.waits.append((start - submit)[~np.isnan(start)])
        done = ~np.isnan(finish)
        if done.any():
            self.finish_max = max(self.finish_max, float(finish[done].max()))
        demands = {a: demand_of(a) for a in set(apps)}
        per_attempt = np.array(list(map(demands.__getitem__, apps)), dtype=float)
        ran = finish - start
        busy = (per_attempt[done] * ran[done][:, None]).sum(axis=0)
        self.busy = busy if self.busy is None else self.busy + busy


class RunLog:
    """Collects a run's rows and writes the run directory: streamed with ``out``, else at the end."""

    def __init__(self, dims: tuple[str, ...], *, mode: str, policy: str, name: str = "",
                 seed: int | None = None, out: str | Path | None = None, fmt: str | None = None,
                 total_tasks: int = 0):
        self.dims = tuple(dims)
        self.mode, self.policy, self.name, self.seed = mode, policy, name, seed
        self.nodes: dict[str, dict] = {}
        self.jobs: dict[str, dict] = {}
        self.tasks: dict[tuple[str, int, int], list] = {}    # streaming: the running attempts only
        self._events = _Buffer("events")
        self._shares = _Buffer("shares")
        self._share_time: float | None = None
        self._share_pending: dict[str, tuple] = {}
        self.started = 0                                      # attempts started so far
        self._ended = _Buffer("tasks")                        # streaming: ended, not yet written
        self._bind()
        self._stats = _TaskStats()
        self._demand: dict[str, tuple] = {}
        self._out: Path | None = None
        self._sinks: dict[str, _TableSink] = {}
        if out is not None:
            self._out = Path(out)
            self._out.mkdir(parents=True, exist_ok=True)
            self.format = choose_format(fmt, total_tasks)
            self._background = _Background()
            self._sinks = {t: _TableSink(self._out, t, self.format, self._background) for t in TABLES}
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
        """A task attempt ends: finished, lost (its node died) or killed.

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
        if self._sinks and len(self._event_times) >= BATCH:
            self._flush()

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
                        "reason": job["reason"]})
            rows.append(row)
        return rows

    def summary(self, wall_seconds: float | None = None, **extra) -> dict:
        """The headline numbers of the run (summary.json; keys in ``schema.SUMMARY_KEYS``)."""
        jobs = self.job_rows()
        done = [j for j in jobs if j["completion_time"] is not None]
        stats = _TaskStats(Counter(self._stats.counts), list(self._stats.waits), self._stats.finish_max,
                           self._stats.busy)
        stats.add(self._ended, self._demand_of)
        stats.add(_buffer_of("tasks", self.tasks.values()), self._demand_of)
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
            "tasks": {s: stats.counts.get(s, 0) for s in TASK_STATUSES},
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
            summary = self.summary(wall_seconds, **extra)
            try:
                self._background.drain()
            finally:
                for sink in self._sinks.values():
                    sink.close()
                self._sinks = {}
        else:
            out.mkdir(parents=True, exist_ok=True)
            self.format = choose_format(fmt or self.format, len(self.tasks))
            summary = self.summary(wall_seconds, **extra)
            for table, rows in (("tasks", self.tasks.values()), ("shares", self._shares),
                                ("events", self._events)):
                sink = _TableSink(out, table, self.format)
                sink.write(rows)
                sink.close()
        attrs = sorted({a for n in self.nodes.values() for a in n["spec"].attributes})
        with_ray = any(n["ray_node"] for n in self.nodes.values())
        with open(out / "nodes.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(node_columns(self.dims, attrs, with_ray))
            for name, n in self.nodes.items():
                spec = n["spec"]
                w.writerow([name, *(_fmt(spec.capacity[d]) for d in self.dims),
                            *(spec.attributes.get(a, "") for a in attrs)]
                           + ([n["ray_node"] or ""] if with_ray else []))
        jobs = self.job_rows()
        with open(out / "jobs.csv", "w", newline="") as fh:
            header = job_columns(self.dims)
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows([_fmt(j[h]) for h in header] for j in jobs)
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary
