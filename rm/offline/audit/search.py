"""The sharing-property audit: search offline allocations for violations (tsf-paper §III, Table I).

For every policy and instance (``rm/offline/audit/instances.py``) the divisible
allocation of ``rayrm.rm.offline.filling.progressive_filling`` is checked for

* **SI**, sharing incentive (Definition 1): every user runs at least the k_i tasks
  its dedicated pool holds.  Pools are *equal partitioning* (1/N of every machine;
  DRF's definition, drfh-paper §IV-D) and, where an instance has them, *arbitrary
  pools* (whole machines or random fractions; tsf-paper Definition 1).  Weights: those
  that make the pool itself fair in the policy's own share, w_i = k_i · u_i with u_i
  the share of one task at weight 1 — TSF k_i / h_i (Theorem 1), CDRF k_i / h_i^c
  (Theorem 1's argument with h^c; under equal partitioning cdrf-thesis Theorem 14 gives
  SI), dominant share for DRFH and DRF (drfh-paper §V-A), resource share for CMMF
  (choosy-paper §3.1).  Shares of resources (``ShareKind.aggregate == "usage"``) are
  unweighted under equal partitioning (equal pools, equal entitlements); per-machine
  DRF, which has no cluster-wide share, gets w_i = k_i / h_i (all equal in choosy-paper
  Theorem 1's example).
* **SP**, strategy-proofness (Definition 2, two-dimensional lies): a user reports
  its demand scaled up on some resources, its constraints narrowed or widened,
  or both.  Under a lie (d̃, p̃) the policy gives it ñ_im bundles ñ_im d̃_i; it can
  run only min_{r: d_ir>0} ñ_im d̃_ir / d_ir = ρ̃ ñ_im true tasks on a machine, and
  none where p_im = 0 (tsf-paper Appendix A-B, n_i(ã) in the proof of Theorem 2),
  so it runs ρ̃ Σ_{m: p_im=1} ñ_im.  The policy fixes how many tasks each user gets,
  not where; the lie *pays* if some allocation giving everyone the policy's task
  counts lets the liar run more than when truthful (an LP; Fig. 2b's allocation is
  one such).  The counterexample also shows the least it could get.
* **EF**, envy-freeness (Definition 3): n_i ≥ (w_i / w_j) n_{i↔j}, where
  n_{i↔j} = Σ_m p_im min_{r: d_ir>0} n_jm d_jr / d_ir counts j's bundles under i's
  constraints and demand — again maximised over the placements the policy allows.
* **PO**, Pareto optimality (Definition 4): per user an LP maximising its tasks
  while every other user keeps at least its own.
* **SMF** (Definition 5): on one machine the allocation equals DRF's.
* **SRF** (Definition 6): with one resource it equals CMMF's.

Per-machine DRF fixes its allocation machine by machine, so for it the placement
LPs are replaced by the allocation itself.  A pooled policy (``drf``) applies only to
instances without constraints (the checks run on the pooled machine) and a policy that
shares one resource (``cmmf``) only to instances with one resource, which it then shares.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace

import numpy as np

from rayrm.rm.offline.audit.instances import Instance, describe, literal
from rayrm.rm.core.shares import TASK_SHARE, h_tasks, tasks_per_machine
from rayrm.rm.offline.filling import Allocation, Problem, progressive_filling
from rayrm.rm.offline.lp import solve_once
from rayrm.rm.offline.views import holders, offline_policy

POLICIES = ("pm-drf", "drfh", "cdrf", "tsf", "drf", "cmmf")
PROPERTIES = ("SI", "SP", "EF", "PO", "SMF", "SRF")
#: a difference in tasks below TOL · max(1, tasks) is numerical noise, not a violation
TOL = 1e-6


def one_resource(policy: str) -> bool:
    """Does the policy share one resource (its ``resource`` option: CMMF)?"""
    return hasattr(offline_policy(policy), "resource")


def view(policy: str, problem: Problem) -> Problem | None:
    """The instance as ``policy`` sees it, or None where the policy does not apply."""
    if offline_policy(policy).pooled:
        return problem.pooled() if problem.eligible.all() else None
    if one_resource(policy):
        return problem if np.count_nonzero(problem.total > 0) == 1 else None
    return problem


def allocate(policy: str, problem: Problem) -> Allocation:
    """The policy's allocation; a policy that shares one resource shares the instance's one."""
    resource = problem.dims[int(np.argmax(problem.total > 0))] if one_resource(policy) else None
    return progressive_filling(problem, policy, resource=resource)


def exceeds(a: float, b: float) -> bool:
    """a > b by more than noise."""
    return a > b + TOL * max(1.0, abs(b))


# ----- the placement LP -------------------------------------------------------------

def extreme_placement(problem: Problem, alloc: Allocation, objective: np.ndarray, maximize: bool = True,
                      policy_placement: bool = True) -> float:
    """max (min) Σ_im objective_im n_im over allocations giving each user ≥ its tasks in ``alloc``.

    Feasible: eligibility, capacity (eq. 4) and task limits of ``problem``.  Machines identical in
    capacity, eligibility and objective are coalesced.  Per-machine DRF places every
    task itself, so with ``policy_placement`` its own allocation is the only one.
    """
    if policy_placement and alloc.per_node:
        return float((objective * alloc.tasks_on_node).sum())
    usable = problem.eligible & (tasks_per_machine(problem.capacity, problem.demand, divisible=True) > 0)
    key = np.hstack([problem.capacity, usable.T, objective.T])
    _, first, kind = np.unique(key, axis=0, return_index=True, return_inverse=True)
    count = np.bincount(kind.reshape(-1)).astype(float)
    users, types = np.nonzero(usable[:, first])
    n_t, n_r, n_v, n_u = len(first), len(problem.dims), len(users), len(problem.app_ids)
    var, res = np.nonzero(problem.demand[users] > 0)
    rows = np.concatenate([types[var] * n_r + res, n_t * n_r + users])
    cols = np.concatenate([var, np.arange(n_v)])
    vals = np.concatenate([problem.demand[users[var], res], np.ones(n_v)])
    tasks = alloc.tasks
    row_lo = np.concatenate([np.full(n_t * n_r, -np.inf), tasks * (1 - 1e-9) - 1e-9])
    row_hi = np.concatenate([(problem.capacity[first] * count[:, None]).reshape(-1), problem.limit])
    gain = objective[users, first[types]]
    x = solve_once((n_t * n_r + n_u, n_v), rows, cols, vals, -gain if maximize else gain,
                   np.zeros(n_v), np.full(n_v, np.inf), row_lo, row_hi)
    return float(gain @ x)


# ----- tallies ----------------------------------------------------------------------

@dataclass
class Tally:
    """One policy and property: how many checks ran, the smallest violation, where others were."""

    tried: int = 0
    violations: int = 0
    smallest: tuple | None = None
    found_on: list = field(default_factory=list)

    def add(self, instance: Instance, problem: Problem, details: dict | None) -> None:
        self.tried += 1
        if details is None:
            return
        self.violations += 1
        if instance.name not in self.found_on:
            self.found_on.append(instance.name)
        key = (instance.size, self.violations)
        if self.smallest is None or key < self.smallest[0]:
            example = {"instance": instance.name, "source": instance.source, **describe(problem), **details}
            self.smallest = (key, example)

    def result(self) -> dict:
        example = None
        if self.smallest is not None:
            example = dict(self.smallest[1], violations=self.violations,
                           found_on=[n for n in self.found_on if not n.startswith("random-")]
                           + [f"{sum(n.startswith('random-') for n in self.found_on)} random instance(s)"])
        return {"holds": self.violations == 0, "tried": self.tried, "counterexample": example}


# ----- the checks -------------------------------------------------------------------

def dedicated_tasks(problem: Problem, pool: np.ndarray) -> np.ndarray:
    """k_i: tasks user i runs alone in its pool (pool_im of machine m), under its constraints."""
    return h_tasks(problem.capacity, problem.demand, eligible=pool * problem.eligible, divisible=True)


def entitlement_weights(policy: str, problem: Problem, k: np.ndarray, equal_partition: bool) -> np.ndarray:
    """The weights each policy is run with for a dedicated pool giving k_i tasks (module
    docstring): k_i times the policy's share of one task at weight 1."""
    made = offline_policy(policy, problem.dims[int(np.argmax(problem.total > 0))] if one_resource(policy) else None)
    if equal_partition and (made.per_node or made.share_kind().aggregate == "usage"):
        return np.ones(len(k))
    plain = holders(problem.with_weights(np.ones(len(k))))
    unit = TASK_SHARE.unit(plain) if made.per_node else made.shares(1.0, plain)
    return k * np.asarray(unit, dtype=float)


def pools_of(instance: Instance, problem: Problem) -> list[tuple[str, np.ndarray]]:
    n, m = problem.eligible.shape
    out = [("equal partitioning", np.full((n, m), 1.0 / n))]
    if problem is not instance.problem:                            # drf's pooled view
        if n > 1:
            rng = np.random.default_rng(zlib.crc32(instance.name.encode()))
            out.append(("random fractions", rng.dirichlet(np.ones(n), size=m).T))
        return out
    out += [(f"pool {k + 1} of the paper", pool) for k, pool in enumerate(instance.pools)]
    if instance.name.startswith("random-"):
        rng = np.random.default_rng(zlib.crc32(instance.name.encode()))
        whole = np.zeros((n, m))
        whole[rng.integers(n, size=m), np.arange(m)] = 1.0
        out += [("whole machines", whole), ("random fractions", rng.dirichlet(np.ones(n), size=m).T)]
    return out


def check_si(policy, instance, problem, tally) -> None:
    for label, pool in pools_of(instance, problem):
        k = dedicated_tasks(problem, pool)
        if np.any(k <= 1e-9):
            continue                                               # someone is entitled to nothing
        equal = label == "equal partitioning"
        w = entitlement_weights(policy, problem, k, equal)
        n = allocate(policy, problem.with_weights(w)).tasks
        short = [i for i in range(len(k)) if exceeds(k[i], n[i])]
        details = None
        if short:
            i = short[0]
            u = problem.app_ids[i]
            details = {"pool": label, "pool_fractions": {problem.app_ids[a]: {
                           problem.node_names[b]: round(float(pool[a, b]), 6) for b in np.flatnonzero(pool[a])}
                           for a in range(len(k))},
                       "weights": {problem.app_ids[a]: round(float(w[a]), 6) for a in range(len(k))},
                       "user": u, "dedicated_tasks": round(float(k[i]), 6), "shared_tasks": round(float(n[i]), 6),
                       "summary": f"{u} runs {n[i]:.4g} tasks shared, fewer than the {k[i]:.4g} "
                                  f"of its dedicated pool ({label})"}
        tally.add(instance, problem, details)


def misreports(problem: Problem, i: int, exhaustive: bool, rng) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Two-dimensional lies of user i: demands scaled up, constraints narrowed or widened, both."""
    d, p, dims, names = problem.demand[i], problem.eligible[i], problem.dims, problem.node_names
    demand_lies = []
    for r in np.flatnonzero(d > 0):
        for factor in ((1.5, 2.0, 3.0) if exhaustive else (2.0,)):
            lie = d.copy()
            lie[r] *= factor
            demand_lies.append((f"{dims[r]}×{factor:g}", lie))
    if np.count_nonzero(d) > 1:
        demand_lies.append(("all demands×2", d * 2))
    on, off = np.flatnonzero(p), np.flatnonzero(~p)
    constraint_lies = []
    if len(on) > 1:
        constraint_lies += [(f"drops {names[m]}", p & (np.arange(len(p)) != m)) for m in on]
    if len(on) > 2:
        constraint_lies += [(f"only {names[m]}", np.arange(len(p)) == m) for m in on]
    constraint_lies += [(f"adds {names[m]}", p | (np.arange(len(p)) == m)) for m in off]
    if len(off) > 1:
        constraint_lies.append(("claims every machine", np.ones(len(p), dtype=bool)))
    lies = [(label, lie, p) for label, lie in demand_lies] + [(label, d, q) for label, q in constraint_lies]
    for label, q in constraint_lies:                               # both dimensions at once
        pairs = demand_lies if exhaustive else demand_lies[int(rng.integers(len(demand_lies))):][:1]
        lies += [(f"{label}, {dl}", lie, q) for dl, lie in pairs]
    return lies


def lie_outcome(policy: str, problem: Problem, i: int, lie_d: np.ndarray, lie_p: np.ndarray,
                least: bool = True) -> tuple[float, float | None]:
    """(most, least) true tasks user i runs when it reports (lie_d, lie_p) to ``policy``.

    ρ̃ Σ_{m: p_im = 1} ñ_im with ρ̃ = min_{r: d_ir>0} d̃_ir / d_ir, over the placements
    that give every user the policy's task count (module docstring, SP).  ``least=False``
    skips the second LP (None instead).
    """
    d = problem.demand[i]
    lied = problem.with_app(i, demand=lie_d, eligible=lie_p)
    got = allocate(policy, lied)
    rho = min(lie_d[r] / d[r] for r in np.flatnonzero(d > 0))
    useful = np.zeros_like(problem.eligible, dtype=float)
    useful[i] = problem.eligible[i]
    most = min(rho * extreme_placement(lied, got, useful, maximize=True), problem.limit[i])
    if not least:
        return float(most), None
    return float(most), float(min(rho * extreme_placement(lied, got, useful, maximize=False), problem.limit[i]))


def check_sp(policy, instance, problem, alloc, tally) -> None:
    exhaustive = not instance.name.startswith("random-")
    rng = np.random.default_rng(zlib.crc32(instance.name.encode()))
    for i in range(len(problem.app_ids)):
        truthful = alloc.tasks[i]
        for label, lie_d, lie_p in misreports(problem, i, exhaustive, rng):
            best, _ = lie_outcome(policy, problem, i, lie_d, lie_p, least=False)
            details = None
            if exceeds(best, truthful):
                _, worst = lie_outcome(policy, problem, i, lie_d, lie_p)
                u = problem.app_ids[i]
                details = {"user": u, "lie": label,
                           "claimed": {"demand": literal(lie_d, problem.dims),
                                       "machines": [m for j, m in enumerate(problem.node_names) if lie_p[j]]},
                           "truthful_tasks": round(float(truthful), 6), "tasks_when_lying": round(best, 6),
                           "gain": round(best - float(truthful), 6), "least_when_lying": round(worst, 6),
                           "summary": f"{u} {label}: runs {best:.4g} tasks instead of {truthful:.4g} "
                                      f"(+{best - truthful:.4g})"}
            tally.add(instance, problem, details)


def check_ef(policy, instance, problem, alloc, tally) -> None:
    d, p, w, n = problem.demand, problem.eligible, problem.weight, alloc.tasks
    for i in range(len(n)):
        for j in range(len(n)):
            if i == j:
                continue
            rho = min(d[j, r] / d[i, r] for r in np.flatnonzero(d[i] > 0))
            swap = 0.0
            if rho > 0:
                objective = np.zeros_like(p, dtype=float)
                objective[j] = p[i]
                swap = rho * extreme_placement(problem, alloc, objective)
            details = None
            if exceeds(w[i] / w[j] * swap, n[i]):
                a, b = problem.app_ids[i], problem.app_ids[j]
                details = {"user": a, "envies": b, "own_tasks": round(float(n[i]), 6),
                           "tasks_with_other_allocation": round(swap, 6),
                           "summary": f"{a} envies {b}: it runs {swap:.4g} tasks with {b}'s allocation, "
                                      f"{n[i]:.4g} with its own"}
            tally.add(instance, problem, details)


def check_po(policy, instance, problem, alloc, tally) -> None:
    for j, u in enumerate(problem.app_ids):
        objective = np.zeros_like(problem.eligible, dtype=float)
        objective[j] = 1.0
        best = extreme_placement(problem, alloc, objective, policy_placement=False)
        details = None
        if exceeds(best, alloc.tasks[j]):
            details = {"user": u, "tasks": round(float(alloc.tasks[j]), 6), "could_run": round(best, 6),
                       "summary": f"{u} could run {best:.4g} tasks instead of {alloc.tasks[j]:.4g} "
                                  f"without anyone running fewer"}
        tally.add(instance, problem, details)


def _differs(label, policy, problem, tasks, reference) -> dict | None:
    bad = [i for i in range(len(tasks)) if abs(tasks[i] - reference[i]) > TOL * max(1.0, abs(reference[i]))]
    if not bad:
        return None
    show = lambda v: {u: round(float(x), 6) for u, x in zip(problem.app_ids, v)}  # noqa: E731
    return {"tasks": show(tasks), label: show(reference),
            "summary": f"{policy} gives {', '.join(f'{x:.4g}' for x in tasks)}; "
                       f"{label.split('_')[0].upper()} gives {', '.join(f'{x:.4g}' for x in reference)}"}


def check_smf(policy, instance, problem, alloc, tally) -> None:
    """Definition 5: one machine → DRF among the users that may use it."""
    if len(instance.problem.node_names) != 1:
        return
    ok = np.flatnonzero(problem.eligible[:, 0])
    reference = np.zeros(len(problem.app_ids))
    sub = replace(problem, app_ids=tuple(problem.app_ids[i] for i in ok), demand=problem.demand[ok],
                  eligible=problem.eligible[ok], weight=problem.weight[ok], limit=problem.limit[ok])
    reference[ok] = allocate("drf", sub).tasks
    tally.add(instance, problem, _differs("drf_tasks", policy, problem, alloc.tasks, reference))


def check_srf(policy, instance, problem, alloc, tally) -> None:
    """Definition 6: one resource → CMMF."""
    if view("cmmf", instance.problem) is None:
        return
    reference = allocate("cmmf", instance.problem).tasks
    tally.add(instance, problem, _differs("cmmf_tasks", policy, problem, alloc.tasks, reference))


def run_audit(instances: list[Instance], policies=POLICIES, progress=None) -> dict:
    """``{"policies": {NAME: {PROPERTY: {"holds", "tried", "counterexample"}}}}``."""
    tallies = {p: {prop: Tally() for prop in PROPERTIES} for p in policies}
    for instance in instances:
        for policy in policies:
            problem = view(policy, instance.problem)
            if problem is None:
                continue
            alloc = allocate(policy, problem)
            t = tallies[policy]
            check_si(policy, instance, problem, t["SI"])
            check_sp(policy, instance, problem, alloc, t["SP"])
            check_ef(policy, instance, problem, alloc, t["EF"])
            check_po(policy, instance, problem, alloc, t["PO"])
            check_smf(policy, instance, problem, alloc, t["SMF"])
            check_srf(policy, instance, problem, alloc, t["SRF"])
        if progress:
            progress(instance)
    return {"policies": {p: {prop: tallies[p][prop].result() for prop in PROPERTIES} for p in policies}}
