"""Placement constraints in YARN node-attribute style, parsed once.

Grammar (clauses joined with ``and``; an empty string means every node)::

    attr == v      attr != v      attr < n   attr > n   attr <= n   attr >= n
    attr in (a, b, ...)           attr not in (a, b, ...)
    attr exists                   attr not exists
    node in (n1, n2, n01..n10)    explicit whitelist by node name (``node not in`` too)

Semantics, as in YARN node attributes and the Google trace's constraint operators:
``==``, ``in`` and the numeric comparisons need the attribute to be present;
``!=`` and ``not in`` hold on a node that lacks it.  Values compare as numbers
when both sides read as numbers, otherwise as strings.  ``a..b`` inside a list
expands a numbered range with the width of ``a`` (``n01..n03`` is n01, n02, n03).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Mapping

from rayrm.rm.core.errors import InputError

_TOKEN = re.compile(r"""\s*(?:
    (?P<str>"[^"]*"|'[^']*')
  | (?P<op>==|!=|<=|>=|<|>|\(|\)|,)
  | (?P<word>[^\s(),<>=!"']+)
)""", re.VERBOSE)

MAX_RANGE = 100_000            # names one a..b range may expand to

_NUMERIC_OPS = {"<", ">", "<=", ">="}
_OPS = {"==", "!=", "<", ">", "<=", ">=", "in", "not in", "exists", "not exists"}


def _as_number(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


_BARE = re.compile(r"""[^\s(),<>=!"']+""")


def _canon(v) -> str:
    """A value's text as the parser reads it back: numbers without a trailing .0,
    strings bare when they are one token, quoted otherwise."""
    n = _as_number(v)
    if n is not None and not isinstance(v, str):
        return f"{n:g}"
    text = str(v)
    if _BARE.fullmatch(text):
        return text
    return f"'{text}'" if '"' in text else f'"{text}"'


def _equal(a, b) -> bool:
    na, nb = _as_number(a), _as_number(b)
    if na is not None and nb is not None:
        return na == nb
    return str(a) == str(b)


@dataclass(frozen=True)
class Clause:
    """One test on one attribute (``attr`` is ``node`` for the node's name)."""

    attr: str
    op: str
    values: tuple = ()

    def matches(self, node: str, attributes: Mapping) -> bool:
        if self.attr == "node":
            present, value = True, node
        else:
            present = self.attr in attributes
            value = attributes.get(self.attr)
        op = self.op
        if op == "exists":
            return present
        if op == "not exists":
            return not present
        if op == "!=":
            return not present or not _equal(value, self.values[0])
        if op == "not in":
            return not present or not any(_equal(value, v) for v in self.values)
        if not present:
            return False
        if op == "==":
            return _equal(value, self.values[0])
        if op == "in":
            return any(_equal(value, v) for v in self.values)
        x, y = _as_number(value), _as_number(self.values[0])
        if x is None or y is None:
            return False
        return {"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op]

    def __str__(self) -> str:
        attr = _canon(self.attr)
        if self.op in ("exists", "not exists"):
            return f"{attr} {self.op}"
        if self.op in ("in", "not in"):
            return f"{attr} {self.op} ({', '.join(map(_canon, self.values))})"
        return f"{attr} {self.op} {_canon(self.values[0])}"


@dataclass(frozen=True)
class Constraint:
    """A conjunction of clauses; ``matches`` is true when every clause holds."""

    clauses: tuple[Clause, ...] = ()

    def matches(self, node: str, attributes: Mapping) -> bool:
        return all(c.matches(node, attributes) for c in self.clauses)

    @property
    def is_empty(self) -> bool:
        return not self.clauses

    @property
    def attributes(self) -> set[str]:
        """Attribute names the constraint reads (``node`` for a whitelist)."""
        return {c.attr for c in self.clauses}

    def __str__(self) -> str:
        return self.text

    @cached_property
    def text(self) -> str:
        """The canonical text, built once (the scheduler keys its caches by it per app)."""
        return " and ".join(map(str, self.clauses))

    def __and__(self, other: "Constraint") -> "Constraint":
        return Constraint(self.clauses + other.clauses)

    @classmethod
    def parse(cls, text: str | None) -> "Constraint":
        """Parse a constraint expression; raises InputError naming what it could not read."""
        return _Parser(text or "").parse()

    @classmethod
    def whitelist(cls, nodes) -> "Constraint":
        return cls((Clause("node", "in", tuple(nodes)),))


ANY_NODE = Constraint()


def _expand_range(a: str, b: str) -> list[str]:
    ma, mb = re.fullmatch(r"(.*?)(\d+)", a), re.fullmatch(r"(.*?)(\d+)", b)
    if not ma or not mb or ma.group(1) != mb.group(1):
        raise InputError(f"cannot expand range '{a}..{b}': both ends need the same prefix and a number")
    prefix, width = ma.group(1), len(ma.group(2))
    lo, hi = int(ma.group(2)), int(mb.group(2))
    if hi < lo:
        raise InputError(f"range '{a}..{b}' runs backwards")
    if hi - lo >= MAX_RANGE:
        raise InputError(f"range '{a}..{b}' names more than {MAX_RANGE:,} nodes")
    return [f"{prefix}{i:0{width}d}" for i in range(lo, hi + 1)]


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        stripped = text.rstrip()
        while pos < len(stripped):
            m = _TOKEN.match(stripped, pos)
            if not m or m.end() == pos:
                raise InputError(f"cannot read constraint {text!r} at character {pos + 1}")
            kind = m.lastgroup
            value = m.group(kind)
            if kind == "str":
                value = value[1:-1]
            self.tokens.append((kind, value))
            pos = m.end()
        self.i = 0

    def error(self, what: str) -> InputError:
        return InputError(f"cannot read constraint {self.text!r}: {what}")

    def peek(self, ahead: int = 0):
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else (None, None)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def word(self, what: str) -> str:
        kind, value = self.take()
        if kind not in ("word", "str"):
            raise self.error(f"expected {what}, found {value!r}" if value else f"expected {what} at the end")
        return value

    def parse(self) -> Constraint:
        if not self.tokens:
            return ANY_NODE
        clauses = [self.clause()]
        while self.peek()[0] is not None:
            kind, value = self.take()
            if kind != "word" or value.lower() != "and":
                raise self.error(f"expected 'and' between clauses, found {value!r}")
            clauses.append(self.clause())
        return Constraint(tuple(clauses))

    def clause(self) -> Clause:
        attr = self.word("an attribute name")
        kind, value = self.take()
        if kind == "op" and value in ("==", "!=", "<", ">", "<=", ">="):
            operand = self.word(f"a value after '{value}'")
            if value in _NUMERIC_OPS and _as_number(operand) is None:
                raise self.error(f"'{attr} {value}' needs a number, found {operand!r}")
            return Clause(attr, value, (operand,))
        if kind == "word":
            low = value.lower()
            if low == "not":
                k2, v2 = self.take()
                low2 = (v2 or "").lower()
                if k2 == "word" and low2 == "in":
                    return Clause(attr, "not in", self.value_list())
                if k2 == "word" and low2 == "exists":
                    return Clause(attr, "not exists")
                raise self.error(f"expected 'in' or 'exists' after 'not', found {v2!r}")
            if low == "in":
                return Clause(attr, "in", self.value_list())
            if low == "exists":
                return Clause(attr, "exists")
        raise self.error(f"unknown operator {value!r} after '{attr}'" if value else
                         f"'{attr}' needs an operator")

    def value_list(self) -> tuple:
        kind, value = self.take()
        if (kind, value) != ("op", "("):
            raise self.error("expected '(' to open a list")
        values: list[str] = []
        while True:
            item = self.word("a list item")
            if ".." in item and not item.startswith(".."):
                a, _, b = item.partition("..")
                values.extend(_expand_range(a, b))
            else:
                values.append(item)
            kind, value = self.take()
            if (kind, value) == ("op", ")"):
                break
            if (kind, value) != ("op", ","):
                raise self.error("expected ',' or ')' in a list")
        if not values:
            raise self.error("an empty list")
        return tuple(values)
