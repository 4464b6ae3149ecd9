"""Each queue's share of the cluster against what it is owed: for the UI, YARN's scheduler view and reports.

``queue_views(tree, dims, total, apps)`` returns one :class:`QueueView` per queue,
parents before children.  Per queue c (its subtree's apps i):

* used U_c = Σ_i n_i d_i (running tasks times demand), demand D_c = U_c + Σ_i p_i d_i
  (p_i pending tasks);
* share s_c = max_r U_cr / T_r, the fraction of the cluster (total T) it holds in its
  dominant resource — the scalar every policy can be read in, as YARN's fair share is
  resources;
* owed f_c: the parent's owed f_P (root: 1) divided among the children with demand by
  weighted water-filling, YARN's ComputeFairShares (``rayrm.rm.core.queues.fairshare``):
  f_c = clamp(ρ w_c, lo_c, hi_c) with ρ chosen so that Σ_c f_c = min(f_P, Σ_c hi_c),
  where hi_c = min(M_c, δ_c, Σ_{children x} hi_x) (a parent can use no more than its
  children can) and lo_c = min(m_c, hi_c); δ_c = max_r D_cr / T_r is its demand share,
  m_c = max_r min_cr / T_r over the resources its ``min`` names (0 if none) and
  M_c = min_r max_cr / T_r over the resources its ``max`` names (1 if none).  A queue
  without demand is owed 0;
* steady f̂_c: the same division among all children, without demand (YARN's steady fair
  share: what the queue would get were every queue busy; ``fairshare.steady_shares``).

Min and max come from ``rayrm.rm.core.queues.tree.tree_bounds`` (percentages and a
Capacity Scheduler queue's capacity resolved against the cluster).  A run directory's
history of them is ``rayrm.rm.runs.queues.queue_history``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rayrm.rm.core.model import queue_path
from rayrm.rm.core.queues.fairshare import fair_shares, steady_shares
from rayrm.rm.core.queues.tree import QueueSpec, QueueTree, tree_bounds


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
    bounds = tree_bounds(tree, total_map)
    steady = steady_shares(tree, total_map)

    def frac(vec) -> float:
        return float(max((v / t for v, t in zip(vec, total) if t > 0), default=0.0))

    wants = {path: frac(vec) for path, vec in demand.items()}
    caps: dict[str, float] = {}

    def cap(q: QueueSpec) -> float:
        """hi_c: what the queue can use, min(M_c, δ_c, Σ over its children of theirs)."""
        c = min(bounds[q.path].big, wants.get(q.path, 0.0))
        if q.children:
            c = min(c, sum(cap(x) for x in q.children))
        caps[q.path] = c
        return c

    cap(tree.root)
    out: list[QueueView] = []

    def visit(q: QueueSpec, parent: str, owed: float, inherited: str) -> None:
        ordering = q.policy or inherited
        b = bounds[q.path]
        u, d = tuple(used.get(q.path, [0.0] * k)), tuple(demand.get(q.path, [0.0] * k))
        out.append(QueueView(
            q.full_name, parent, q.is_leaf, q.weight, ordering,
            tuple(b.lo.get(x, 0.0) for x in dims), tuple(b.hi.get(x, t) for x, t in zip(dims, total)),
            q.max_apps, q.capacity, q.max_capacity, u, d, running.get(q.path, 0), pending.get(q.path, 0),
            round(frac(u), 6), round(float(owed), 6), round(float(steady[q.path]), 6), q.user_limit_factor,
            q.min_user_limit_percent))
        kids = list(q.children)
        fair = fair_shares([c.weight for c in kids], [min(bounds[c.path].m, caps[c.path]) for c in kids],
                           [caps[c.path] for c in kids], owed)
        for c, f in zip(kids, fair):
            visit(c, q.full_name, f, ordering)

    visit(tree.root, "", 1.0, policy)
    return tuple(out)


def _ancestors(path: str):
    """``eng.batch`` -> ``eng.batch``, ``eng``, ```` (root)."""
    yield path
    while path:
        path = path.rpartition(".")[0]
        yield path
