"""A run's queue tree read back from its directory: caps checked, shares per queue.

A run directory holds its config's tree as queues.json (``RunLog.queues``) and each job's
leaf in jobs.csv's ``queue`` column.  From them and tasks.csv:

* ``check_queue_caps`` — no queue ever held more than its ``max`` (per resource, usage swept
  over the attempts of its subtree's jobs as ``check._check_capacity`` sweeps a node's,
  with the same tolerances), no user of a queue more than its ``user_limit`` of the queue's
  max (the cluster without one), nor ran more than ``max_apps`` apps at once (an app runs from
  its first attempt's start to its finish, as the scheduler counts it).  Percentages are of
  the cluster nodes.csv lists.
* ``queue_metrics`` — per queue, its time-averaged share S_Q = Σ_{i ∈ Q} w_i s_i (s_i the
  task share of shares.csv, so w_i s_i = n_i / h_i; docs/design.md, "Queues") against its
  steady fair share F_Q = F_parent · W_Q / Σ_{siblings} W (F_root = 1), and the time from
  its first demand (first submit in it) to its min share (usage >= min in a resource its
  min names), for queues with a min.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.queues.tree import QueueSpec, QueueTree, parse_queues, resolve_bounds
from rayrm.rm.runs.reader import RunDir

REL_TOL = 1e-9
PER_CONTAINER_TOL = 1e-6


def run_tree(run: RunDir) -> QueueTree | None:
    """The tree of queues.json, validated as a config's (None: the run had no tree)."""
    doc = run.queues
    if doc is None:
        return None
    dims = run.dims
    try:
        return parse_queues(doc, dims, _total(run))
    except InputError as e:
        raise e.at(file=str(run.path / "queues.json")) from None


def _total(run: RunDir) -> dict[str, float]:
    return {d: float(run.nodes[d].sum()) for d in run.dims}


def _bounds(tree: QueueTree, total: dict) -> dict[str, tuple[dict, dict]]:
    """path -> (min, max) in absolute amounts, capacities and max_capacity followed down."""
    out: dict[str, tuple[dict, dict]] = {}

    def walk(q: QueueSpec, share: float, max_share: float) -> None:
        for c in q.children:
            cs = share * c.capacity / 100 if c.capacity is not None else share
            cm = max_share * c.max_capacity / 100 if c.max_capacity is not None else max_share
            out[c.path] = resolve_bounds(c, total, cs, cm)
            walk(c, cs, cm)

    walk(tree.root, 1.0, 1.0)
    return out


def _in(path: str, leaf: str) -> bool:
    return leaf == path or leaf.startswith(path + ".")


def _leaves(jobs: pd.DataFrame) -> pd.Series:
    """app -> its leaf's path below root."""
    q = jobs["queue"].astype(str)
    return pd.Series(np.where(q.str.startswith("root."), q.str[5:], q), index=jobs["app"].to_numpy())


def check_queue_caps(run: RunDir, result) -> None:
    """Count and note queue_over_max and queue_over_max_apps on ``result`` (a CheckResult)."""
    tree = run_tree(run)
    if tree is None:
        return
    result.queues_checked = len(tree.queues()) - 1
    jobs, tasks, dims = run.jobs, run.tasks, run.dims
    leaf_of = _leaves(jobs)
    bounds = _bounds(tree, _total(run))
    demand = jobs.set_index("app").reindex(columns=[f"demand.{d}" for d in dims], fill_value=0.0)
    started = tasks[tasks["start"].notna() & tasks["app"].isin(leaf_of.index)]
    app_leaf = leaf_of.reindex(started["app"]).to_numpy()
    first = started.groupby("app")["start"].min()
    finish = jobs.set_index("app")["finish"].reindex(first.index)
    last = started.assign(f=started["finish"].fillna(np.inf)).groupby("app")["f"].max()
    until = finish.fillna(last).fillna(np.inf)
    for q in tree.queues():
        if not q.path:
            continue
        mine = np.array([_in(q.path, str(leaf)) for leaf in app_leaf], dtype=bool)
        hi = bounds[q.path][1]
        if hi and mine.any():
            _sweep_max(q, started[mine], demand, dims, hi, result)
        if q.user_limit is not None and mine.any():
            total = _total(run)
            cap = {d: q.user_limit * hi.get(d, total[d]) for d in dims}
            users = jobs.set_index("app")["user"].reindex(started["app"][mine]).to_numpy()
            for user in sorted(set(users)):
                _sweep_max(q, started[mine][users == user], demand, dims, cap, result,
                           f"user {user} in ")
        if q.max_apps is not None:
            apps = [a for a in first.index if _in(q.path, str(leaf_of[a]))]
            _sweep_apps(q, first[apps].to_numpy(), until[apps].to_numpy(), result)


def _sweep_max(q: QueueSpec, rows: pd.DataFrame, demand: pd.DataFrame, dims, hi: dict, result,
               who: str = "") -> None:
    """Starts after which the attempts of ``rows`` hold more than ``hi`` in some resource."""
    d = demand.reindex(rows["app"]).fillna(0.0).to_numpy(dtype=float)
    start = rows["start"].to_numpy(dtype=float)
    finish = np.maximum(rows["finish"].fillna(np.inf).to_numpy(dtype=float), start)
    times = np.concatenate([finish, start])
    kind = np.concatenate([np.zeros(len(start)), np.ones(len(start))])      # releases first
    order = np.lexsort((kind, times))
    used = np.cumsum(np.concatenate([-d, d])[order], axis=0)
    running = np.cumsum(np.where(kind[order] == 1, 1, -1))
    cap = np.array([hi.get(dim, math.inf) for dim in dims])
    limit = cap * (1 + REL_TOL) + PER_CONTAINER_TOL * running[:, None]
    over = (used > limit).any(axis=1) & (kind[order] == 1)
    result.queue_over_max += int(over.sum())
    for j in np.flatnonzero(over)[:5]:
        r = int(np.argmax(used[j] - limit[j]))
        result.note("queue_over_max", f"{who}{q.full_name} at t={times[order][j]:g}: {dims[r]} {used[j, r]:g} "
                                      f"in use, max {cap[r]:g}")


def _sweep_apps(q: QueueSpec, first: np.ndarray, until: np.ndarray, result) -> None:
    times = np.concatenate([until, first])
    kind = np.concatenate([np.zeros(len(first)), np.ones(len(first))])
    order = np.lexsort((kind, times))
    count = np.cumsum(np.where(kind[order] == 1, 1, -1))
    over = (count > q.max_apps) & (kind[order] == 1)
    result.queue_over_max_apps += int(over.sum())
    for j in np.flatnonzero(over)[:5]:
        result.note("queue_over_max_apps", f"{q.full_name} at t={times[order][j]:g}: {count[j]} apps "
                                           f"running, max_apps {q.max_apps}")


def fair_shares(tree: QueueTree) -> dict[str, float]:
    """path -> F_Q, the steady fair share: F_root = 1, F_c = F_parent W_c / Σ_siblings W."""
    out = {"": 1.0}
    for q in tree.queues():
        total = sum(c.weight for c in q.children)
        for c in q.children:
            out[c.path] = out[q.path] * c.weight / total
    return out


def queue_metrics(run: RunDir, t0: float | None = None, t1: float | None = None) -> pd.DataFrame:
    """One row per queue (module docstring): queue, weight, fair_share, avg_share,
    share_ratio (avg / fair), min_delay (s; NaN without a min or never reached)."""
    from rayrm.rm.runs.metrics import time_averaged_shares  # noqa: PLC0415 (metrics imports pandas work)

    tree = run_tree(run)
    if tree is None:
        return pd.DataFrame(columns=["queue", "weight", "fair_share", "avg_share", "share_ratio", "min_delay"])
    jobs, tasks = run.jobs, run.tasks
    t0 = float(jobs["submit"].min()) if t0 is None else t0
    t1 = float(np.nanmax(tasks["finish"].to_numpy(dtype=float), initial=t0)) if t1 is None else t1
    shares = time_averaged_shares(run, t0, t1, ("task_share",)) if t1 > t0 else pd.DataFrame()
    weight = jobs.set_index("app")["weight"]
    work = (shares["task_share"] * weight.reindex(shares.index)) if len(shares) else pd.Series(dtype=float)
    leaf_of = _leaves(jobs)
    fair = fair_shares(tree)
    bounds = _bounds(tree, _total(run))
    rows = []
    for q in tree.queues():
        if not q.path:
            continue
        apps = [a for a in leaf_of.index if _in(q.path, str(leaf_of[a]))]
        avg = float(work.reindex(apps).fillna(0.0).sum()) if apps else 0.0
        rows.append({"queue": q.full_name, "weight": q.weight, "fair_share": fair[q.path], "avg_share": avg,
                     "share_ratio": avg / fair[q.path] if fair[q.path] else math.nan,
                     "min_delay": _min_delay(run, apps, bounds[q.path][0])})
    return pd.DataFrame(rows)


def _min_delay(run: RunDir, apps: list[str], lo: dict) -> float:
    """Seconds from the first submit among ``apps`` to the first instant their usage reaches
    ``lo`` in a resource it names; NaN without a min, without apps, or never."""
    lo = {d: v for d, v in lo.items() if v > 0}
    if not lo or not apps:
        return math.nan
    jobs, tasks = run.jobs, run.tasks
    demand_at = float(jobs[jobs["app"].isin(apps)]["submit"].min())
    rows = tasks[tasks["app"].isin(apps) & tasks["start"].notna()]
    d = jobs.set_index("app")[[f"demand.{k}" for k in lo]].reindex(rows["app"]).fillna(0.0).to_numpy(dtype=float)
    start = rows["start"].to_numpy(dtype=float)
    finish = np.maximum(rows["finish"].fillna(np.inf).to_numpy(dtype=float), start)
    times = np.concatenate([finish, start])
    kind = np.concatenate([np.zeros(len(start)), np.ones(len(start))])
    order = np.lexsort((kind, times))
    used = np.cumsum(np.concatenate([-d, d])[order], axis=0)
    reached = (used >= np.array(list(lo.values())) * (1 - REL_TOL)).any(axis=1) & (kind[order] == 1)
    hits = np.flatnonzero(reached)
    return float(times[order][hits[0]] - demand_at) if len(hits) else math.nan
