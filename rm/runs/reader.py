"""Reading a run directory back (the schema of ``rayrm.rm.runs.schema``, which ``rayrm.rm.runs.log`` writes).

``rayrm check`` and ``rayrm report`` work from the run directory alone, so a simulated
run and a Ray run are read the same way.  Every table is read as text first and each
column converted once; a file that is missing, lacks a column or holds a cell that is
not a number where one is needed raises ``InputError`` naming the file, the row
(the header is row 1) and the column — the CLI turns that into one line.

Attribute cells stay text ("" is an absent attribute); constraints compare them as
numbers when both sides read as numbers (``rayrm.rm.core.constraints``), so "3" >= 3 holds.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from rayrm.rm.core.errors import InputError
from rayrm.rm.runs.schema import (EVENTS, JOBS, JOBS_PREFIXED, NODE_META, NODES, NODES_PREFIXED, SHARES,
                                  TASKS)


def _fail(path: Path, e: Exception) -> InputError:
    if isinstance(e, FileNotFoundError):
        return InputError("is missing (not a run directory?)", file=str(path))
    if isinstance(e, (pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error)):
        return InputError(f"malformed CSV: {str(e).strip().splitlines()[-1]}", file=str(path))
    return InputError(f"cannot read: {getattr(e, 'strerror', None) or e}", file=str(path))


def read_table(path: Path, columns: dict[str, str], extra: dict[str, str] | None = None,
               other: str = "str") -> pd.DataFrame:
    """A CSV with typed columns: ``columns`` by name (all required), ``extra`` by prefix,
    ``other`` for the rest.  Numbers are parsed by pandas in C; a column that does not
    parse is scanned again to name the first bad row."""
    try:
        with open(path, newline="") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise _fail(path, e) from None
    for col in columns:
        if col not in header:
            raise InputError(f"the header has no '{col}' column", file=str(path), row=1)
    kinds = {c: other for c in header}
    for prefix, kind in (extra or {}).items():
        kinds.update({c: kind for c in header if c.startswith(prefix)})
    kinds.update(columns)
    numeric = [c for c in header if kinds[c] != "str"]
    try:
        df = pd.read_csv(path, dtype={c: str for c in header if c not in numeric},
                         keep_default_na=False, na_values={c: [""] for c in numeric})
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise _fail(path, e) from None
    for col in numeric:
        kind, values = kinds[col], df[col]
        if values.dtype.kind not in "iuf":
            values = pd.to_numeric(values.astype(str).str.strip().replace("", np.nan), errors="coerce")
            bad = np.array(values.isna() & df[col].notna(), dtype=bool)
        else:
            bad = np.zeros(len(df), dtype=bool)
        if not kind.endswith("?"):
            bad |= np.array(df[col].isna(), dtype=bool)
        if kind == "int":
            bad |= np.array(values.notna() & (values != np.floor(values)), dtype=bool)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            what = "a whole number" if kind == "int" else "a number"
            cell = "" if pd.isna(df[col].iloc[i]) else df[col].iloc[i]
            raise InputError(f"must be {what}, got {cell!r}", file=str(path), row=i + 2, field=col)
        df[col] = values.astype(np.int64) if kind == "int" else values.astype(float)
    return df


@dataclass
class RunDir:
    """One run directory, its tables read on first use."""

    path: Path

    def __post_init__(self):
        self.path = Path(self.path)
        if not self.path.is_dir():
            raise InputError("is not a run directory", file=str(self.path))

    @cached_property
    def nodes(self) -> pd.DataFrame:
        return read_table(self.path / "nodes.csv", NODES, NODES_PREFIXED, other="float")

    @cached_property
    def dims(self) -> tuple[str, ...]:
        """Resource dimensions: the capacity columns of nodes.csv."""
        return tuple(c for c in self.nodes.columns if c not in NODE_META and not c.startswith("attr."))

    @cached_property
    def jobs(self) -> pd.DataFrame:
        return read_table(self.path / "jobs.csv", JOBS, JOBS_PREFIXED)

    @cached_property
    def tasks(self) -> pd.DataFrame:
        return read_table(self.path / "tasks.csv", TASKS)

    @cached_property
    def shares(self) -> pd.DataFrame:
        return read_table(self.path / "shares.csv", SHARES)

    @cached_property
    def events(self) -> pd.DataFrame:
        return read_table(self.path / "events.csv", EVENTS)

    @cached_property
    def summary(self) -> dict:
        try:
            return json.loads((self.path / "summary.json").read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise InputError(f"cannot read: {e}", file=str(self.path / "summary.json")) from None

    @property
    def label(self) -> str:
        """How plots name this run: the policy from summary.json, else the directory name."""
        return str(self.summary.get("policy") or self.path.name)

    def node_attributes(self) -> dict[str, dict[str, str]]:
        """node -> {attribute: value} with empty cells (absent attributes) left out."""
        cols = [c for c in self.nodes.columns if c.startswith("attr.")]
        out = {}
        for row in self.nodes[["node", *cols]].itertuples(index=False):
            out[row[0]] = {c[5:]: v for c, v in zip(cols, row[1:]) if v != ""}
        return out
