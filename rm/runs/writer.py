"""Writing a run directory's large tables: the format, the sinks and the writer thread.

``TableSink`` writes one table (tasks, shares or events) batch by batch as CSV or
Parquet; with a ``Background``, each batch's formatting and file write run on one writer
thread, which releases the GIL in pyarrow (or in the compiled ``csv_lines``), while the
simulation goes on.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

from rayrm.rm.runs.columns import ColumnBuffer
from rayrm.rm.runs.encoding import (arrow_table, csv_kinds, csv_table, csv_text, quote, row_columns,
                                    text_column)
from rayrm.rm.runs.schema import FORMATS, PARQUET_FROM, TABLES, arrow_schema, rounded_positions


def choose_format(fmt: str | None, task_rows: int) -> str:
    """'csv' or 'parquet': ``fmt`` itself, or for None/'auto' Parquet above PARQUET_FROM task rows."""
    if fmt in (None, "auto"):
        return "parquet" if task_rows > PARQUET_FROM else "csv"
    if fmt not in FORMATS:
        raise ValueError(f"unknown run-directory format {fmt!r} (choose from auto, {', '.join(FORMATS)})")
    return fmt


#: batches handed to the writer thread and not yet written, at most (memory stays flat)
MAX_QUEUED = 3


class Background:
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


class TableSink:
    """One large table of a run directory, written batch by batch as CSV or Parquet; with
    ``background``, each batch's formatting and writing run on its thread.

    ``lines``: the compiled ``csv_lines`` (rm/core/native/_runlog.pyx), which formats a CSV
    batch in C to the bytes pyarrow writes (``csv_text``), or None (it gives up on a batch
    pyarrow must write, and both on one Python must quote).
    """

    def __init__(self, out: Path, table: str, fmt: str, background: Background | None = None,
                 lines=None):
        self.table, self.fmt = table, fmt
        self._lines, self._kinds = lines, csv_kinds(table)
        self.path = out / f"{table}.{fmt}"
        self._background = background
        for other in FORMATS:           # a reader takes whichever it finds: leave only this one
            if other != fmt:
                (out / f"{table}.{other}").unlink(missing_ok=True)
        if fmt == "csv":
            self._fh = open(self.path, "wb")
            self._fh.write((",".join(quote(h) for h in TABLES[table]) + "\r\n").encode())
            self._rounded = rounded_positions(table)
        else:
            import pyarrow.parquet as pq  # noqa: PLC0415

            self._writer = pq.ParquetWriter(self.path, arrow_schema(table))
        self.rows = 0

    def write(self, rows) -> None:
        """Write a batch: a ``ColumnBuffer`` of this table (handed over: the caller keeps no
        reference to it) or row tuples."""
        buffer = rows if isinstance(rows, ColumnBuffer) else ColumnBuffer.of(self.table, rows)
        if not len(buffer):
            return
        self.rows += len(buffer)
        if self.fmt == "csv":
            self._run(self._write_csv, buffer)
        else:
            self._run(self._writer.write_table, arrow_table(buffer))

    def _run(self, fn, *args) -> None:
        if self._background is None:
            fn(*args)
        else:
            self._background.submit(fn, *args)

    def _write_csv(self, buffer: ColumnBuffer) -> None:
        text = None if self._lines is None else self._lines(buffer.cols, self._kinds)
        if text is None:
            text = csv_text(csv_table(buffer))
        if text is None:
            columns = row_columns(buffer.rows(), len(TABLES[self.table]))
            cols = [text_column(c, i in self._rounded) for i, c in enumerate(columns)]
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
