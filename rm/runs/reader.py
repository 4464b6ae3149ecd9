"""Reading a run directory back (the schema of ``rayrm.rm.runs.schema``, which ``rayrm.rm.runs.log`` writes).

``rayrm check`` and ``rayrm report`` work from the run directory alone, so a simulated
run and a Ray run are read the same way.  Every table is read as text first and each
column converted once; a file that is missing, lacks a column or holds a cell that is
not a number where one is needed raises ``InputError`` naming the file, the row
(the header is row 1) and the column — the CLI turns that into one line.

Tasks, shares and events may be Parquet files instead (``rayrm.rm.runs.schema``): a
``RunDir`` reads whichever it finds, into the same columns and types, so every reader
— check, report, compare, metrics, the sensitivity sweep and the twin — takes either.

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
from rayrm.rm.runs.schema import JOBS, JOBS_DEFAULTS, JOBS_PREFIXED, NODE_META, NODES, NODES_PREFIXED, TABLES


#: the tasks table's text columns ``RunDir.coded_tasks`` reads as categoricals
CODED = ("app", "node", "status")


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


def read_parquet(path: Path, columns: dict[str, str], kinds: tuple[str, ...] | None = None,
                 coded: tuple[str, ...] = ()) -> pd.DataFrame:
    """A Parquet table of the schema's columns, typed as ``read_table`` types a CSV's: text
    with '' for a missing value, whole numbers int64, numbers float with NaN for null.
    ``kinds``: only the rows whose ``kind`` is one of them, read from the row groups that
    hold one (``_row_groups_of``); ``coded``: text columns read as categoricals (``coded_text``)."""
    import pyarrow as pa  # noqa: PLC0415 (only for a Parquet run directory)
    import pyarrow.compute as pc  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    try:
        have = pq.read_schema(path).names
    except (OSError, pa.ArrowException) as e:
        raise InputError(f"cannot read Parquet: {e}", file=str(path)) from None
    for col in columns:
        if col not in have:
            raise InputError(f"has no '{col}' column", file=str(path))
    try:
        if kinds is None:
            table = pq.read_table(path, columns=list(columns), read_dictionary=list(coded) or None)
        else:
            parquet = pq.ParquetFile(path, read_dictionary=list(coded) or None)
            wanted = pa.array(list(kinds), type=pa.string())
            groups = _row_groups_of(parquet, wanted)
            table = parquet.read_row_groups(groups, columns=list(columns)) if groups \
                else parquet.schema_arrow.empty_table().select(list(columns))
            table = table.filter(pc.is_in(table.column("kind"), value_set=wanted))
    except (OSError, pa.ArrowException) as e:
        raise InputError(f"cannot read Parquet: {e}", file=str(path)) from None
    df = table.to_pandas(self_destruct=True)
    del table
    # Arrow's allocator keeps the pages it decoded into for reuse; a day's tasks table
    # leaves about 1 GB of them behind, which nothing after the read needs
    pa.default_memory_pool().release_unused()
    for col, kind in columns.items():
        values = df[col]
        if col in coded:
            df[col] = coded_text(values)
        elif kind == "str":
            if values.isna().any():
                df[col] = values.fillna("")
        elif kind == "int":
            if values.isna().any():
                i = int(np.flatnonzero(values.isna().to_numpy())[0])
                raise InputError(f"row {i + 1} must be a whole number, got null", file=str(path), field=col)
            df[col] = values.astype(np.int64)
        else:
            if kind == "float" and values.isna().any():
                i = int(np.flatnonzero(values.isna().to_numpy())[0])
                raise InputError(f"row {i + 1} must be a number, got null", file=str(path), field=col)
            df[col] = values.astype(float)
    return df


def _row_groups_of(parquet, wanted) -> list[int]:
    """The row groups of ``parquet`` with a row whose ``kind`` is in ``wanted``, found by
    reading that column alone: a day's replay logs tens of millions of events, of which
    ``rayrm check`` needs the few node losses and joins (reading every column and then
    filtering took 4.3 s of FB-2010's 45M events, the kind column alone 1.3 s)."""
    import pyarrow.compute as pc  # noqa: PLC0415

    return [i for i in range(parquet.metadata.num_row_groups)
            if pc.any(pc.is_in(parquet.read_row_group(i, columns=["kind"]).column("kind"), value_set=wanted)).as_py()]


def coded_text(values: pd.Series) -> pd.Series:
    """A text column as a categorical with its categories in sorted order ('' for a missing
    cell), so that its codes sort as the text does: a few bytes a row where a string costs
    tens, for a whole-table pass over tens of millions of rows."""
    values = values.astype("category")
    if values.isna().any():
        if "" not in values.cat.categories:
            values = values.cat.add_categories([""])
        values = values.fillna("")
    return values.cat.reorder_categories(sorted(values.cat.categories))


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
        """jobs.csv; a directory written before jobs had queues reads as all in root.default."""
        required = {c: k for c, k in JOBS.items() if c not in JOBS_DEFAULTS}
        df = read_table(self.path / "jobs.csv", required, JOBS_PREFIXED)
        for col, default in JOBS_DEFAULTS.items():
            if col not in df.columns:
                df[col] = default
        return df

    @cached_property
    def queues(self) -> list[dict] | None:
        """The queue tree the run had (queues.json, the config's ``queues:``), None without."""
        path = self.path / "queues.json"
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InputError(f"cannot read the queue tree: {e}", file=str(path)) from None

    def table_path(self, table: str) -> Path:
        """tasks, shares or events: its Parquet file if there is one, else its CSV."""
        parquet = self.path / f"{table}.parquet"
        return parquet if parquet.exists() else self.path / f"{table}.csv"

    def _large(self, table: str) -> pd.DataFrame:
        path = self.table_path(table)
        if path.suffix == ".parquet":
            return read_parquet(path, TABLES[table])
        return read_table(path, TABLES[table])

    @cached_property
    def tasks(self) -> pd.DataFrame:
        return self._large("tasks")

    @cached_property
    def coded_tasks(self) -> pd.DataFrame:
        """tasks with app, node and status as sorted categoricals (``coded_text``), read so
        from a Parquet file: ``rayrm check``'s whole-table pass over a day's attempts."""
        if "tasks" in self.__dict__:
            return self.tasks.assign(**{c: coded_text(self.tasks[c]) for c in CODED})
        path = self.table_path("tasks")
        if path.suffix == ".parquet":
            return read_parquet(path, TABLES["tasks"], coded=CODED)
        tasks = read_table(path, TABLES["tasks"])
        return tasks.assign(**{c: coded_text(tasks[c]) for c in CODED})

    @cached_property
    def shares(self) -> pd.DataFrame:
        return self._large("shares")

    @cached_property
    def events(self) -> pd.DataFrame:
        return self._large("events")

    def events_of(self, kinds: tuple[str, ...]) -> pd.DataFrame:
        """The events of these kinds alone.  A Parquet events table is filtered as it is
        read: a day's replay logs tens of millions of events, of which ``rayrm check``
        needs the few node losses and joins."""
        if "events" in self.__dict__:
            return self.events[self.events["kind"].isin(kinds)]
        path = self.table_path("events")
        if path.suffix == ".parquet":
            return read_parquet(path, TABLES["events"], kinds)
        events = read_table(path, TABLES["events"])
        return events[events["kind"].isin(kinds)]

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
