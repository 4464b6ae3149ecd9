"""The small validators every reader of a config uses: one field, one check, one message.

Each takes the value as read (YAML or a CSV cell) and the field's path (``cluster.nodes[1].count``)
and returns the typed value, or raises an InputError naming that field; the caller adds the file
and row (``InputError.at``).
"""

from __future__ import annotations

import math
from typing import Any

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import Resources


def number(value: Any, where: str, *, positive: bool = False, non_negative: bool = False) -> float:
    if isinstance(value, bool):
        raise InputError(f"must be a number, got {value!r}", field=where)
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"must be a number, got {value!r}", field=where) from None
    if not math.isfinite(x):
        raise InputError(f"must be finite, got {value!r}", field=where)
    if positive and x <= 0:
        raise InputError(f"must be positive, got {value!r}", field=where)
    if non_negative and x < 0:
        raise InputError(f"must not be negative, got {value!r}", field=where)
    return x


def integer(value: Any, where: str, *, minimum: int = 0) -> int:
    x = number(value, where)
    if x != int(x) or x < minimum:
        raise InputError(f"must be a whole number >= {minimum}, got {value!r}", field=where)
    return int(x)


def mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"must be a mapping, got {type(value).__name__}", field=where)
    return value


def listing(value: Any, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"must be a list, got {type(value).__name__}", field=where)
    return value


def resources(value: Any, where: str, *, positive: bool) -> Resources:
    if isinstance(value, str):
        try:
            value = dict(Resources.parse(value))
        except ValueError:
            raise InputError(f"cannot read resources {value!r} (write cpu:1;memory_mb:512)",
                             field=where) from None
    out = {}
    for k, v in mapping(value, where).items():
        x = number(v, f"{where}.{k}", non_negative=True)
        if positive and x <= 0:
            raise InputError(f"must be positive, got {v!r}", field=f"{where}.{k}")
        out[str(k)] = x
    if not any(v > 0 for v in out.values()):
        raise InputError("needs at least one positive amount", field=where)
    return Resources(out)


