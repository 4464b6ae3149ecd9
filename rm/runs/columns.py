"""A run-directory table's rows held as typed columns until they are written.

The drivers append rows field by field on their hot paths; a batch then becomes Arrow
columns (``rayrm.rm.runs.encoding``) without a pass over millions of row tuples.
"""

from __future__ import annotations

import math
from array import array

import numpy as np

from rayrm.rm.runs.schema import ROUNDED, TABLES


class ColumnBuffer:
    """A large table's rows held as columns until they are written (``TABLES`` order).

    Times, shares and counts are unboxed into ``array('d')``/``array('q')`` as they come
    (None as NaN), text stays a list of str: a batch then becomes Arrow columns without a
    pass over millions of scattered row tuples and float objects, which cost a simulation
    a fifth of its time.  ``append`` takes a row as a tuple; the drivers' hot paths
    (``RunLog.start``/``end``/``shares_at``) append field by field.  ``text``, when given,
    makes the text columns (a class such as the compiled ``TextColumn``, which keeps its
    cells as Arrow's bytes and offsets and has ``arrow()``) instead of lists.
    """

    def __init__(self, table: str, text: type | None = None):
        self.table = table
        self.kinds = tuple(TABLES[table].values())
        self.cols = [array("d") if k.startswith("float") else array("q") if k == "int" else
                     text() if text is not None else [] for k in self.kinds]
        self._floats = [i for i, k in enumerate(self.kinds) if k.startswith("float")]

    def __len__(self) -> int:
        return len(self.cols[0])

    def append(self, row) -> None:
        for col, v in zip(self.cols, row):
            col.append(math.nan if v is None else v)

    def extend(self, rows) -> None:
        for row in rows:
            self.append(row)

    @classmethod
    def of(cls, table: str, rows) -> "ColumnBuffer":
        """A buffer of ``table`` holding ``rows`` (tuples in ``TABLES`` order)."""
        buffer = cls(table)
        buffer.extend(rows)
        return buffer

    def take(self) -> "ColumnBuffer":
        """These rows as a buffer of their own, this one left empty."""
        taken = ColumnBuffer.__new__(ColumnBuffer)
        taken.table, taken.kinds, taken._floats, taken.cols = self.table, self.kinds, self._floats, self.cols
        self.cols = [array(c.typecode) if isinstance(c, array) else [] if isinstance(c, list) else type(c)()
                     for c in self.cols]
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
