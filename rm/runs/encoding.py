"""Encoding a batch of rows for the run directory: CSV cells and Arrow arrays.

Times and shares are written to 6 decimals (``schema.ROUNDED``), None/NaN as an empty
cell (CSV) or null (Arrow).  A batch's CSV lines are formatted by pyarrow in C++ when no
text cell needs quoting (``csv_text``), else cell by cell in Python (``text_column``), as
``csv.writer`` writes them; both read back to the same values.
"""

from __future__ import annotations

import math
import re
from operator import itemgetter
from typing import Any

import numpy as np

from rayrm.rm.runs.columns import ColumnBuffer
from rayrm.rm.runs.schema import ROUNDED, TABLES, arrow_schema


def cell(x: Any) -> Any:
    """A value as its CSV cell: None and NaN empty, floats to 6 decimals."""
    if x is None:
        return ""
    if isinstance(x, float):
        if math.isnan(x):
            return ""
        return round(x, 6)
    return x


def cells(col: list) -> list:
    """``cell`` of each value of a column, in one comprehension (no call per value)."""
    return ["" if x is None else ("" if x != x else round(x, 6)) if isinstance(x, float) else x
            for x in col]


def _floats(values: list) -> np.ndarray:
    """A float array of times, None read as NaN."""
    try:
        return np.array(values, dtype=float)
    except TypeError:
        return np.array([math.nan if v is None else v for v in values], dtype=float)


_NEEDS_QUOTES = re.compile(r'[",\r\n]')
_NUMBERS, _NONE = {float, int, type(None)}, {type(None)}


def quote(text: str) -> str:
    """A cell as csv.writer's minimal quoting writes it."""
    return '"' + text.replace('"', '""') + '"' if _NEEDS_QUOTES.search(text) else text


def text_column(col: tuple, rounded: bool) -> list[str]:
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
        return [quote(v) for v in col] if any(_NEEDS_QUOTES.search(v) for v in set(col)) else list(col)
    if kinds <= {int}:
        return list(map(str, col))
    if kinds <= {int, str}:       # e.g. task numbers, '' where an event has none
        if any(_NEEDS_QUOTES.search(v) for v in set(col) if v.__class__ is str):
            return [quote(str(v)) for v in col]
        return list(map(str, col))          # str of a str is that str
    return ["" if x is None else quote(repr(x) if isinstance(x, float) else str(x)) for x in
            (cell(v) if isinstance(v, float) and rounded else v for v in col)]


def row_columns(rows: list, width: int) -> list[list]:
    """Rows as columns: ``zip(*rows)`` builds an iterator per row, several times slower."""
    return [list(map(itemgetter(i), rows)) for i in range(width)]


def _arrow_arrays(buffer: ColumnBuffer, for_csv: bool) -> list:
    """A batch as pyarrow arrays, one per column of ``TABLES[table]``: times and shares to
    6 decimals, NaN null, ints as int64.  Text columns are text for Parquet; for CSV a text
    column of whole numbers and '' (events.task and .container) stays int64 with nulls,
    which writes the same cells without a str() each.  A text column that is not a list
    (a streaming log's ``TextColumn``) gives its own utf8 array: the same cells.

    The arrays are built from numpy and bytes buffers (``_pa_*``), not ``pa.array``: that
    one imports pandas on first use (pyarrow checks every input for pandas types), a fifth
    of a second on every ``rayrm simulate``."""
    arrays = []
    rounded = ROUNDED[buffer.table]
    for i, (name, kind) in enumerate(TABLES[buffer.table].items()):
        col = buffer.cols[i]
        if kind == "str":
            arrays.append(_pa_text(col, for_csv) if isinstance(col, list) else col.arrow())
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


def arrow_table(buffer: ColumnBuffer):
    """A batch as a pyarrow Table of ``arrow_schema(table)`` (``_arrow_arrays``)."""
    import pyarrow as pa  # noqa: PLC0415

    return pa.Table.from_arrays(_arrow_arrays(buffer, False), schema=arrow_schema(buffer.table))


def csv_table(buffer: ColumnBuffer):
    """A batch as the pyarrow Table ``csv_text`` writes (``_arrow_arrays``)."""
    import pyarrow as pa  # noqa: PLC0415

    return pa.Table.from_arrays(_arrow_arrays(buffer, True), names=list(TABLES[buffer.table]))


def csv_kinds(table: str) -> str:
    """The kinds of ``table``'s columns for the compiled ``csv_lines``, one letter each: 'r' a
    float written to 6 decimals, 'f' another float (a count), 'i' an int, 's' text."""
    rounded = ROUNDED[table]
    return "".join("s" if kind == "str" else "i" if kind == "int" else "r" if name in rounded else "f"
                   for name, kind in TABLES[table].items())


def csv_text(batch) -> bytes | None:
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
