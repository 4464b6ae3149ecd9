"""What every importer shares: the skip report, strict mode, amounts, tokens, the config writer.

An importer reads a public trace and returns an :class:`ImportResult` (nodes,
node join/leave events, jobs).  Rows it cannot use go to a :class:`SkipReport`
with the file, the row and the field; the report is printed to stderr as a
summary (counts per reason, the first row numbers of each).  In strict mode
the first bad row raises :class:`~rm.errors.InputError` instead, so the CLI
prints one line naming file, row and field and exits non-zero.

Row numbers are the file's line numbers (1-based, a header line counts) for
CSV and TSV tables, and the line a job object starts on for JSON streams
(traces/importers/reading.py reads both).

:func:`write_config` writes the rayrm config (YAML) and its job table (a sibling
CSV, ``<config stem>.jobs.csv``, via :func:`rayrm.rm.core.config.write_job_table`) and then
loads the result back with :func:`rayrm.rm.core.config.load_config`, so an importer bug
shows up at import time, not in ``rayrm simulate``.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import yaml

from rayrm.rm.core.config import load_config, write_job_table
from rayrm.rm.core.jobs import JobSpec
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import NodeSpec, Resources

SHOW_ROWS = 8          # row numbers listed per reason in the summary


# ----- the skip report -----------------------------------------------------------

class SkipReport:
    """Rows skipped (with file, row, field, reason) and assumptions applied (notes).

    Two kinds of skip: a *bad* row (malformed: a cell that is not a number, an
    unknown code, a duplicate id) and a row *left out by a rule* the importer
    documents (a pod that never ran, a task that was killed).  ``strict=True``
    turns the first bad row into an InputError; rows left out by rule are only
    reported, since every real trace has them.  Vectorised importers hand whole
    masks to :meth:`check_rows`, which in strict mode raises for the lowest bad
    row number across all checks, as a row-by-row reader would.
    """

    def __init__(self, source: str, strict: bool = False):
        self.source = source
        self.strict = strict
        self._skips: dict[tuple, list] = defaultdict(list)   # (rule?, file, field, reason) -> rows
        self._notes: dict[str, int] = defaultdict(int)

    # skipping ----------------------------------------------------------------------

    def skip(self, reason: str, *, file: str | Path | None = None, row: int | None = None,
             field: str | None = None, rule: bool = False) -> None:
        """Skip one row: bad (strict mode raises) or, with ``rule=True``, left out by rule."""
        file = str(file) if file is not None else None
        if self.strict and not rule:
            raise InputError(reason, file=file, row=row, field=field)
        self._skips[(rule, file, field, reason)].append(row)

    def skip_rows(self, reason: str, rows: Iterable[int], *, file: str | Path | None = None,
                  field: str | None = None, rule: bool = False) -> None:
        rows = [int(r) for r in rows]
        if not rows:
            return
        if self.strict and not rule:
            self.skip(reason, file=file, row=min(rows), field=field)
        self._skips[(rule, str(file) if file is not None else None, field, reason)].extend(rows)

    def check_rows(self, rows: np.ndarray, checks: Sequence[tuple], *, file: str | Path) -> np.ndarray:
        """Apply ``(bad_mask, field, reason[, "rule"])`` checks in order; returns the good-row mask.

        A row failing several checks is reported once, under its first failing check.
        """
        rows = np.asarray(rows)
        bad_any = np.zeros(len(rows), dtype=bool)
        first: list[tuple[np.ndarray, str | None, str, bool]] = []
        for mask, fld, reason, *kind in checks:
            mask = np.asarray(mask, dtype=bool) & ~bad_any
            if mask.any():
                first.append((mask, fld, reason, kind == ["rule"]))
                bad_any |= mask
        if self.strict:
            malformed = [f for f in first if not f[3]]
            if malformed:
                lowest = min(rows[m].min() for m, *_ in malformed)
                for mask, fld, reason, _ in malformed:
                    if (rows[mask] == lowest).any():
                        raise InputError(reason, file=str(file), row=int(lowest), field=fld)
        for mask, fld, reason, rule in first:
            self.skip_rows(reason, rows[mask], file=file, field=fld, rule=rule)
        return ~bad_any

    # notes -------------------------------------------------------------------------

    def note(self, text: str, count: int = 1) -> None:
        """An assumption the importer applied ``count`` times (not a skip)."""
        if count:
            self._notes[text] += int(count)

    @property
    def skipped(self) -> int:
        """Rows skipped, bad or by rule."""
        return sum(len(v) for v in self._skips.values())

    def reasons(self) -> dict[str, int]:
        """Skipped-row counts by reason (all files, both kinds)."""
        out: dict[str, int] = defaultdict(int)
        for (_, _, _, reason), rows in self._skips.items():
            out[reason] += len(rows)
        return dict(out)

    def notes(self) -> dict[str, int]:
        return dict(self._notes)

    def lines(self) -> list[str]:
        bad = sum(len(v) for k, v in self._skips.items() if not k[0])
        ruled = self.skipped - bad
        out = [f"{self.source}: skipped {bad} bad row(s), left out {ruled} by rule"]
        out += ["  " + line for line in self._skip_lines()]
        for text, n in sorted(self._notes.items(), key=lambda kv: -kv[1]):
            out.append(f"  note: {text} ({n})")
        return out

    def _skip_lines(self) -> list[str]:
        out = []
        for (rule, file, fld, reason), rows in sorted(self._skips.items(),
                                                       key=lambda kv: (kv[0][0], -len(kv[1]))):
            shown = sorted(r for r in rows if r is not None)
            listing = ", ".join(map(str, shown[:SHOW_ROWS])) + (", ..." if len(shown) > SHOW_ROWS else "")
            where = (file or "") + (f": field '{fld}'" if fld else "")
            out.append(f"{'left out' if rule else 'bad'}: {len(rows)} x {reason}"
                       + (f" [{where}]" if where else "") + (f" (rows {listing})" if listing else ""))
        return out

    def why(self) -> str:
        """One line: which rule or check left out which rows (for "the trace yields no job")."""
        return "; ".join(self._skip_lines()) or "no row was skipped, the input holds none"

    def print(self, stream=None) -> None:
        print("\n".join(self.lines()), file=stream or sys.stderr)


# ----- amounts ---------------------------------------------------------------------

def amount(value) -> float | None:
    """A non-negative finite number from a JSON value, or None (booleans are not numbers)."""
    if isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):       # OverflowError: a JSON integer of 10**400
        return None
    return x if x >= 0 and x != float("inf") else None


def at_most(value: float, limit: int, what: str, *, file=None, row=None, field=None) -> int:
    """``value`` (a size one number in a trace asks for) as an int, checked before it is built."""
    if value > limit:
        raise InputError(f"at most {limit:,} {what}, got {value:,.0f}", file=None if file is None else str(file),
                         row=row, field=field)
    return int(value)


# ----- tokens for attribute names and values -----------------------------------------

_SAFE = re.compile(r"[A-Za-z0-9_.\-+/:@%]+")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9_.\-+/:@%]")


def token(value: Any) -> str:
    """``value`` as a word the constraint grammar reads back unchanged.

    Characters outside ``[A-Za-z0-9_.-+/:@%]`` become ``_`` and ``..`` (a range in a
    list) becomes ``._``; an empty value becomes ``_``.  Base64 hashes (the Google
    trace's attribute names and values) only lose their ``=`` padding this way.
    """
    text = str(value).strip()
    if isinstance(value, float) and value.is_integer():
        text = str(int(value))
    if not _SAFE.fullmatch(text) or ".." in text:
        text = _UNSAFE_CHAR.sub("_", text).replace("..", "._") or "_"
    return text


def attr_value(text: str) -> str | int | float:
    """An attribute value for YAML: integers and decimals as numbers, the rest as tokens."""
    t = token(text)
    if re.fullmatch(r"-?\d{1,15}", t):
        return int(t)
    if re.fullmatch(r"-?\d+\.\d+", t):
        return float(t)
    return t


def parse_resources(text: str, option: str) -> Resources:
    """A resource literal given on the command line (``cpu:1;memory_mb:1024``)."""
    try:
        r = Resources.parse(text)
    except ValueError:
        raise InputError(f"cannot read resources {text!r} (write cpu:1;memory_mb:1024)",
                         field=option) from None
    if not r or any(v < 0 for v in r.values()):
        raise InputError(f"needs positive amounts, got {text!r}", field=option)
    return r


# ----- the result and the config writer --------------------------------------------

@dataclass
class ImportResult:
    """What an importer produces: the cluster (nodes and events) and the jobs."""

    nodes: list[NodeSpec]
    jobs: list[JobSpec]
    events: list[dict] = field(default_factory=list)   # cluster.events entries (config form)
    description: str = ""
    queues: list[dict] | None = None                    # the config's queues: tree (None: root.default)
    policy: str | None = None                           # the queue file's policy, when --policy is not given
    preemption: dict | None = None                      # the config's preemption: (the queue file's site)


def dims_of(nodes: Iterable[NodeSpec], jobs: Iterable[JobSpec], events: Iterable[dict] = ()) -> tuple:
    """Resource dimensions in the config's order: cpu first, GPUs last."""
    names = {d for n in nodes for d in n.capacity}
    names |= {d for j in jobs for d in j.app.demand}
    names |= {d for e in events if "join" in e for d in e["join"]["capacity"]}
    return tuple(sorted(names, key=lambda d: (d != "cpu", d.startswith("gpu"), d)))


def _node_entry(spec: NodeSpec) -> dict:
    entry: dict[str, Any] = {"name": spec.name, "capacity": {k: _num(v) for k, v in spec.capacity.items()}}
    if spec.attributes:
        entry["attributes"] = dict(spec.attributes)
    return entry


def _num(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def node_groups(nodes: Sequence[NodeSpec]) -> list[dict]:
    """``cluster.nodes`` groups: runs of identical nodes named ``prefix<n>`` become one group."""
    groups: list[dict] = []
    run: list[tuple[str, int, int, NodeSpec]] = []   # (prefix, number, width, spec)

    def flush():
        if not run:
            return
        if len(run) == 1:
            groups.append(_node_entry(run[0][3]))
        else:
            prefix, start, width, spec = run[0]
            entry = _node_entry(spec)
            entry["name"] = prefix + "{i:0%dd}" % width
            entry["count"], entry["start"] = len(run), start
            groups.append(entry)
        run.clear()

    for spec in nodes:
        m = re.fullmatch(r"(.*?)(\d+)", spec.name)
        if not m or "{" in spec.name or "}" in spec.name:
            flush()
            groups.append(_node_entry(spec))
            continue
        prefix, digits = m.group(1), m.group(2)
        width, number = len(digits), int(digits)
        if run:
            p0, n0, w0, s0 = run[-1]
            same = (p0 == prefix and w0 == width and number == n0 + 1 and s0.capacity == spec.capacity
                    and dict(s0.attributes) == dict(spec.attributes))
            if not same:
                flush()
        run.append((prefix, number, width, spec))
    flush()
    return groups


def write_config(path: str | Path, result: ImportResult, *, name: str | None = None,
                 policy: str | None = None, check: bool = True, report: SkipReport | None = None) -> Path:
    """Write ``path`` (YAML) and ``<stem>.jobs.csv`` next to it; returns the CSV path.

    With ``check`` the written config is loaded back (every error it would raise in
    ``rayrm simulate`` is raised here instead).  With ``report``, a trace that yields no
    job or node is an error that names the rules and checks that left out which rows.
    """
    path = Path(path)
    why = report.why() if report is not None else "see the skip report"
    if not result.nodes:
        raise InputError(f"the trace yields no usable node ({why})", file=str(path))
    if not result.jobs:
        raise InputError(f"the trace yields no usable job ({why})", file=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    table = path.with_name(path.stem + ".jobs.csv")
    dims = dims_of(result.nodes, result.jobs, result.events)
    doc: dict[str, Any] = {"name": name or path.stem}
    if result.description:
        doc["description"] = result.description
    doc["resources"] = list(dims)
    doc["cluster"] = {"nodes": node_groups(result.nodes)}
    if result.events:
        doc["cluster"]["events"] = result.events
    if result.queues:
        doc["queues"] = result.queues
        if result.preemption:
            doc["preemption"] = result.preemption
    doc["workload"] = {"file": table.name}
    doc["policy"] = policy if policy is not None else (result.policy or "tsf")
    doc["run"] = {"seed": 1}
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    with open(path, "w") as handle:
        yaml.dump(doc, handle, Dumper=dumper, sort_keys=False, default_flow_style=None, width=120)
    write_job_table(table, result.jobs, dims)
    if check:
        try:
            load_config(path)
        except InputError:
            path.unlink(missing_ok=True)      # never leave a config rayrm cannot read
            table.unlink(missing_ok=True)
            raise
    return table
