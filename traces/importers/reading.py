"""Reading a trace's files with line numbers: JSON streams and delimited tables.

Row numbers are the file's line numbers (1-based, a header line counts) for CSV and TSV
tables, and the line a job object starts on for JSON streams, so a skipped or refused row
(``SkipReport``, traces/importers/common.py) names the line a user can open.  A file that
cannot be read is an ``InputError`` naming it.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from rayrm.rm.core.errors import InputError


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
