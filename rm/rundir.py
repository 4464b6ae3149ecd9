"""Reading a run directory back (the schema ``rm.runlog`` writes; DESIGN.md "Data contracts").

``rayrm check`` and ``rayrm report`` work from the run directory alone, so a simulated
run and a Ray run are read the same way.  Every table is read as text first and each
column converted once; a file that is missing, lacks a column or holds a cell that is
not a number where one is needed raises ``InputError`` naming the file, the row
(the header is row 1) and the column — the CLI turns that into one line.

Attribute cells stay text ("" is an absent attribute); constraints compare them as
numbers when both sides read as numbers (``rm.constraints``), so "3" >= 3 holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from rm.errors import InputError

# column -> kind: 'str'; 'int'; 'float' (required); 'float?' (may be empty -> NaN)
JOBS = {"app": "str", "status": "str", "num_tasks": "int", "constraint": "str", "submit": "float",
        "first_start": "float?", "finish": "float?", "queueing_delay": "float?",
        "completion_time": "float?"}
TASKS = {"app": "str", "task": "int", "attempt": "int", "node": "str", "submit": "float",
         "start": "float?", "finish": "float?", "status": "str"}
SHARES = {"time": "float", "app": "str", "task_share": "float?", "dominant_share": "float?",
          "cpu_share": "float?", "mem_share": "float?", "running": "float?"}
NODE_META = ("node", "ray_node")


def _read_text(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except FileNotFoundError:
        raise InputError("is missing (not a run directory?)", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read: {getattr(e, 'strerror', None) or e}", file=str(path)) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise InputError(f"malformed CSV: {str(e).strip().splitlines()[-1]}", file=str(path)) from None


def _convert(df: pd.DataFrame, kinds: dict[str, str], path: Path) -> pd.DataFrame:
    for col in kinds:
        if col not in df.columns:
            raise InputError(f"the header has no '{col}' column", file=str(path), row=1)
    for col, kind in kinds.items():
        if kind == "str":
            continue
        text = df[col].str.strip()
        values = pd.to_numeric(text, errors="coerce")
        bad = np.array(values.isna() & ((text != "") | (not kind.endswith("?"))), dtype=bool)
        if kind == "int":
            bad |= np.array(values.notna() & (values != np.floor(values)), dtype=bool)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            what = "a whole number" if kind == "int" else "a number"
            raise InputError(f"must be {what}, got {df[col].iloc[i]!r}", file=str(path), row=i + 2,
                             field=col)
        df[col] = values.astype(np.int64) if kind == "int" else values.astype(float)
    return df


def read_table(path: Path, columns: dict[str, str], extra: dict[str, str] | None = None) -> pd.DataFrame:
    """A CSV with the named columns converted; ``extra`` maps column prefixes to kinds."""
    df = _read_text(path)
    kinds = dict(columns)
    for prefix, kind in (extra or {}).items():
        kinds.update({c: kind for c in df.columns if c.startswith(prefix)})
    return _convert(df, kinds, path)


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
        path = self.path / "nodes.csv"
        df = _read_text(path)
        dims = [c for c in df.columns if c not in NODE_META and not c.startswith("attr.")]
        return _convert(df, {"node": "str", **{d: "float" for d in dims}}, path)

    @cached_property
    def dims(self) -> tuple[str, ...]:
        """Resource dimensions: the capacity columns of nodes.csv."""
        return tuple(c for c in self.nodes.columns if c not in NODE_META and not c.startswith("attr."))

    @cached_property
    def jobs(self) -> pd.DataFrame:
        return read_table(self.path / "jobs.csv", JOBS, {"demand.": "float"})

    @cached_property
    def tasks(self) -> pd.DataFrame:
        return read_table(self.path / "tasks.csv", TASKS)

    @cached_property
    def shares(self) -> pd.DataFrame:
        return read_table(self.path / "shares.csv", SHARES)

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
