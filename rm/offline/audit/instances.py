"""The instances the property audit searches: the papers' examples and small random ones.

Every instance is an ``rayrm.rm.offline.filling.Problem`` (machines, users, demands,
eligibility; unit weights, unlimited tasks as in the papers' analyses) with a
name and a source.  A few carry dedicated pools for the sharing-incentive check
(choosy-paper Theorem 1 gives each user one machine).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rayrm.rm.offline.filling import Problem


@dataclass(frozen=True, eq=False)
class Instance:
    name: str
    source: str
    problem: Problem
    pools: tuple[np.ndarray, ...] = ()       # N x M fractions of each machine given to each user

    @property
    def size(self) -> tuple[int, int, int]:
        """(machines + users, machines, resources): smaller is a simpler counterexample."""
        p = self.problem
        return len(p.node_names) + len(p.app_ids), len(p.node_names), len(p.dims)


def build(machines: dict[str, dict], users: dict[str, tuple]) -> Problem:
    """machines: name -> {resource: amount}; users: name -> (demand dict, machine names or "*")."""
    dims = tuple(dict.fromkeys(d for cap in machines.values() for d in cap))
    names = tuple(machines)
    capacity = np.array([[machines[m].get(d, 0.0) for d in dims] for m in names], dtype=float)
    demand = np.array([[u[0].get(d, 0.0) for d in dims] for u in users.values()], dtype=float)
    eligible = np.array([[u[1] == "*" or m in u[1].split() for m in names] for u in users.values()])
    n = len(users)
    return Problem(dims, names, capacity, tuple(users), demand, eligible, np.ones(n), np.full(n, np.inf))


def paper_instances() -> list[Instance]:
    cpu_mem = lambda c, m: {"cpu": c, "mem": m}  # noqa: E731
    out = [
        Instance("tsf-fig2", "tsf-paper Fig. 2a (constrained CDRF is not strategy-proof)", build(
            {"m1": cpu_mem(18, 18), "m2": cpu_mem(18, 18)},
            {"u1": (cpu_mem(1, 2), "m1 m2"), "u2": (cpu_mem(1, 3), "m2")})),
        Instance("tsf-fig3", "tsf-paper Fig. 3 (constrained CDRF is not envy-free)", build(
            {m: {"cpu": 3} for m in ("m1", "m2", "m3")},
            {"u1": ({"cpu": 1}, "m1"), "u2": ({"cpu": 1}, "m1 m2 m3"), "u3": ({"cpu": 1}, "m2"),
             "u4": ({"cpu": 1}, "m2"), "u5": ({"cpu": 1}, "m3"), "u6": ({"cpu": 1}, "m3"),
             "u7": ({"cpu": 1}, "m3")})),
        Instance("tsf-fig4", "tsf-paper Fig. 4 (the running example of TSF)", build(
            {"m1": cpu_mem(9, 12), "m2": cpu_mem(3, 4), "m3": cpu_mem(9, 12)},
            {"u1": (cpu_mem(1, 2), "m1 m2"), "u2": (cpu_mem(3, 1), "m2"), "u3": (cpu_mem(1, 4), "*")})),
        Instance("drf-one-machine", "DRF's example, tsf-paper Theorem 6 (one machine)", build(
            {"m1": cpu_mem(9, 18)}, {"u1": (cpu_mem(1, 4), "*"), "u2": (cpu_mem(3, 1), "*")})),
        Instance("choosy-fig5", "choosy-paper Fig. 5 (CMMF by progressive filling)", build(
            {f"m{k}": {"slot": 1} for k in range(1, 10)},
            {"u1": ({"slot": 1}, "m1 m2"), "u2": ({"slot": 1}, "m2 m3 m4 m5"),
             "u3": ({"slot": 1}, "m5 m6 m7 m8 m9")})),
        Instance("drfh-fig1", "drfh-paper Fig. 1-3 (per-machine DRF wastes, DRFH does not)", build(
            {"s1": cpu_mem(2, 12), "s2": cpu_mem(12, 2)},
            {"u1": (cpu_mem(0.2, 1), "*"), "u2": (cpu_mem(1, 0.2), "*")})),
        Instance("cdrf-thesis-dummy", "cdrf-thesis, 'DRFH in a containerized setting' (a dummy machine)", build(
            {"m1": cpu_mem(15, 15), "m2": cpu_mem(16, 0)},
            {"u1": (cpu_mem(1, 0.5), "*"), "u2": (cpu_mem(0.5, 1), "*")})),
    ]
    # choosy-paper Theorem 1: each user contributes one machine; u1 can use both, u2 only m2.
    thm1 = build({"m1": {"slot": 1}, "m2": {"slot": 1}}, {"u1": ({"slot": 1}, "m1 m2"), "u2": ({"slot": 1}, "m2")})
    out.append(Instance("choosy-thm1", "choosy-paper Theorem 1 (independent allocation is not SI)", thm1,
                        pools=(np.eye(2),)))
    return out


def random_instances(count: int, seed: int) -> list[Instance]:
    """``count`` small random instances: every fourth has one resource, every fourth one machine
    (of one to three resources).

    Capacities are whole numbers 1-12 of every resource, demands 0-4 (never all
    zero), each user may use a random non-empty set of machines; a quarter of
    the instances have no constraints at all (so DRF applies).
    """
    out = []
    for k in range(count):
        rng = np.random.default_rng([seed, k])
        kind = k % 4
        machines = 1 if kind == 3 else int(rng.integers(2, 5))
        users = int(rng.integers(2, 5))
        resources = 1 if kind == 2 else int(rng.integers(1 if kind == 3 else 2, 4))
        dims = ("cpu", "mem", "gpu")[:resources]
        capacity = rng.integers(1, 13, size=(machines, resources)).astype(float)
        demand = rng.integers(0, 5, size=(users, resources)).astype(float)
        demand[np.arange(users), rng.integers(resources, size=users)] += 1
        if rng.random() < 0.25:
            eligible = np.ones((users, machines), dtype=bool)
        else:
            eligible = rng.random((users, machines)) < (0.85 if machines == 1 else 0.6)
            eligible[np.arange(users), rng.integers(machines, size=users)] = True
        problem = Problem(dims, tuple(f"m{j + 1}" for j in range(machines)), capacity,
                          tuple(f"u{i + 1}" for i in range(users)), demand, eligible,
                          np.ones(users), np.full(users, np.inf))
        out.append(Instance(f"random-{seed}-{k}", f"random instance {k} of seed {seed}", problem))
    return out


def literal(values, dims) -> str:
    """A resource vector as a compact literal, e.g. ``cpu:1;mem:2``."""
    return ";".join(f"{d}:{v:g}" for d, v in zip(dims, values) if v) or "0"


def describe(problem: Problem) -> dict:
    """The instance in a readable, JSON-friendly form."""
    return {
        "machines": {m: literal(problem.capacity[j], problem.dims) for j, m in enumerate(problem.node_names)},
        "users": {u: {"demand": literal(problem.demand[i], problem.dims),
                      "machines": [m for j, m in enumerate(problem.node_names) if problem.eligible[i, j]]}
                  for i, u in enumerate(problem.app_ids)},
    }
