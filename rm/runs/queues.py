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
  steady fair share F_Q (``rayrm.rm.core.queues.fairshare.steady_shares``: F_parent · W_Q /
  Σ_{siblings} W where no min or max bounds it; F_root = 1), and the time from
  its first demand (first submit in it) to its min share (usage >= min in a resource its
  min names), for queues with a min.
* ``queue_history`` / ``run_queue_history`` — each queue's share of the cluster and what
  it is owed (``rayrm.rm.core.queues.owed``) on a time grid, from each leaf's running
  attempts (use) and its jobs' tasks submitted and not yet finished (demand): the UI's
  and ``rayrm report``'s queue chart.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import DEFAULT_QUEUE, queue_path
from rayrm.rm.core.queues.fairshare import steady_shares
from rayrm.rm.core.queues.owed import Usage, tree_views
from rayrm.rm.core.queues.tree import QueueSpec, QueueTree, parse_queues, tree_bounds
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


def _in(path: str, leaf: str) -> bool:
    return leaf == path or leaf.startswith(path + ".")


def _leaves(jobs: pd.DataFrame) -> pd.Series:
    """app -> its leaf's path below root."""
    q = jobs["queue"].astype(str)
    return pd.Series(np.where(q.str.startswith("root."), q.str[5:], q), index=jobs["app"].to_numpy())


def check_queue_caps(run: RunDir, tasks, result) -> None:
    """Count and note queue_over_max and queue_over_max_apps on ``result`` (a CheckResult),
    from ``tasks`` (the run's, as ``rayrm check`` read them)."""
    tree = run_tree(run)
    if tree is None:
        return
    result.queues_checked = len(tree.queues()) - 1
    jobs, dims = run.jobs, run.dims
    leaf_of = _leaves(jobs)
    bounds = tree_bounds(tree, _total(run))
    demand = jobs.set_index("app").reindex(columns=[f"demand.{d}" for d in dims], fill_value=0.0)
    started = tasks[tasks["start"].notna() & tasks["app"].isin(leaf_of.index)]
    app_leaf = leaf_of.reindex(started["app"]).to_numpy()
    first = started.groupby("app", observed=True)["start"].min()
    finish = jobs.set_index("app")["finish"].reindex(first.index)
    last = started.assign(f=started["finish"].fillna(np.inf)).groupby("app", observed=True)["f"].max()
    until = finish.fillna(last).fillna(np.inf)
    for q in tree.queues():
        if not q.path:
            continue
        mine = np.array([_in(q.path, str(leaf)) for leaf in app_leaf], dtype=bool)
        hi = bounds[q.path].hi
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
    fair = steady_shares(tree, _total(run))
    bounds = tree_bounds(tree, _total(run))
    rows = []
    for q in tree.queues():
        if not q.path:
            continue
        apps = [a for a in leaf_of.index if _in(q.path, str(leaf_of[a]))]
        avg = float(work.reindex(apps).fillna(0.0).sum()) if apps else 0.0
        rows.append({"queue": q.full_name, "weight": q.weight, "fair_share": fair[q.path], "avg_share": avg,
                     "share_ratio": avg / fair[q.path] if fair[q.path] else math.nan,
                     "min_delay": _min_delay(run, apps, bounds[q.path].lo)})
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


# ----- each queue's share against what it is owed, over time ------------------------

def queue_history(tree, dims, tasks, jobs, d, totals, grid, policy) -> dict:
    """queue -> [(t, share, owed)] on the grid, from each leaf's use (attempts running at t)
    and demand (its jobs' tasks submitted by t less those finished by t)."""
    k = len(dims)
    job_leaf = np.array([queue_path(str(q)) for q in jobs["queue"]]) if "queue" in jobs \
        else np.full(len(jobs), DEFAULT_QUEUE)
    leaf_of = dict(zip(jobs["app"].astype(str), job_leaf))
    leaf = np.array([leaf_of.get(str(a), DEFAULT_QUEUE) for a in tasks["app"]])
    start = tasks["start"].to_numpy(float)
    finish = np.where(np.isnan(tasks["finish"].to_numpy(float)), np.inf, tasks["finish"].to_numpy(float))
    ran, done = ~np.isnan(start), (tasks["status"] == "finished").to_numpy()
    job_submit = jobs["submit"].to_numpy(float)
    job_size = jobs["num_tasks"].to_numpy(float)[:, None] * np.array(
        [[float(j[f"demand.{x}"]) for x in dims] for _, j in jobs.iterrows()]).reshape(-1, k)
    never = np.full(len(jobs), np.inf)
    series: dict[str, tuple] = {}
    for name in np.unique(np.concatenate([job_leaf, leaf])):
        m, jm = leaf == name, job_leaf == name
        r, f = m & ran, m & done
        used = np.column_stack([active(start[r], finish[r], grid, d[r, x]) for x in range(k)])
        wanted = np.column_stack([active(job_submit[jm], never[jm], grid, job_size[jm, x])
                                  - active(finish[f], np.full(f.sum(), np.inf), grid, d[f, x]) for x in range(k)])
        series[str(name)] = (used, np.maximum(wanted, used))
    out: dict[str, list] = {}
    for g, t in enumerate(np.round(grid, 3).tolist()):
        leaves = {n: Usage(u[g].tolist(), w[g].tolist()) for n, (u, w) in series.items()}
        for q in tree_views(tree, tuple(dims), tuple(totals), leaves, policy)[1:]:
            points = out.setdefault(q.name, [])
            if not points or points[-1][1:] != (q.share, q.owed):
                points.append((t, q.share, q.owed))
    return out


def active(begin: np.ndarray, end: np.ndarray, grid: np.ndarray, weight) -> np.ndarray:
    """Σ weight over the intervals [begin, end) holding each grid point: the weights of the
    intervals begun by t minus those ended by t (two sorted cumulative sums)."""
    w = np.ones(len(begin)) if weight is None else np.asarray(weight, dtype=float)
    ob, oe = np.argsort(begin, kind="stable"), np.argsort(end, kind="stable")
    cb = np.concatenate([[0.0], np.cumsum(w[ob])])
    ce = np.concatenate([[0.0], np.cumsum(w[oe])])
    return cb[np.searchsorted(begin[ob], grid, side="right")] - ce[np.searchsorted(end[oe], grid, side="right")]


def run_queue_history(rd: RunDir, points: int = 400) -> dict:
    """A run directory's queue -> [(t, share, owed)] on ``points`` times from 0 to its last
    event ({} without a queue tree)."""
    dims = tuple(rd.dims)
    tasks, jobs = rd.tasks, rd.jobs
    totals = tuple(float(rd.nodes[x].astype(float).sum()) for x in dims)
    tree = run_tree(rd)
    if tree is None:
        return {}
    end = float(np.nanmax(np.concatenate([tasks[["start", "finish"]].to_numpy(float).ravel(),
                                          jobs["submit"].to_numpy(float), [0.0]])))
    grid = np.linspace(0.0, end, points) if end > 0 else np.zeros(1)
    demand = {str(j["app"]): [float(j[f"demand.{x}"]) for x in dims] for _, j in jobs.iterrows()}
    d = np.array([demand.get(str(a), [0.0] * len(dims)) for a in tasks["app"]], dtype=float).reshape(-1, len(dims))
    return queue_history(tree, dims, tasks, jobs, d, totals, grid, str(rd.summary.get("policy") or ""))


def preemptions(run: RunDir) -> pd.DataFrame:
    """Per queue a run's preemption took containers from, or starved: ``preempted``
    (containers killed at their deadline: tasks.csv attempts ``preempted`` of its apps),
    ``lost_task_seconds`` (Σ finish − start over those attempts), ``starved`` (episodes,
    summary.json ``preemption``) and ``restore_s`` (their mean time from starvation to share
    restored, over the restored ones).  Empty for a run without preemption."""
    cols = ["queue", "preempted", "lost_task_seconds", "starved", "restore_s"]
    summary = run.summary.get("preemption")
    if summary is None:
        return pd.DataFrame(columns=cols)
    tasks = run.tasks
    pre = tasks[tasks["status"] == "preempted"]
    leaf = _leaves(run.jobs)
    rows: dict[str, dict] = {}
    for app, g in pre.groupby("app"):
        q = f"root.{leaf[str(app)]}"
        r = rows.setdefault(q, {"preempted": 0, "lost_task_seconds": 0.0})
        r["preempted"] += len(g)
        r["lost_task_seconds"] += float((g["finish"] - g["start"]).sum())
    for q, info in summary.get("queues", {}).items():
        episodes = info.get("starved", [])
        if episodes:
            r = rows.setdefault(q, {"preempted": 0, "lost_task_seconds": 0.0})
            done = [e["seconds"] for e in episodes if e["seconds"] is not None]
            r["starved"], r["restore_s"] = len(episodes), (sum(done) / len(done) if done else math.nan)
    return pd.DataFrame([{"queue": q, "preempted": r["preempted"], "lost_task_seconds": r["lost_task_seconds"],
                          "starved": r.get("starved", 0), "restore_s": r.get("restore_s", math.nan)}
                         for q, r in sorted(rows.items())], columns=cols)


def preemption_times(run: RunDir) -> dict[str, np.ndarray]:
    """Per queue, the sorted times its containers were preempted (killed at the deadline)."""
    tasks = run.tasks
    pre = tasks[tasks["status"] == "preempted"]
    if pre.empty:
        return {}
    leaf = _leaves(run.jobs)
    queue = pre["app"].astype(str).map(lambda a: f"root.{leaf[a]}")
    return {q: np.sort(g["finish"].to_numpy(dtype=float)) for q, g in pre.groupby(queue)}
