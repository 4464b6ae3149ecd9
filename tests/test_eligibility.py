"""Eligibility as ClusterState computes it once per distinct thing and spreads to the nodes:
a clause once per distinct value of its attribute, a demand once per distinct capacity
vector (rm/core/cluster.py).  Each must give, node for node, what the plain per-node
formula gives, and be recomputed when a node joins or leaves."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rayrm.rm.core.cluster import ClusterState
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.model import EPS, AppSpec, NodeSpec, Resources
from rayrm.rm.core.shares import tasks_fit

# values that compare alike or not: 1 and 1.0 and "1" are all the number 1; True is the
# text "True" (a bool is not a number); -0.0 is the number 0; n4 has no attribute a
ATTRS = [{"a": 1}, {"a": True}, {"a": "1"}, {}, {"a": 1.0}, {"a": -0.0}]


def _cluster(attrs=ATTRS) -> ClusterState:
    c = ClusterState(("cpu", "mem"))
    c.add_nodes([NodeSpec(f"n{i + 1}", Resources.parse("cpu:4;mem:8"), a) for i, a in enumerate(attrs)])
    return c


@pytest.mark.parametrize("expr, want", [
    ("a == 1", [1, 0, 1, 0, 1, 0]),           # 1, "1" and 1.0 equal 1 as numbers
    ("a != 1", [0, 1, 0, 1, 0, 1]),           # holds where a is missing (n4)
    ("a exists", [1, 1, 1, 0, 1, 1]),
    ("a not exists", [0, 0, 0, 1, 0, 0]),
    ("a in (True, 0)", [0, 1, 0, 0, 0, 1]),   # "True" as text; -0.0 == 0 as numbers
    ("a >= 1", [1, 0, 1, 0, 1, 0]),           # True is no number: no order
    ("a == 1 and node in (n1, n2, n5)", [1, 0, 0, 0, 1, 0]),
])
def test_a_clause_tested_once_per_value_matches_node_by_node(expr, want):
    c = _cluster()
    constraint = Constraint.parse(expr)
    assert c.constraint_matches(constraint).astype(int).tolist() == want
    assert want == [int(constraint.matches(n.name, n.attributes)) for n in c.nodes]


def test_a_joining_node_is_matched_and_a_leaving_one_is_not_eligible():
    c = _cluster()
    c.add_app(AppSpec("x", Resources.parse("cpu:1;mem:1"), 1, constraint=Constraint.parse("a == 1")))
    # n1 and n5 hold 4 tasks each (min(4/1, 8/1) = 4); n3's "1" matches too: h^c = 3 * 4
    assert (c.apps["x"].eligible, c.apps["x"].eligible_count, c.apps["x"].h_c) == (
        bytes([1, 0, 1, 0, 1, 0]), 3, 12.0)
    c.add_node(NodeSpec("n7", Resources.parse("cpu:2;mem:8"), {"a": 1}))
    # n7 <2, 8> holds min(2/1, 8/1) = 2 more: 12 + 2 = 14
    assert (c.apps["x"].eligible, c.apps["x"].eligible_count, c.apps["x"].h_c) == (
        bytes([1, 0, 1, 0, 1, 0, 1]), 4, 14.0)
    c.remove_node("n1")
    # n1 gone: 14 - 4 = 10
    assert (c.apps["x"].eligible, c.apps["x"].eligible_count, c.apps["x"].h_c) == (
        bytes([0, 0, 1, 0, 1, 0, 1]), 3, 10.0)


@pytest.mark.parametrize("seed", range(5))
def test_per_demand_by_capacity_vector_is_the_per_node_formula(seed):
    """Random clusters of a few node kinds, some nodes lost: fits and tasks per node of
    random demands against tasks_fit and the fit test, node by node."""
    rng = random.Random(seed)
    kinds = [(rng.choice([1, 2, 4, 8, 16]), rng.choice([1, 7.5, 8, 32, 64])) for _ in range(rng.randint(1, 6))]
    c = ClusterState(("cpu", "mem"))
    c.add_nodes([NodeSpec(f"n{i}", Resources(cpu=cpu, mem=mem))
                 for i, (cpu, mem) in enumerate(rng.choice(kinds) for _ in range(rng.randint(1, 60)))])
    c.remove_nodes([n.name for n in c.nodes if rng.random() < 0.2])
    for _ in range(30):
        demand = (rng.choice([0.0, 0.5, 1.0, 3.0, 9.0]), rng.choice([0.0, 0.1, 1.0, 7.5, 40.0]))
        fits, per, exact = c._per_demand(demand)
        assert exact            # a few dozen nodes of at most 16 / 0.5 = 32 tasks: far below 2**52
        assert fits.tolist() == [n.alive and all(cap + EPS >= d for cap, d in zip(n.capacity, demand))
                                 for n in c.nodes]
        assert per.tolist() == [tasks_fit(n.capacity, demand) if n.alive else 0.0 for n in c.nodes]
    assert np.array_equal(c._kinds[0], np.unique([n.capacity for n in c.nodes], axis=0))
