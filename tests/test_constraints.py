"""Constraint expressions: a table of {expression, node, want}, as in the k8s framework tests."""

import pytest

from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.errors import InputError

NODE = ("n07", {"gpu": "yes", "kernel": "3.10", "cores": 8, "rack": "b"})


@pytest.mark.parametrize("expr, want", [
    ("", True),
    ("gpu == yes", True),
    ("gpu == no", False),
    ("kernel != 2.6", True),
    ("kernel != 3.10", False),
    ("kernel == 3.1", True),          # both read as numbers: 3.10 == 3.1
    ("cores > 4", True),
    ("cores >= 8", True),
    ("cores < 8", False),
    ("cores <= 8.0", True),
    ("rack in (a, b)", True),
    ("rack not in (a, b)", False),
    ("disk exists", False),
    ("disk not exists", True),
    ("disk != ssd", True),            # != holds where the attribute is missing (YARN, Google)
    ("disk == ssd", False),
    ("disk > 1", False),              # comparisons need the attribute
    ("node in (n01..n10)", True),
    ("node in (n01..n06, n08)", False),
    ("node not in (n07)", False),
    ("gpu == yes and cores > 4 and rack in (b)", True),
    ("gpu == yes and cores > 8", False),
    ('rack == "b"', True),
])
def test_matches(expr, want):
    assert Constraint.parse(expr).matches(*NODE) is want


@pytest.mark.parametrize("expr", ["gpu == yes and cores > 4", "rack not in (a, b)", "disk not exists",
                                  "node in (n01, n02, n03)", "kernel != 2.6"])
def test_text_round_trips(expr):
    c = Constraint.parse(expr)
    assert Constraint.parse(str(c)) == c


def test_ranges_keep_the_width():
    c = Constraint.parse("node in (n08..n11)")
    assert c.clauses[0].values == ("n08", "n09", "n10", "n11")


@pytest.mark.parametrize("expr, message", [
    ("cores >", "expected a value after '>' at the end"),
    ("cores > many", "'cores >' needs a number, found 'many'"),
    ("gpu yes", "unknown operator 'yes' after 'gpu'"),
    ("gpu == yes or cores > 1", "expected 'and' between clauses, found 'or'"),
    ("rack in a, b", "expected '(' to open a list"),
    ("rack not here", "expected 'in' or 'exists' after 'not', found 'here'"),
    ("node in (n10..n01)", "runs backwards"),
    ("gpu =~ yes", "cannot read constraint"),
])
def test_errors_say_what_is_wrong(expr, message):
    with pytest.raises(InputError) as e:
        Constraint.parse(expr)
    assert message in str(e.value)
