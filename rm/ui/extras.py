"""rayrm's own views under ``/ws/v1/rayrm``: what YARN's API has no place for.

* ``overview`` — the run, its clock, totals, counts, pace and faults (the page's header);
* ``history`` — cluster use per dimension, running and pending containers and the RM's
  lag over trace time, and with a queue tree each queue's share and what it is owed
  (``rm/core/queues/owed.py``) as ``[time, share, owed]`` steps;
* ``shares`` — each app's share over time in the policy's own terms (``apps=a,b`` or the
  ``top`` apps by peak share);
* ``apps`` and ``nodes`` — compact rows for the page's tables (paged);
* ``pending`` — the apps with tasks waiting, and why they wait.
"""

from __future__ import annotations

from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.ui.view import YARN_APP_STATE, AppView, ClusterView
from rayrm.rm.ui.yarn import ApiError, live_nodes, whole_number

#: most apps in one shares response, and most rows in one apps / pending response
MAX_SERIES, MAX_ROWS = 40, 500


def _int(params: dict, key: str, default: int, most: int) -> int:
    value = whole_number(params, key)
    return default if value is None else min(value, most)


def overview(view: ClusterView, error: str = "") -> dict:
    k = len(view.dims)
    alive = live_nodes(view)
    total = [sum(n.capacity[i] for n in alive) for i in range(k)]
    used = [sum(n.used[i] for n in alive) for i in range(k)]
    states: dict[str, int] = {}
    for a in view.apps:
        states[a.status] = states.get(a.status, 0) + 1
    nodes: dict[str, int] = {}
    for n in view.nodes:
        nodes[n.state] = nodes.get(n.state, 0) + 1
    return {"name": view.name, "policy": view.policy, "mode": view.mode, "state": view.state,
            "version": view.version, "traceTime": round(view.time, 3), "timeScale": view.time_scale,
            "epochMs": view.epoch_ms(view.time), "dims": list(view.dims),
            "shareKind": view.share_kind, "total": total, "used": used,
            "running": sum(a.running for a in view.apps), "pending": sum(a.pending for a in view.apps),
            "finished": sum(a.finished for a in view.apps), "tasks": sum(a.num_tasks for a in view.apps),
            "allocations": view.allocations, "apps": states, "nodes": nodes, "pace": view.pace,
            "faults": [{"time": f.time, "kind": f.kind, "target": f.target, "text": f.text} for f in view.faults],
            "error": error}


def history(view: ClusterView) -> dict:
    h = view.history
    return {"version": view.version, "dims": list(view.dims), "times": list(h.times),
            "used": [list(u) for u in h.used], "running": list(h.running), "pending": list(h.pending),
            "lag": list(h.lag), "queues": {q: [list(p) for p in pts] for q, pts in h.queues.items()}}


def shares(view: ClusterView, params: dict) -> dict:
    series = view.history.shares
    if params.get("apps"):
        wanted = [a for a in params["apps"].split(",") if a][:MAX_SERIES]
        missing = [a for a in wanted if view.app(a) is None]
        if missing:
            raise ApiError(404, f"app with id: {missing[0]} not found")
    else:
        top = _int(params, "top", 10, MAX_SERIES)
        wanted = sorted(series, key=lambda a: (-max((v for _, v in series[a]), default=0.0), a))[:top]
    return {"version": view.version, "shareKind": view.share_kind, "time": round(view.time, 3),
            "apps": {a: [list(p) for p in series.get(a, ())] for a in wanted}}


def _order(a: AppView, view: ClusterView):
    active = a.running > 0 or a.pending > 0          # an interrupted run's unfinished apps too
    return (not active, -view.share_of(a) if active else 0.0, a.submit, a.app)


def apps(view: ClusterView, params: dict) -> dict:
    """The apps, those with tasks running or waiting first by share, then the rest in
    submit order (paged)."""
    offset, limit = _int(params, "offset", 0, 10 ** 9), _int(params, "limit", 50, MAX_ROWS)
    rows = sorted(view.apps, key=lambda a: _order(a, view))
    page = rows[offset:offset + limit]
    return {"version": view.version, "total": len(rows), "offset": offset,
            "apps": [{"id": a.app, "status": a.status, "state": YARN_APP_STATE[a.status][0], "tasks": a.num_tasks,
                      "running": a.running, "pending": a.pending, "finished": a.finished,
                      "share": round(view.share_of(a), 4), "attempts": a.attempts, "submit": a.submit,
                      "finish": a.finish, "reason": a.reason} for a in page]}


def nodes(view: ClusterView, params: dict) -> dict:
    """Every node's state and use per dimension as a fraction of its capacity (paged)."""
    offset, limit = _int(params, "offset", 0, 10 ** 9), _int(params, "limit", 5000, 5000)
    page = view.nodes[offset:offset + limit]
    return {"version": view.version, "total": len(view.nodes), "dims": list(view.dims),
            "nodes": [{"id": n.name, "state": n.state, "containers": n.containers,
                       "used": [round(u / c, 4) if c else 0.0 for u, c in zip(n.used, n.capacity)],
                       "capacity": list(n.capacity), "detail": n.detail} for n in page]}


def pending(view: ClusterView, params: dict) -> dict:
    """The apps with tasks waiting, lowest share first (the order the policy serves them),
    each with why it waits."""
    limit = _int(params, "limit", 20, MAX_ROWS)
    waiting = sorted((a for a in view.apps if a.pending > 0), key=lambda a: (view.share_of(a), a.submit, a.app))
    out = [{"id": a.app, "pending": a.pending, "share": round(view.share_of(a), 4), "rank": i + 1,
            "reason": pending_reason(view, a, i + 1, len(waiting))} for i, a in enumerate(waiting[:limit])]
    return {"version": view.version, "total": len(waiting), "apps": out}


def pending_reason(view: ClusterView, a: AppView, rank: int, waiting: int) -> str:
    """Why ``a`` still has tasks waiting: no live node it may use can hold a task; or one
    has room now (it is placed at that node's next heartbeat, YARN's NODE_UPDATE); or
    every node it may use is full, and freed resources go to the lowest share first."""
    try:
        constraint = Constraint.parse(a.constraint) if a.constraint else None
    except InputError:
        constraint = None
    usable = [n for n in live_nodes(view)
              if (constraint is None or constraint.matches(n.name, n.attributes))
              and all(d <= c + 1e-9 for d, c in zip(a.demand, n.capacity))]
    if not usable:
        return "no live node it may use can hold one of its tasks"
    room = [n for n in usable if all(d <= c - u + 1e-9 for d, c, u in zip(a.demand, n.capacity, n.used))]
    if room:
        return f"{len(room)} of the {len(usable)} nodes it may use have room: placed at their next heartbeat"
    return (f"every node it may use ({len(usable)}) is full; it is {rank} of {waiting} waiting apps by "
            f"{view.share_kind.replace('_', ' ')}, served lowest first as containers finish")
