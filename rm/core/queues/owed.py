"""Each queue's share of the cluster against what it is owed: for the UI, YARN's scheduler view and reports.

``queue_views(tree, dims, total, apps)`` returns one :class:`QueueView` per queue,
parents before children.  Per queue c (its subtree's apps i):

* used U_c = Σ_i n_i d_i (running tasks times demand), demand D_c = U_c + Σ_i p_i d_i
  (p_i pending tasks);
* share s_c = max_r U_cr / T_r, the fraction of the cluster (total T) it holds in its
  dominant resource — the scalar every policy can be read in, as YARN's fair share is
  resources;
* owed f_c: the parent's owed f_P (root: 1) divided among the children with demand by
  weighted water-filling, YARN's ComputeFairShares (Hadoop FairScheduler docs, "fair
  share"): f_c = clamp(ρ w_c, lo_c, hi_c) with ρ chosen so that Σ_c f_c = min(f_P, Σ_c hi_c),
  where hi_c = min(M_c, δ_c, Σ_{children x} hi_x) (a parent can use no more than its
  children can) and lo_c = min(m_c, hi_c); δ_c = max_r D_cr / T_r is its demand share,
  m_c = max_r min_cr / T_r over the resources its ``min`` names (0 if none) and
  M_c = min_r max_cr / T_r over the resources its ``max`` names (1 if none).  A queue
  without demand is owed 0;
* steady f̂_c: the same division among all children, without demand (YARN's steady fair
  share: what the queue would get were every queue busy).

Min and max come from ``rayrm.rm.core.queues.tree.resolve_bounds`` (percentages and a
Capacity Scheduler queue's capacity resolved against the cluster).  A run directory's
history of them is ``rayrm.rm.runs.queues.queue_history``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rayrm.rm.core.model import queue_path
from rayrm.rm.core.queues.tree import QueueSpec, QueueTree, resolve_bounds



@dataclass(frozen=True)
class QueueView:
    """One queue at one moment (module docstring); vectors in the view's ``dims`` order."""

    name: str                           # root.eng.batch
    parent: str                         # "" for root
    leaf: bool
    weight: float
    policy: str
    min: tuple[float, ...]              # absolute, 0 where unset
    max: tuple[float, ...]              # absolute, the cluster's total where unset
    max_apps: int | None
    capacity: float | None              # percent of the parent (Capacity Scheduler)
    max_capacity: float | None
    used: tuple[float, ...]
    demand: tuple[float, ...]
    running_apps: int
    pending_apps: int
    share: float                        # s_c
    owed: float                         # f_c
    steady: float                       # f̂_c
    user_limit_factor: float | None = None
    min_user_limit_percent: float | None = None


def queue_views(tree: QueueTree, dims: tuple[str, ...], total: tuple[float, ...], apps, policy: str = "",
                ) -> tuple[QueueView, ...]:
    """Every queue of ``tree`` with its use by ``apps`` (``AppView``s with ``queue``)."""
    k = len(dims)
    leaves: dict[str, Usage] = {}
    for a in apps:
        if not (a.running or a.pending):          # an interrupted run's unfinished apps count too
            continue
        u = leaves.setdefault(queue_path(a.queue), Usage([0.0] * k, [0.0] * k))
        for r in range(k):
            u.used[r] += a.running * a.demand[r]
            u.demand[r] += (a.running + a.pending) * a.demand[r]
        if a.running:
            u.running += 1
        else:
            u.pending += 1
    return tree_views(tree, dims, total, leaves, policy)


@dataclass
class Usage:
    """What one queue's apps hold and want: used and demand vectors, apps running and waiting."""

    used: list[float]
    demand: list[float]
    running: int = 0
    pending: int = 0


def tree_views(tree: QueueTree, dims: tuple[str, ...], total: tuple[float, ...], leaves: dict[str, "Usage"],
               policy: str = "") -> tuple[QueueView, ...]:
    """Every queue of ``tree`` given each leaf's :class:`Usage` (by path below root)."""
    k = len(dims)
    total_map = dict(zip(dims, total))
    used: dict[str, list[float]] = {}
    demand: dict[str, list[float]] = {}
    running: dict[str, int] = {}
    pending: dict[str, int] = {}
    for leaf, u in leaves.items():
        for p in _ancestors(leaf):
            su, sd = used.setdefault(p, [0.0] * k), demand.setdefault(p, [0.0] * k)
            for r in range(k):
                su[r] += u.used[r]
                sd[r] += u.demand[r]
            running[p] = running.get(p, 0) + u.running
            pending[p] = pending.get(p, 0) + u.pending
    bounds = _bounds(tree.root, total_map, 1.0, 1.0, {})

    def frac(vec) -> float:
        return float(max((v / t for v, t in zip(vec, total) if t > 0), default=0.0))

    wants = {path: frac(vec) for path, vec in demand.items()}
    caps: dict[str, float] = {}

    def cap(q: QueueSpec) -> float:
        """hi_c: what the queue can use, min(M_c, δ_c, Σ over its children of theirs)."""
        c = min(bounds[q.path][3], wants.get(q.path, 0.0))
        if q.children:
            c = min(c, sum(cap(x) for x in q.children))
        caps[q.path] = c
        return c

    cap(tree.root)
    out: list[QueueView] = []

    def visit(q: QueueSpec, parent: str, owed: float, steady: float, inherited: str) -> None:
        ordering = q.policy or inherited
        lo, hi, _, _ = bounds[q.path]
        u, d = tuple(used.get(q.path, [0.0] * k)), tuple(demand.get(q.path, [0.0] * k))
        out.append(QueueView(
            q.full_name, parent, q.is_leaf, q.weight, ordering,
            tuple(lo.get(x, 0.0) for x in dims), tuple(hi.get(x, t) for x, t in zip(dims, total)),
            q.max_apps, q.capacity, q.max_capacity, u, d, running.get(q.path, 0), pending.get(q.path, 0),
            round(frac(u), 6), round(float(owed), 6), round(float(steady), 6), q.user_limit_factor,
            q.min_user_limit_percent))
        kids = list(q.children)
        weights = [c.weight for c in kids]
        mins = [bounds[c.path][2] for c in kids]
        fair = water_fill(owed, weights, [min(m, caps[c.path]) for m, c in zip(mins, kids)],
                          [caps[c.path] for c in kids])
        still = water_fill(steady, weights, mins, [bounds[c.path][3] for c in kids])
        for c, f, s in zip(kids, fair, still):
            visit(c, q.full_name, f, s, ordering)

    visit(tree.root, "", 1.0, 1.0, policy)
    return tuple(out)


def _bounds(q: QueueSpec, total: dict, share: float, max_share: float, out: dict) -> dict:
    """path -> (min, max absolute per resource, m_c, M_c) for ``q``'s subtree, top down:
    a Capacity Scheduler queue's ``share`` of the cluster is its parent's times its capacity."""
    lo, hi = resolve_bounds(q, total, share, max_share) if q.path else ({}, {})
    m = max((v / total[x] for x, v in lo.items() if total.get(x)), default=0.0)
    big = min((v / total[x] for x, v in hi.items() if total.get(x)), default=1.0)
    out[q.path] = (lo, hi, m, big)
    for c in q.children:
        _bounds(c, total, share * c.capacity / 100 if c.capacity is not None else share,
                max_share * c.max_capacity / 100 if c.max_capacity is not None else max_share, out)
    return out


def _ancestors(path: str):
    """``eng.batch`` -> ``eng.batch``, ``eng``, ```` (root)."""
    yield path
    while path:
        path = path.rpartition(".")[0]
        yield path


def water_fill(amount: float, weights, lows, highs, rounds: int = 60) -> list[float]:
    """x_c = clamp(ρ w_c, lo_c, hi_c) with Σ x_c = min(amount, Σ hi_c), ρ by bisection
    (YARN's ComputeFairShares).  Where the lows alone exceed ``amount`` they are scaled
    down to it, as a cluster too small for every min share cannot give them all."""
    if not weights:
        return []
    target = min(amount, sum(highs))
    low_sum = sum(min(lo, hi) for lo, hi in zip(lows, highs))
    if low_sum >= target:
        scale = target / low_sum if low_sum > 0 else 0.0
        return [min(lo, hi) * scale for lo, hi in zip(lows, highs)]

    def filled(rho: float) -> float:
        return sum(min(max(rho * w, lo), hi) for w, lo, hi in zip(weights, lows, highs))

    top = 1.0
    while filled(top) < target and top < 1e12:
        top *= 2
    bottom = 0.0
    for _ in range(rounds):
        mid = (bottom + top) / 2
        if filled(mid) < target:
            bottom = mid
        else:
            top = mid
    return [min(max(top * w, lo), hi) for w, lo, hi in zip(weights, lows, highs)]
