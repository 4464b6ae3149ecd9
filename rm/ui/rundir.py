"""The run-directory source: the view of a finished, interrupted or simulated run.

The view is the run's last moment (the latest time any table records); its history is
computed from the tables on a grid of at most ``GRID`` points:

* use of dimension r at t = Σ d_app,r over the attempts with start <= t < finish
  (finish missing: still running at the end), over the total capacity;
* running(t) the same count; pending(t) = attempts with submit <= t < start;
* each app's share: its rows of the shares table (the policy's own share), thinned
  to at most ``GRID`` points per app;
* with a queue tree (queues.json), each queue's share and what it is owed at each grid
  point (``rayrm.rm.runs.queues.queue_history``).

Wall-clock fields: a replay's t = 0 is summary.json's time minus its ``wall_seconds``;
a simulation has no wall clock, so its trace seconds are laid out from that same
instant at one wall second per trace second.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import queue_path
from rayrm.rm.core.shares import LOGGED
from rayrm.rm.runs.queues import active, queue_history, run_tree
from rayrm.rm.runs.reader import RunDir
from rayrm.rm.ui.view import AppView, ClusterView, Fault, History, NodeView, share_kind

#: most points of a chart series
GRID = 400


class RunDirSource:
    """``view()`` of one run directory, read once (the directory of an ended run does not change)."""

    def __init__(self, path: str | Path):
        rd = RunDir(Path(path))
        for needed in ("nodes.csv", "jobs.csv"):
            if not (rd.path / needed).exists():
                raise InputError(f"is not a run directory (no {needed}: the run was killed before writing it)",
                                 file=str(rd.path))
        self._view = _build(rd)
        self.error = ""

    def view(self) -> ClusterView:
        return self._view

    def wait(self, after: int, timeout: float) -> ClusterView:
        """The view (it never changes: there is nothing to wait for)."""
        return self._view

    def close(self) -> None:
        pass


def _build(rd: RunDir) -> ClusterView:
    summary = rd.summary
    dims = rd.dims
    tasks, jobs, events = rd.tasks, rd.jobs, rd.events
    end = float(np.nanmax(np.concatenate([tasks[["start", "finish"]].to_numpy(float).ravel(),
                                          events["time"].to_numpy(float), [0.0]])))
    demand = {row["app"]: tuple(float(row[f"demand.{d}"]) for d in dims) for _, row in jobs.iterrows()}
    nodes = _nodes(rd, dims, tasks, events, demand, end)
    apps = _apps(rd, dims, tasks, jobs, events, demand)
    mode = str(summary.get("mode") or "sim")
    scale = float(summary.get("time_scale") or 1.0) if mode == "ray" else 1.0
    wall = float(summary.get("wall_seconds") or end * scale)
    stamp = rd.path / "summary.json"
    start_epoch = (stamp if stamp.exists() else rd.path / "jobs.csv").stat().st_mtime - wall
    state = "interrupted" if summary.get("interrupted") else "finished" if summary else "partial"
    policy = str(summary.get("policy") or rd.path.name)
    tree = run_tree(rd)
    faults = tuple(Fault(float(r.time), "fault", str(r.node or r.app or ""), str(r.detail))
                   for r in events[events["kind"] == "fault"].itertuples())
    return ClusterView(str(summary.get("name") or rd.path.name), policy, mode, dims, end, start_epoch, scale,
                       float(summary.get("heartbeat_interval") or 1.0), state, nodes, apps, len(tasks), faults,
                       dict(summary.get("pace") or {}),
                       _history(rd, dims, tasks, jobs, demand, end, nodes, policy, tree), 1, logged_kind(policy),
                       tree, "preemption" in summary)


def _nodes(rd: RunDir, dims, tasks, events, demand, end) -> tuple[NodeView, ...]:
    """Each node's last join or loss decides its state; the attempts still running at the
    end (an interrupted run) are its use."""
    attrs = rd.node_attributes()
    changes = events[events["kind"].isin(["node_join", "node_lost"])]
    last = {r.node: (r.kind, float(r.time), str(r.detail)) for r in changes.itertuples()}
    running = tasks[tasks["status"] == "running"]
    used: dict[str, np.ndarray] = {}
    count: dict[str, int] = {}
    for r in running.itertuples():
        used[r.node] = used.get(r.node, np.zeros(len(dims))) + np.array(demand.get(r.app, (0.0,) * len(dims)))
        count[r.node] = count.get(r.node, 0) + 1
    caps = rd.nodes[list(dims)].to_numpy(float)
    ray_nodes = rd.nodes["ray_node"].fillna("").astype(str).tolist() if "ray_node" in rd.nodes else None
    out = []
    for i, name in enumerate(rd.nodes["node"].astype(str)):
        cap = tuple(float(x) for x in caps[i])
        kind, t, detail = last.get(name, ("", 0.0, ""))
        state = "RUNNING" if kind == "node_join" else "NEW" if not kind else \
            "DECOMMISSIONED" if detail == "" or detail.startswith("left") else "LOST"
        u = tuple(float(x) for x in used.get(name, np.zeros(len(dims))))
        out.append(NodeView(name, state, cap, u, count.get(name, 0), t, attrs.get(name, {}),
                            ray_nodes[i] if ray_nodes else "", detail))
    return tuple(out)


def _apps(rd: RunDir, dims, tasks, jobs, events, demand) -> tuple[AppView, ...]:
    by_status = tasks.groupby(["app", "status"]).size()
    launched = events[events["kind"] == "am_launch"]
    launches = {str(app): tuple(sorted(rows["time"].astype(float))) for app, rows in launched.groupby("app")}
    last_share = rd.shares.groupby("app").last() if len(rd.shares) else None
    warned = warned_now(events)
    out = []
    for _, j in jobs.iterrows():
        app = str(j["app"])
        finished = int(by_status.get((app, "finished"), 0))
        running = int(by_status.get((app, "running"), 0))
        status = str(j["status"])
        first = None if j["first_start"] != j["first_start"] else float(j["first_start"])
        if status == "running" and first is None:
            status = "waiting"
        pending = max(0, int(j["num_tasks"]) - finished - running) if status in ("running", "waiting", "unfinished") else 0
        ts = ds = 0.0
        if last_share is not None and app in last_share.index and running:
            ts, ds = float(last_share.at[app, "task_share"]), float(last_share.at[app, "dominant_share"])
        finish = None if j["finish"] != j["finish"] else float(j["finish"])
        out.append(AppView(app, status, int(j["num_tasks"]), running, pending, finished, demand[app],
                           float(j["weight"]), float(j["submit"]), first, finish,
                           1 + len(launches.get(app, ())), ts, ds, str(j["constraint"]), str(j["reason"] or ""),
                           attempt_starts=launches.get(app, ()), queue=queue_path(str(j.get("queue", "default"))),
                           user=str(j.get("user", "default")),
                           preempted=int(by_status.get((app, "preempted"), 0)), warned=warned.get(app, 0)))
    return tuple(out)


def warned_now(events) -> dict[str, int]:
    """Per app, its containers warned of a preemption (``preempt_warned``) that no later event
    ended (finished, preempted, lost, killed): those still running at the run's last moment."""
    kinds = events["kind"]
    warned = events[kinds == "preempt_warned"]
    if warned.empty:
        return {}
    container = pd.to_numeric(events["container"].astype(str), errors="coerce")
    ended = set(container[~kinds.isin(("start", "preempt_warned"))].dropna())
    alive = warned[~container[warned.index].isin(ended)]
    return {str(app): len(rows) for app, rows in alive.groupby("app")}


def _history(rd: RunDir, dims, tasks, jobs, demand, end, nodes, policy, tree) -> History:
    grid = np.linspace(0.0, end, GRID) if end > 0 else np.zeros(1)
    start = tasks["start"].to_numpy(float)
    finish = np.where(np.isnan(tasks["finish"].to_numpy(float)), np.inf, tasks["finish"].to_numpy(float))
    submit = tasks["submit"].to_numpy(float)
    ran = ~np.isnan(start)
    d = np.array([demand.get(a, (0.0,) * len(dims)) for a in tasks["app"]], dtype=float).reshape(-1, len(dims))
    totals = np.array([sum(n.capacity[k] for n in nodes) for k in range(len(dims))], dtype=float)
    used = np.column_stack([active(start[ran], finish[ran], grid, d[ran, k]) for k in range(len(dims))]) \
        if len(dims) else np.zeros((len(grid), 0))
    frac = used / np.where(totals > 0, totals, 1.0)
    running = active(start[ran], finish[ran], grid, None)
    pending = active(submit, np.where(ran, start, np.inf), grid, None)
    kind = logged_kind(policy)
    shares = {}
    if len(rd.shares):
        for app, rows in rd.shares.groupby("app", sort=False):
            t, v = rows["time"].to_numpy(float), rows[kind].to_numpy(float)
            if len(t) > GRID:
                keep = np.unique(np.linspace(0, len(t) - 1, GRID).astype(int))
                t, v = t[keep], v[keep]
            shares[str(app)] = tuple(zip(np.round(t, 3).tolist(), np.round(v, 6).tolist()))
    queues = queue_history(tree, dims, tasks, jobs, d, totals, grid, policy) if tree is not None else {}
    return History(tuple(np.round(grid, 3).tolist()), tuple(map(tuple, np.round(frac, 6).tolist())),
                   tuple(int(x) for x in running), tuple(int(x) for x in pending), (), shares, queues)



def logged_kind(policy: str) -> str:
    """The policy's kind of share where the run log has its column (``shares.LOGGED``),
    else the task share: a run directory records those four shares only."""
    kind = share_kind(policy)
    return kind if kind in {k.name for k in LOGGED} else "task_share"
