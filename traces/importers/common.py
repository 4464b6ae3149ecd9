"""What every importer shares: the skip report, strict mode, tokens, table reading (and, from
``writer.py``, the config writer).

An importer reads a public trace and returns an :class:`ImportResult` (nodes,
node join/leave events, jobs).  Rows it cannot use go to a :class:`SkipReport`
with the file, the row and the field; the report is printed to stderr as a
summary (counts per reason, the first row numbers of each).  In strict mode
the first bad row raises :class:`~rm.errors.InputError` instead, so the CLI
prints one line naming file, row and field and exits non-zero.

Row numbers are the file's line numbers (1-based, a header line counts) for
CSV and TSV tables, and the line a job object starts on for JSON streams.

:func:`write_config` (``writer.py``) writes the rayrm config (YAML) and its job table (a sibling
CSV, ``<config stem>.jobs.csv``, via :func:`rayrm.rm.core.config.write_job_table`) and then
loads the result back with :func:`rayrm.rm.core.config.load_config`, so an importer bug
shows up at import time, not in ``rayrm simulate``.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import sys
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import Resources
from rayrm.traces.importers.writer import ImportResult, dims_of, node_groups, write_config  # noqa: F401

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


# ----- JSON streams and amounts --------------------------------------------------------

def json_stream(path: str | Path):
    """(line, value) for each top-level JSON value: a stream of objects (Rumen, SLS) or one array.

    Hadoop's readers (Jackson) are lenient where Python's ``json`` is not, and real files
    use it: Rumen job histories may open with a ``/* licence */`` block and SYNTH specs
    are written with ``//`` comments and trailing commas, as SLS's own documentation
    shows.  A file that does not parse as it is is read again with comments outside
    strings blanked and a comma before ``}`` or ``]`` dropped (:func:`lenient_json`);
    line numbers stay those of the file.  Strict JSON pays nothing for this.
    """
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", file=str(path)) from None
    except UnicodeDecodeError:
        raise InputError("not a text file (cannot decode it)", file=str(path)) from None
    try:
        values = list(_json_values(text, path))
    except InputError:
        values = None
        head = _LEADING_COMMENTS.match(text).group()
        if head.strip():                 # most often only a licence block: blank it, parse as is
            try:
                values = list(_json_values("\n" * head.count("\n") + text[len(head):], path))
            except InputError:
                pass
        if values is None:
            lenient = lenient_json(text)
            if lenient == text:
                raise
            values = list(_json_values(lenient, path))
    yield from values


_LEADING_COMMENTS = re.compile(r"(?:\s*(?://[^\n]*|/\*[\s\S]*?\*/))*")
_BLANK = re.compile(r"\s*")
_BLANK_OR_COMMA = re.compile(r"[\s,]*")


def _json_values(text: str, path):
    decoder = json.JSONDecoder()
    pos, line, n = 0, 1, len(text)
    in_array = False
    while True:
        end = (_BLANK_OR_COMMA if in_array else _BLANK).match(text, pos).end()
        line += text.count("\n", pos, end)
        pos = end
        if pos >= n:
            return
        if not in_array and text[pos] == "[" and not text[:pos].strip():
            in_array, pos = True, pos + 1
            continue
        if in_array and text[pos] == "]":
            in_array, pos = False, pos + 1
            continue
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InputError(f"malformed JSON: {e.msg}", file=str(path), row=e.lineno) from None
        except ValueError:           # an integer of more than 4,300 digits (int_max_str_digits)
            raise InputError("malformed JSON: a number too long", file=str(path), row=line) from None
        yield line, obj
        line += text.count("\n", pos, end)
        pos = end


_STRING = r'"(?:[^"\\\n]|\\.)*"'
_COMMENTS = re.compile(_STRING + r"|//[^\n]*|/\*[\s\S]*?\*/")
_TRAILING_COMMAS = re.compile(_STRING + r"|,(?=\s*[}\]])")


def lenient_json(text: str) -> str:
    """``text`` with comments blanked (newlines kept) and trailing commas removed; strings untouched."""
    if "/" in text:
        text = _COMMENTS.sub(lambda m: m.group() if m.group().startswith('"')
                             else "\n" * m.group().count("\n"), text)
    if "," in text:
        text = _TRAILING_COMMAS.sub(lambda m: m.group() if m.group().startswith('"') else "", text)
    return text


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


# ----- reading delimited tables fast, with line numbers ------------------------------------

def read_table(path: str | Path, columns: Sequence[str], *, sep: str = ",", header: bool = False):
    """A delimited table as strings (empty cells are ``""``) plus ``_line`` and ``_wide``.

    With ``header=True`` the file's header must name every column in ``columns``
    (others are ignored); without, cells are taken in the order of ``columns``.
    ``_wide`` marks rows with more cells than the header (or ``columns``): pass
    :func:`width_check` to :meth:`SkipReport.check_rows` to skip them.  Missing
    trailing cells read as empty.  Blank lines count, so line numbers stay exact.
    """
    import pandas as pd  # noqa: PLC0415 (keeps `rayrm --help` fast)

    path = Path(path)
    try:
        with warnings.catch_warnings():
            # pandas may only *warn* that a row has too many cells and drop them; make it fail.
            warnings.simplefilter("error", pd.errors.ParserWarning)
            df, first_line = _read_fast(pd, path, columns, sep, header)
    except FileNotFoundError:
        raise InputError("no such file", file=str(path)) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", file=str(path)) from None
    except pd.errors.EmptyDataError:
        if header:
            raise InputError("the file is empty (a header line is needed)", file=str(path)) from None
        return pd.DataFrame({c: pd.Series(dtype=str) for c in columns}
                            | {"_line": pd.Series(dtype=int), "_wide": pd.Series(dtype=bool)})
    except UnicodeDecodeError:
        raise InputError("not a text table (cannot decode it)", file=str(path)) from None
    except (pd.errors.ParserError, pd.errors.ParserWarning, ValueError):
        return _read_table_slow(path, columns, sep=sep, header=header)
    df = df.fillna("")
    df["_line"] = np.arange(first_line, first_line + len(df))
    df["_wide"] = False
    return df


def _read_fast(pd, path: Path, columns: Sequence[str], sep: str, header: bool):
    if not header:
        return pd.read_csv(path, sep=sep, header=None, names=list(columns), dtype=str,
                           keep_default_na=False, skip_blank_lines=False, index_col=False), 1
    head = pd.read_csv(path, sep=sep, nrows=0, dtype=str)
    missing = [c for c in columns if c not in [h.strip() for h in head.columns]]
    if missing:
        raise InputError(f"the header has no '{missing[0]}' column", file=str(path), row=1)
    df = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, skip_blank_lines=False,
                     skipinitialspace=True)
    df.columns = [c.strip() for c in df.columns]
    return df[list(columns)], 2


def width_check(df) -> tuple:
    """The check that skips rows with more cells than columns (see :func:`read_table`)."""
    return (df["_wide"].to_numpy(dtype=bool), None, "more cells than columns")


def _read_table_slow(path: Path, columns: Sequence[str], *, sep: str, header: bool):
    """Row-by-row reading when some rows have more cells than columns (marked ``_wide``)."""
    import pandas as pd  # noqa: PLC0415

    opener = gzip.open if path.suffix == ".gz" else open
    rows, lines, wide = [], [], []
    with opener(path, "rt", newline="") as handle:
        idx, limit = list(range(len(columns))), len(columns)
        for lineno, cells in enumerate(csv.reader(handle, delimiter=sep), start=1):
            if header and lineno == 1:
                head = [c.strip() for c in cells]
                idx, limit = [head.index(c) for c in columns], len(head)
                continue
            wide.append(len(cells) > limit)
            cells = cells + [""] * (limit - len(cells))
            rows.append([cells[i].strip() if header else cells[i] for i in idx])
            lines.append(lineno)
    df = pd.DataFrame(rows, columns=list(columns), dtype=str) if rows else \
        pd.DataFrame({c: pd.Series(dtype=str) for c in columns})
    df["_line"] = np.asarray(lines, dtype=int)
    df["_wide"] = np.asarray(wide, dtype=bool)
    return df


def numeric(df, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A column as floats, with masks of empty cells and of cells that are not numbers."""
    import pandas as pd  # noqa: PLC0415

    raw = df[column].astype(str).str.strip()
    empty = (raw == "").to_numpy()
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = np.isnan(values) & ~empty
    bad |= np.isinf(values)
    return values, empty, bad
