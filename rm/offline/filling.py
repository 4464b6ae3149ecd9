"""Offline progressive filling for divisible tasks (tsf-paper §V-B, Algorithm 1; choosy-paper §5).

Notation (tsf-paper §V-B1): machines m with capacity C_m, users i with demand
d_i, constraint vector p_i (p_im = 1 when i may run on m), weight w_i; n_im is
the (fractional) number of i's tasks on m and n_i = Σ_m n_im.  Each policy
measures a user by a *share* that grows linearly in its tasks, and progressive
filling makes the vector of shares max-min fair.  Round t solves

    max s^t                                                                (1)
    s.t.  share_i(n_i) = s^t                  for active users i ∈ A^t      (2)
          n_i ≥ n_i^frozen                    for inactive users i ∉ A^t    (3)
          Σ_i n_im d_ir ≤ C_mr                for every machine m, resource r (4)
          n_im = 0 where p_im = 0,  n_im ≥ 0,  n_i ≤ (tasks the app has)

then *freezes* the active users that are saturated — those that cannot rise
above s^t while every other user keeps at least its current level — and repeats
until no user is active.  (2) is solved as "share_i ≥ s^t": any user above s^t
can shed tasks without touching the other constraints, so the optimum is the same.

Shares: the policy's own (``Policy.shares``, ``rayrm.rm.core.shares``), any policy spec —
built-in, file, module or installed plugin — whose key grows by a fixed share per task.
Each user's share of one task u_i is asked of the policy on the divisible instance (h_i
and h_i^c not floored), so ``tsf`` fills task shares n_i / (h_i w_i) (tsf-paper §V-A,
Definition 7), ``cdrf`` work slowdowns n_i / (h_i^c w_i) (tsf-paper §IV-B3), ``drfh-ff``
global dominant shares (drfh-paper §IV-A, eq. 7, §V-A for weights), ``cmmf-cpu`` the share
of one resource (choosy-paper §4.2, §5), a plugin its n_i · unit_i.  Two declared
properties change the model, not the share:

* ``per_node`` (per-machine DRF): every machine filled separately among the users eligible
  on it, per (user, machine) n_im · max_r(d_ir / C_mr) (tsf-paper §IV-B1); the share
  reported per user is the policy's ``share`` (its global dominant share);
* ``pooled`` (DRF): the cluster pooled into one machine with the total capacity,
  constraints ignored (Ghodsi et al.; tsf-paper §III-B).  It describes a real allocation
  only when there are no constraints (and, strictly, one machine): the pooled optimum
  need not fit the actual machines, so no per-node placement is returned.

A policy that orders by its own ``key`` (FIFO, aging) or accounts virtual resources
(slots) has no max-min form here.  ``ALIASES`` keeps the offline names ``drfh`` and
``cmmf`` (CMMF on ``--resource``, cpu by default).

**Freeze, exactly and in few LPs.**  A user j is saturated iff no feasible
allocation gives it more than its level while everyone else keeps at least
theirs.  Testing users one at a time (Algorithm 1's FREEZE) costs one LP per
active user per round.  Instead one LP maximises Σ_{j∈T} t_j over the candidate
set T, with 0 ≤ t_j ≤ t_max and (tasks_j − level_j) / h_j ≥ t_j, everyone else at
≥ its level: every j with t_j > tol is unsaturated; drop them from T and re-solve
until the optimum is 0 — the users left in T are exactly the saturated ones.  Correctness: the feasible allocations
with everyone at ≥ their level form a convex polytope P.  If the optimum is 0, no
j ∈ T can rise alone (else t_j > 0 would be feasible), so all of T is saturated.
Conversely, if each j in a set U can rise alone in some X_j ∈ P, the average of
the X_j lies in P and raises every j ∈ U at once (choosy-paper §5 uses the same
convexity), so the joint LP never hides an unsaturated user: it only may leave
some of them at t_j = 0 in one solve, which the re-solve catches.  Each re-solve
removes at least one user, and usually one or two solves settle a round: t_max is
small (1e-3), so unsaturated users rarely compete for the same slack.

**Coalescing** (choosy-paper §5, "Coalescing Identical Machines"): machines with
the same capacity and the same eligibility for every user form one *type* with a
single variable per user; the type's tasks are split evenly over its machines
when reported.  By symmetry this loses nothing: any allocation can be averaged
over the machines of a type.

Variables are scaled to y_im = n_im / h_i (at most 1) and resources to shares of
the cluster total, so every LP is O(1) in magnitude.  Levels carried from one LP
to the next are kept exact (relaxed by 1e-9 only if HiGHS would otherwise call a
later LP infeasible), HiGHS runs with 1e-9 tolerances, and a user counts as
unsaturated when it can rise by more than 1e-7 of h_i.  Against the literal
Algorithm 1 (tests/test_offline.py) the task counts agree to ~1e-12.
The rounds themselves live in ``rm/offline/lp.py`` (``Filling``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence

import numpy as np

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import AppSpec, NodeSpec
from rayrm.rm.core.policies import Policy
from rayrm.rm.core.shares import h_tasks, tasks_per_machine
from rayrm.rm.offline.lp import Filling
from rayrm.rm.offline.views import offline_policy, units

#: the offline names of the papers' policies (each a policy spec or an ``ALIASES`` name)
POLICIES = ("tsf", "cdrf", "drfh", "cmmf", "pm-drf", "drf")


# ----- the instance ---------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Problem:
    """An offline instance as arrays: machines × resources, users × resources, eligibility.

    ``eligible[i, m]`` is p_im; ``limit[i]`` is how many tasks user i has (``inf`` when
    it has enough to fill anything, as the papers assume).
    """

    dims: tuple[str, ...]
    node_names: tuple[str, ...]
    capacity: np.ndarray          # M x R
    app_ids: tuple[str, ...]
    demand: np.ndarray            # N x R
    eligible: np.ndarray          # N x M, bool
    weight: np.ndarray            # N
    limit: np.ndarray             # N, may be inf

    @classmethod
    def from_specs(cls, nodes: Sequence[NodeSpec], apps: Sequence[AppSpec],
                   dims: Iterable[str] | None = None, *, limit_tasks: bool = True) -> "Problem":
        """Build from model objects; ``limit_tasks=False`` gives every app unlimited tasks."""
        known = list(dims or [])
        for spec in [n.capacity for n in nodes] + [a.demand for a in apps]:
            known.extend(d for d in spec if d not in known)
        dims = tuple(known)
        eligible = np.array([[a.constraint.matches(n.name, n.attributes) for n in nodes]
                             for a in apps], dtype=bool).reshape(len(apps), len(nodes))
        return cls(dims, tuple(n.name for n in nodes),
                   np.array([n.capacity.vector(dims) for n in nodes], dtype=float).reshape(len(nodes), len(dims)),
                   tuple(a.app_id for a in apps),
                   np.array([a.demand.vector(dims) for a in apps], dtype=float).reshape(len(apps), len(dims)),
                   eligible, np.array([a.weight for a in apps], dtype=float),
                   np.array([a.num_tasks if limit_tasks else np.inf for a in apps], dtype=float))

    @classmethod
    def from_config(cls, config, *, limit_tasks: bool = True) -> "Problem":
        """The config's initial cluster and all its jobs at once (submit times ignored)."""
        return cls.from_specs(config.nodes, config.apps, config.dims, limit_tasks=limit_tasks)

    @property
    def total(self) -> np.ndarray:
        return self.capacity.sum(axis=0)

    @property
    def h(self) -> np.ndarray:
        """h_i, divisible: tasks of user i all machines hold, constraints removed (tsf-paper §V-A)."""
        return h_tasks(self.capacity, self.demand, divisible=True)

    @property
    def h_c(self) -> np.ndarray:
        """h_i^c, divisible: the same over the machines user i may use (tsf-paper §IV-B3)."""
        return h_tasks(self.capacity, self.demand, eligible=self.eligible, divisible=True)

    def with_app(self, i: int, *, demand=None, eligible=None) -> "Problem":
        """The same instance with user i reporting another demand and/or eligibility."""
        d, p = self.demand.copy(), self.eligible.copy()
        if demand is not None:
            d[i] = demand
        if eligible is not None:
            p[i] = eligible
        return replace(self, demand=d, eligible=p)

    def with_weights(self, weight) -> "Problem":
        return replace(self, weight=np.asarray(weight, dtype=float))

    def pooled(self) -> "Problem":
        """The whole cluster as one machine, every user eligible (DRF's model)."""
        return replace(self, node_names=("(pooled)",), capacity=self.total[None, :],
                       eligible=np.ones((len(self.app_ids), 1), dtype=bool))


# ----- the result -----------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Allocation:
    """Progressive filling's answer: tasks per user and machine, and each user's share."""

    policy: str                   # the policy spec as named
    problem: Problem
    tasks_on_node: np.ndarray     # N x M (pooled: N x 1, the pooled machine)
    share: np.ndarray             # N, in the policy's own share (``share_kind``)
    rounds: int
    share_kind: str = "task_share"
    pooled: bool = False
    per_node: bool = False

    @property
    def tasks(self) -> np.ndarray:
        return self.tasks_on_node.sum(axis=1)

    def as_dict(self, digits: int = 9) -> dict:
        """``{"policy": P, "apps": {APP: {"tasks": x, "share": s, "per_node": {NODE: x}}}}``."""
        def num(x: float) -> float:
            x = round(float(x), digits)
            return 0.0 if x == 0 else x
        pooled = self.pooled
        apps = {}
        for i, app in enumerate(self.problem.app_ids):
            row = self.tasks_on_node[i]
            per_node = {} if pooled else {self.problem.node_names[m]: num(row[m])
                                          for m in np.flatnonzero(row > 10.0 ** -digits)}
            apps[app] = {"tasks": num(row.sum()), "share": num(self.share[i]), "per_node": per_node}
        return {"policy": self.policy, "apps": apps}


# ----- progressive filling --------------------------------------------------------

def machine_types(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Coalesce machines with identical capacity and eligibility (choosy-paper §5).

    Returns (type_of_machine, first machine of each type).
    """
    key = np.hstack([problem.capacity, problem.eligible.T.astype(float)])
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return inverse.reshape(-1), first


def progressive_filling(problem: Problem, policy: "str | Policy" = "tsf", *,
                        resource: str | None = None) -> Allocation:
    """Max-min fair shares under ``policy`` by progressive filling (tsf-paper Algorithm 1).

    ``policy``: a policy spec (any, plugins included) or a ``Policy``; ``resource`` the
    resource a policy with a ``resource`` option shares (cmmf).  See the module docstring
    for the shares, the LP of each round and the freeze step.
    """
    made = offline_policy(policy, resource)
    label = policy if isinstance(policy, str) else made.name
    solved = problem.pooled() if made.pooled else problem
    unit = units(made, problem)
    zero = np.flatnonzero(~(unit > 0))
    if len(zero):
        raise InputError(f"policy '{label}': app {problem.app_ids[zero[0]]}'s {made.share_kind().title} "
                         f"of one task is {unit[zero[0]]:g}; progressive filling needs every share to grow "
                         f"with its tasks", field="policy")
    h = solved.h
    kind, first = machine_types(solved)
    count = np.bincount(kind, minlength=len(first)).astype(float)
    cap_t = solved.capacity[first]                              # T x R
    fit = tasks_per_machine(cap_t, solved.demand, divisible=True)      # N x T
    usable = solved.eligible[:, first] & (fit > 0) & (h > 0)[:, None]
    users, types = np.nonzero(usable)
    if made.per_node:
        # One agent per (user, type): its per-machine dominant share, n_it / count_t · max_r d_ir / C_tr.
        level = h[users] / (fit[users, types] * count[types] * solved.weight[users])
        y, rounds = _per_machine(solved, h, users, types, count, cap_t, level)
    else:
        level = np.where(h > 0, unit * h, 0.0)
        y, rounds = Filling(solved, h, users, types, count, cap_t, users, level).run()
    tasks_on_type = np.zeros((len(problem.app_ids), len(first)))
    tasks_on_type[users, types] = y * h[users]
    tasks_on_node = tasks_on_type[:, kind] / count[kind]
    tasks = tasks_on_node.sum(axis=1)
    share = tasks * np.where(np.isfinite(unit), unit, 0.0)
    return Allocation(label, problem, tasks_on_node, share, rounds, made.share_kind().name, made.pooled,
                      made.per_node)


def _per_machine(problem, h, users, types, count, cap_t, level) -> tuple[np.ndarray, int]:
    """Per-machine DRF: each machine type filled on its own (the machines do not interact).

    Only the users' task limits couple the machines; when the separate answers
    exceed some user's limit, all pairs are filled together as one problem.
    """
    y, rounds = np.zeros(len(users)), 0
    for t in np.unique(types):
        on_t = np.flatnonzero(types == t)
        y[on_t], r = Filling(problem, h, users[on_t], types[on_t], count, cap_t,
                              np.arange(len(on_t)), level[on_t], limits=False).run()
        rounds = max(rounds, r)
    tasks = np.bincount(users, weights=y * h[users], minlength=len(problem.app_ids))
    if np.any(tasks > problem.limit * (1 + 1e-9) + 1e-9):
        return Filling(problem, h, users, types, count, cap_t, np.arange(len(users)), level).run()
    return y, rounds
