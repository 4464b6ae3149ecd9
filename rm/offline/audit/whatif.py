"""What if a job lies?  Re-solve a config's offline allocation with one app misreporting.

``what_if(config, app)`` tries every lie of ``rayrm.rm.offline.audit.search``'s SP check on the
user's own workload — demands doubled on each resource and on all, constraints
narrowed to fewer node groups or widened to more (node groups: nodes alike in
capacity and in whom they admit), and both at once — under each policy, and
reports whether the app would run more tasks it can really use (counted as in
the SP check: ρ̃ bundles on its truly eligible nodes, best placement the policy
allows, at most its number of tasks).  Tasks are capped at each job's count.

``simulate_lies`` replays the trace in the simulator (``rayrm.rm.sim.engine.simulate``) for
the truthful report and every lie the simulator can run faithfully — demand
inflation and narrowed constraints; a widened claim would put tasks on nodes the
job cannot really use, which a simulator that believes the claim cannot show —
and reports the app's completion time under each.
"""

from __future__ import annotations

import csv
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from rayrm.rm.offline.audit.search import lie_outcome
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import Resources
from rayrm.rm.offline.filling import Problem, machine_types, progressive_filling
from rayrm.rm.offline.views import ALIASES, offline_policy
from rayrm.rm.sim.engine import simulate

#: policies compared by default, by their online names (rayrm.rm.core.policies)
WHATIF_POLICIES = ("pm-drf", "drfh-ff", "cdrf", "tsf", "cmmf-cpu", "cmmf-mem", "drf")


def _group_label(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]}..{names[-1]} ({len(names)} nodes)"


def lies(problem: Problem, i: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, claimed demand, claimed eligibility) for app i, node groups as the unit."""
    d, p, dims, names = problem.demand[i], problem.eligible[i], problem.dims, problem.node_names
    kind, _ = machine_types(problem)
    groups = [np.flatnonzero(kind == t) for t in range(kind.max() + 1)]
    label = {t: _group_label([names[m] for m in g]) for t, g in enumerate(groups)}
    on = [t for t, g in enumerate(groups) if p[g[0]]]
    off = [t for t, g in enumerate(groups) if not p[g[0]]]
    demand_lies = [(f"{dims[r]}×2", np.where(np.arange(len(d)) == r, d * 2, d)) for r in np.flatnonzero(d > 0)]
    if np.count_nonzero(d) > 1:
        demand_lies.append(("all demands×2", d * 2))
    claims = []
    if len(on) > 1:
        for t in on:
            q = p.copy()
            q[groups[t]] = False
            claims.append((f"drops {label[t]}", q))
    if len(on) > 2:
        claims += [(f"only {label[t]}", np.isin(np.arange(len(p)), groups[t])) for t in on]
    for t in off:
        q = p.copy()
        q[groups[t]] = True
        claims.append((f"adds {label[t]}", q))
    if len(off) > 1:
        claims.append(("claims every node", np.ones(len(p), dtype=bool)))
    out = [(lbl, lie, p) for lbl, lie in demand_lies] + [(lbl, d, q) for lbl, q in claims]
    if claims and demand_lies and not p.all():
        out.append(("claims every node, all demands×2", d * 2, np.ones(len(p), dtype=bool)))
    return out


def what_if(config, app: str, policies=WHATIF_POLICIES) -> dict:
    """Per policy: the app's truthful tasks and what each lie would give it (module docstring)."""
    problem = Problem.from_config(config)
    if app not in problem.app_ids:
        raise InputError(f"no job '{app}' in the config (jobs: {', '.join(problem.app_ids[:8])}"
                         f"{', ...' if len(problem.app_ids) > 8 else ''})", field="--app")
    i = problem.app_ids.index(app)
    out = {"app": app, "policies": {}, "skipped": {}}
    for name in policies:
        if offline_policy(name).pooled and not problem.eligible.all():
            out["skipped"][name] = f"{name} pools the cluster and applies only without constraints"
            continue
        try:
            truthful = float(progressive_filling(problem, name).tasks[i])
        except InputError as e:
            out["skipped"][name] = e.reason
            continue
        rows = []
        for label, lie_d, lie_p in lies(problem, i):
            try:
                best, least = lie_outcome(name, problem, i, lie_d, lie_p)
            except InputError:
                continue
            rows.append({"lie": label, "claimed_demand": dict(zip(problem.dims, map(float, lie_d))),
                         "claimed_nodes": int(lie_p.sum()), "widens": bool((lie_p & ~problem.eligible[i]).any()),
                         "tasks": round(float(best), 6), "least": round(float(least), 6),
                         "gain": round(float(best) - truthful, 6)})
        top = max(rows, key=lambda r: r["gain"], default=None)
        gains = bool(top is not None and top["gain"] > 1e-6 * max(1.0, truthful))
        out["policies"][name] = {"truthful_tasks": round(truthful, 6), "would_gain": gains,
                                 "best_lie": top["lie"] if gains else None,
                                 "gain": top["gain"] if gains else 0.0, "lies": rows}
    return out


def _completion_time(config, policy: str, app: str) -> float | None:

    with tempfile.TemporaryDirectory() as tmp:
        simulate(config, policy=policy, seed=config.seed, out=tmp)
        with open(Path(tmp) / "jobs.csv", newline="") as fh:
            for row in csv.DictReader(fh):
                if row["app"] == app:
                    return float(row["completion_time"]) if row["completion_time"] else None
    return None


def online_name(name: str) -> str:
    """The simulator's spec for a policy (offline drfh runs as drfh-ff, cmmf as cmmf-cpu)."""
    return ALIASES.get(name, name)


def simulate_lies(config, app: str, result: dict) -> None:
    """Add the app's simulated completion time, truthful and under each runnable lie, to ``result``."""
    problem = Problem.from_config(config)
    i = problem.app_ids.index(app)
    claims = {label: lie_p for label, _, lie_p in lies(problem, i)}
    job_at = next(k for k, j in enumerate(config.jobs) if j.job_id == app)
    job = config.jobs[job_at]
    for name, row in result["policies"].items():
        sim_policy = online_name(name)
        row["completion_time"] = _completion_time(config, sim_policy, app)
        for lie in row["lies"]:
            lie["completion_time"] = None
            if lie["widens"]:
                continue                      # tasks would land on nodes the job cannot use
            constraint, claimed = job.app.constraint, claims[lie["lie"]]
            if not np.array_equal(claimed, problem.eligible[i]):
                constraint = Constraint.whitelist([n for n, ok in zip(problem.node_names, claimed) if ok])
            spec = replace(job.app, demand=Resources(lie["claimed_demand"]), constraint=constraint)
            jobs = list(config.jobs)
            jobs[job_at] = replace(job, app=spec)
            lie["completion_time"] = _completion_time(replace(config, jobs=jobs), sim_policy, app)
