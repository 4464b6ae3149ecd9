"""The live source: the driver polls the RM's compact snapshot and keeps the view.

A daemon thread in the driver calls ``fetch()`` (the RM actor's ``ui_snapshot``) once
per ``period`` — at least one heartbeat interval, so the RM answers the UI at most once
per interval whatever the number of HTTP clients — and turns the snapshot into an
immutable ``ClusterView``, which request threads read without a lock (one reference
swap).  History for the charts is one sample per poll, decimated by two whenever it
reaches ``MAX_SAMPLES`` (memory and responses stay bounded on a long replay); with a
queue tree, each queue's share and what it is owed (``rm/core/queues/owed.py``) too.
"""

from __future__ import annotations

import threading
import time as _time

from rayrm.rm.core.queues.owed import queue_views
from rayrm.rm.ui.snapshot import APP_FIELDS
from rayrm.rm.ui.view import AppView, ClusterView, Fault, History, NodeView, share_kind

#: history samples kept (then every other one is dropped)
MAX_SAMPLES = 1200
#: shortest poll period, wall seconds (a heartbeat interval at a small time scale is shorter;
#: the page redraws once a second)
MIN_PERIOD = 1.0


class _Series:
    """Append-only sample lists, halved when full."""

    def __init__(self):
        self.times, self.used, self.running, self.pending, self.lag = [], [], [], [], []
        self.shares: dict[str, list] = {}
        self.queues: dict[str, list] = {}

    def add(self, t, used, running, pending, lag) -> None:
        for col, v in ((self.times, t), (self.used, used), (self.running, running), (self.pending, pending),
                       (self.lag, lag)):
            col.append(v)
        if len(self.times) >= MAX_SAMPLES:
            for name in ("times", "used", "running", "pending", "lag"):
                setattr(self, name, getattr(self, name)[::2])

    def share(self, app: str, t: float, value: float) -> None:
        """An app's share at ``t``, kept only when it changed (a step series)."""
        points = self.shares.setdefault(app, [])
        if not points or points[-1][1] != value:
            points.append((t, value))
            if len(points) >= MAX_SAMPLES:
                self.shares[app] = points[::2] + ([points[-1]] if len(points) % 2 == 0 else [])

    def queue(self, name: str, t: float, share: float, owed: float) -> None:
        """A queue's share and what it is owed at ``t``, kept only when either changed."""
        points = self.queues.setdefault(name, [])
        if not points or points[-1][1:] != (share, owed):
            points.append((t, share, owed))
            if len(points) >= MAX_SAMPLES:
                self.queues[name] = points[::2] + ([points[-1]] if len(points) % 2 == 0 else [])

    def frozen(self) -> History:
        """The series as of now.  Each app's point list is shared, not copied (a poll only
        appends to it, or replaces it when halving): copying every app's points at every poll
        would cost the driver more than the rest of the poll."""
        return History(tuple(self.times), tuple(self.used), tuple(self.running), tuple(self.pending),
                       tuple(self.lag), dict(self.shares), dict(self.queues))


class LiveSource:
    """The view of a running replay (module docstring).  ``fetch()`` returns the RM's
    snapshot dict (``rayrm.rm.ui.snapshot.rm_snapshot``) or None when the RM is not up."""

    def __init__(self, cfg, policy: str, time_scale: float, fetch, faults=(), period: float | None = None):
        self.dims = tuple(cfg.dims)
        self.policy, self.time_scale = policy, float(time_scale)
        self.interval = cfg.run.heartbeat_interval
        self.period = max(period if period is not None else self.interval * self.time_scale, MIN_PERIOD)
        self._fetch = fetch
        joining = [e.spec for e in cfg.node_events if e.spec is not None]
        self._specs = {n.name: n for n in list(cfg.nodes) + joining}
        self._leaves = {e.node: e.time for e in cfg.node_events if e.spec is None}
        self._jobs = {j.app.app_id: j.app for j in cfg.jobs}
        self._faults = tuple(faults)
        self._apps: dict[str, AppView] = {}            # ended apps cross once and stay as they were
        self._attempts: dict[str, list] = {}           # app -> trace times its attempts 2, 3, ... were seen
        self._series = _Series()
        self._kind = share_kind(policy)
        self._tree = cfg.queues if not cfg.queues.flat else None
        self.name = cfg.name
        self.error = ""
        self._view = ClusterView(cfg.name, policy, "ray", self.dims, 0.0, _time.time(), self.time_scale,
                                 self.interval, "starting", (), (), 0, share_kind=self._kind)
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rayrm-ui-poll", daemon=True)

    def start(self) -> "LiveSource":
        self._thread.start()
        return self

    def view(self) -> ClusterView:
        return self._view

    def wait(self, after: int, timeout: float) -> ClusterView:
        """The view once its version is past ``after``, or after ``timeout`` seconds."""
        with self._changed:
            self._changed.wait_for(lambda: self._view.version > after, timeout)
        return self._view

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            t0 = _time.monotonic()
            try:
                snap = self._fetch()
                if snap is not None and snap.get("start_wall") is not None:
                    self.update(snap)
                self.error = ""
            except Exception as e:  # noqa: BLE001 - the RM is restarting or gone; the next poll retries
                self.error = f"{type(e).__name__}: {e}"
            self._stop.wait(max(0.0, self.period - (_time.monotonic() - t0)))

    # ----- a snapshot becomes a view -------------------------------------------------

    def update(self, snap: dict) -> ClusterView:
        """Merge one RM snapshot into the view (also called directly by tests)."""
        t = float(snap["time"])
        nodes = self._nodes(snap, t)
        preemption = snap.get("preemption")
        counts = preemption or {}
        fresh = [self._app(row, t, counts.get("apps", {}), counts.get("warned_apps", {}))
                 for row in snap["apps"]]     # the apps running or just ended
        for a in fresh:
            self._apps[a.app] = a
        apps = tuple(self._apps.values())
        alive = [n for n in nodes if n.state == "RUNNING"]
        totals = [sum(n.capacity[k] for n in alive) for k in range(len(self.dims))]
        used = tuple(round(sum(n.used[k] for n in alive) / totals[k], 6) if totals[k] else 0.0
                     for k in range(len(self.dims)))
        running = sum(a.running for a in apps)
        self._series.add(round(t, 3), used, running, sum(a.pending for a in apps), round(snap["lag"], 4))
        for a in fresh:
            self._series.share(a.app, round(t, 3), round(a.share if a.share is not None else getattr(a, self._kind), 6))
        if self._tree is not None:
            for q in queue_views(self._tree, self.dims, tuple(totals), apps, self.policy)[1:]:
                self._series.queue(q.name, round(t, 3), q.share, q.owed)
        faults = tuple(Fault(f.time, f.kind, f.target, f.text) for f in self._faults if f.time <= t)
        self._view = ClusterView(
            self.name, self.policy, "ray", self.dims, t, float(snap["start_wall"]), self.time_scale,
            self.interval, "live", nodes, apps, int(snap["allocations"]), faults, self._pace(snap),
            self._series.frozen(), self._view.version + 1, self._kind, self._tree, preemption is not None)
        with self._changed:
            self._changed.notify_all()
        return self._view

    def _nodes(self, snap: dict, t: float) -> tuple[NodeView, ...]:
        seen = {}
        start = float(snap["start_wall"])
        for name, alive, free, containers, last_seen in snap["nodes"]:
            spec = self._specs.get(name)
            cap = spec.capacity.vector(self.dims) if spec is not None else tuple(free)
            if alive:
                state, used = "RUNNING", tuple(round(c - f, 9) for c, f in zip(cap, free))
            else:
                state = "NEW" if not last_seen else \
                    "DECOMMISSIONED" if self._leaves.get(name, float("inf")) <= t else "LOST"
                used = tuple(0.0 for _ in cap)
            last = max(0.0, (last_seen - start) / self.time_scale) if last_seen else 0.0
            seen[name] = NodeView(name, state, cap, used, containers if alive else 0, round(last, 3),
                                  dict(spec.attributes) if spec is not None else {})
        for name, spec in self._specs.items():
            if name not in seen:
                cap = spec.capacity.vector(self.dims)
                seen[name] = NodeView(name, "NEW", cap, tuple(0.0 for _ in cap), 0, 0.0, dict(spec.attributes))
        return tuple(seen.values())

    def _app(self, row: tuple, t: float, preempted: dict, warned: dict) -> AppView:
        r = dict(zip(APP_FIELDS, row))
        seen = self._attempts.setdefault(r["app"], [])
        while 1 + len(seen) < r["attempts"]:         # a new attempt since the last poll
            seen.append(round(t, 3))
        spec = self._jobs.get(r["app"])
        status = "waiting" if r["status"] == "running" and r["first_start"] is None else r["status"]
        demand = spec.demand.vector(self.dims) if spec is not None else tuple(0.0 for _ in self.dims)
        return AppView(r["app"], status, spec.num_tasks if spec is not None else 0, r["running"], r["pending"],
                       r["finished"], demand, spec.weight if spec is not None else 1.0, r["submit"],
                       r["first_start"], r["finish"], max(1, r["attempts"]), r["task_share"], r["dominant_share"],
                       str(spec.constraint) if spec is not None else "", r["reason"] or "", r["eligible"],
                       tuple(seen), spec.queue if spec is not None else "default",
                       spec.user if spec is not None else "default", r.get("share"),
                       preempted=preempted.get(r["app"], 0), warned=warned.get(r["app"], 0))

    def _pace(self, snap: dict) -> dict:
        """The pace so far, by the replay's rule (summary.json's ``kept_pace``): the share of
        the RM's monitor ticks more than one heartbeat interval behind, at most 5%; and its
        lag now (the worst sample of the last second)."""
        interval_wall = self.interval * self.time_scale
        ticks = int(snap.get("ticks", 0))
        behind = int(snap.get("ticks_behind", 0)) / ticks if ticks else 0.0
        return {"lag_wall_s": round(float(snap["lag"]), 4), "behind_now": bool(snap["behind"]),
                "heartbeat_interval_wall_s": interval_wall, "behind_fraction": round(behind, 4),
                "ticks": ticks, "kept_pace": behind <= 0.05, "rm_restarts": int(snap.get("epoch", 0)),
                "lag_trace_s": round(float(snap["lag"]) / self.time_scale, 3)}
