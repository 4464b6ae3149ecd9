"""One evaluation's view of the queue tree for preemption's rules (``rayrm.rm.core.queues.preemption``).

Per queue q, with T_r the cluster's total of resource r and r over the resources the
scheduler compares queues on (``QueueTreeState.share_resources``):

* its usage U_q (the tree keeps it: ``track_usage``; root's is the sum of its children's)
  and its share u_q = max_r U_qr / T_r;
* its demand U_q + P_q, P_q the demand of its apps' pending tasks (the tree keeps it:
  ``track_pending``), and the demand share δ_q = max_r (U_qr + P_qr) / T_r;
* its instantaneous fair share F_q: root's 1 divided down the tree among the active
  children (δ_c > 0) by ``fairshare.fair_shares``, child c bounded by lo_c = min(m_c, hi_c)
  and hi_c = min(M_c, δ_c) (m, M: its min and max as fractions of the cluster), as YARN's
  ComputeFairShares over active queues.

Under the compiled core (``rayrm.rm.core.native``) u, δ and F come from
``_fairshare.TreeShape.view``, the same operations in the same order on C doubles; the
Python code below is the reference (tests/test_native.py runs preempting simulations under
both and compares their run directories byte for byte).
"""

from __future__ import annotations

import math
import operator
from functools import cached_property
from typing import Any

from rayrm.rm.core.native import compiled
from rayrm.rm.core.queues.fairshare import fair_shares

INF = math.inf

#: fair_shares' answers by their inputs: with every leaf backlogged they repeat (a pure function)
_FAIR_CACHE: dict[tuple, list[float]] = {}
#: id(tree) -> (tree, (cluster total, resources measured, core), {path: (m_q, M_q)}, {his: F by
#: full name}, the compiled shape or None, 1/T_r, the share function): what a tree's shares
#: depend on besides demand, and its answers (the tree is held, so the id stays its own)
_TREES: dict[int, tuple] = {}


def _measure(inverse: tuple[float, ...]):
    """v -> max_r v_r · inverse_r (0 for no resource), written out for the usual two
    resources: it is asked for every queue at every evaluation."""
    if len(inverse) == 2:
        a, b = inverse
        return lambda v: max(v[0] * a, v[1] * b)
    return lambda v: max(map(operator.mul, v, inverse), default=0.0)


class TreeView:
    """One decision's view of the tree (module docstring); ``native``: the compiled core's."""

    def __init__(self, tree, native: bool = False):
        self.tree = tree
        cluster = tree.cluster
        self.cluster = cluster
        self.total = tuple(cluster.total)
        self.native = native
        self._heads: dict[str, tuple] = {}       # leaf -> (its head app, its placeable pending tasks)
        self._usage: dict[str, list[float]] | None = None
        self._warned: list = []                   # the victims warned (withhold)
        self._kept: dict[str, list[float]] | None = None
        self._static, answers, shape = self._statics(tree, native)
        self.shape = shape                        # the compiled core's, holding this view's C doubles
        if shape is not None:
            # the compiled view's u, δ and F, copied: most evaluations read them only from C
            # (the starvation clocks' scan), so their dicts are made when first asked
            self._values = shape.view(tree.queues)
        else:
            self._python(answers)

    def _python(self, answers: dict) -> None:
        """u, δ and F by the reference code."""
        tree = self.tree
        demand = self._demand(self.usage)
        self.shares = {path: self.frac(u) for path, u in self.usage.items()}
        self.demand_shares = {path: self.frac(d) for path, d in demand.items()}
        # F is a pure function of the tree, the cluster and each queue's hi_q = min(M_q, δ_q)
        # (None: inactive): while the leaves stay backlogged it repeats between evaluations
        his = tuple(min(big, d) if (d := self.demand_shares[path]) > 0 else None
                    for path, (_, big) in self._static.items())
        fair = answers.get(his)
        if fair is None:
            self.fair = {"root": 1.0}
            self._fill(tree.root)
            if len(answers) > 4096:
                answers.clear()
            answers[his] = dict(self.fair)
        else:
            self.fair = dict(fair)

    # the compiled view's values as dicts, made on first read (the reference sets them)

    @cached_property
    def shares(self) -> dict[str, float]:
        """u_q by path."""
        return self._values.shares()

    @cached_property
    def demand_shares(self) -> dict[str, float]:
        """δ_q by path."""
        return self._values.demand_shares()

    @cached_property
    def fair(self) -> dict[str, float]:
        """F_q by full name."""
        return self._values.fair()

    @property
    def usage(self) -> dict[str, list[float]]:
        """U_q by path, as the tree keeps it; root's the sum of its children's."""
        if self._usage is None:
            tree, k = self.tree, len(self.total)
            root = tree.root
            top = [0.0] * k
            usage = self._usage = {root.spec.path: top}
            for q in tree.queues:
                if q is not root:
                    usage[q.spec.path] = q.usage[:k]
            for c in root.children:
                for r, x in enumerate(usage[c.spec.path]):
                    top[r] += x
        return self._usage

    def _demand(self, usage: dict) -> dict[str, list[float]]:
        """U_q + P_q by path; root's P the sum of its children's."""
        tree, k = self.tree, len(self.total)
        root = tree.root
        demand = {q.spec.path: [x + y for x, y in zip(usage[q.spec.path], q.pend)]
                  for q in tree.queues if q is not root}
        top_pend = [0.0] * k
        for c in root.children:
            for r, y in enumerate(c.pend):
                top_pend[r] += y
        demand[root.spec.path] = [x + y for x, y in zip(usage[root.spec.path], top_pend)]
        return demand

    def _statics(self, tree, native: bool) -> tuple[dict, dict, Any]:
        """Per queue path (m, M): its min and max as fractions of the cluster (``_bounds``),
        fixed for a tree on a cluster of this total; the tree's cached answers; and, under the
        compiled core, its shape (``_fairshare.TreeShape``); it sets ``inverse`` (1/T_r of the
        resources measured) and ``frac``, kept with them."""
        measure = (self.total, tree.share_resources, native)
        entry = _TREES.get(id(tree))
        if entry is not None and entry[0] is tree and entry[1] == measure:
            self.inverse, self.frac = entry[5], entry[6]
        else:
            if len(_TREES) > 8:
                _TREES.clear()
            only = tree.share_resources         # the scheduler's measure: memory under YARN's
            self.inverse = tuple(1.0 / t if t > 0 and (only is None or r in only) else 0.0
                                 for r, t in enumerate(self.total))
            self.frac = _measure(self.inverse)
            static = {}
            for q in tree.queues:
                m = self.frac(q.min) if q.min is not None else 0.0
                big = min((x / t for x, t in zip(q.max, self.total) if t > 0 and x < INF), default=1.0) \
                    if q.max is not None else 1.0
                static[q.spec.path] = (m, big)
            shape = _shape(tree, static, self.inverse) if native else None
            entry = _TREES[id(tree)] = (tree, measure, static, {}, shape, self.inverse, self.frac)
        return entry[2], entry[3], entry[4]

    def withhold(self, victims: list) -> None:
        """The victims warned and still running (each with its ``app`` id), which ``kept``
        leaves out: those of earlier evaluations, then those this one has warned so far."""
        self._warned = victims
        self._kept = None

    @property
    def withheld(self) -> list:
        """The victims ``kept`` leaves out (``withhold``)."""
        return self._warned

    @property
    def kept(self) -> dict[str, list[float]]:
        """Each queue's usage less the containers already warned and still running, which the
        victim search must not count twice: a source stays at or above its share *after*
        every kill due (YARN's FSAppAttempt subtracts its resourcesToBePreempted before
        canContainerBePreempted).  Computed when a search first asks."""
        if self._kept is None:
            kept = self._kept = {p: list(u) for p, u in self.usage.items()}
            apps, members = self.cluster.apps, self.tree.members
            for victim in self._warned:
                app_id = victim.app
                d = apps[app_id].demand
                for q in members[app_id].path:
                    u = kept[q.spec.path]
                    for r, x in enumerate(d):
                        u[r] -= x
        return self._kept

    def head(self, path: str) -> tuple[Any, int]:
        """Leaf ``path``'s placeable app it serves first (None: none) and its placeable
        pending tasks: over its apps with a task pending and an eligible node."""
        found = self._heads.get(path)
        if found is None:
            best, n = None, 0
            index = self.tree.index
            for app in index.items_in(index.pending_mask & self.tree.by_path[path].mask):
                if app.pending > 0 and app.eligible_count > 0:
                    n += app.pending
                    if best is None or app.entry < best.entry:
                        best = app
            found = self._heads[path] = (best, n)
        return found

    def placeable(self, path: str) -> bool:
        """Has leaf ``path`` an app with a task pending and an eligible node (``head`` not None)?"""
        found = self._heads.get(path)
        if found is not None:
            return found[0] is not None
        index = self.tree.index
        item = index.item
        mask = index.pending_mask & self.tree.by_path[path].mask
        while mask:                     # the leaf's apps, lowest slot first, till one is placeable
            low = mask & -mask
            app = item(low)
            if app.pending > 0 and app.eligible_count > 0:
                return True
            mask ^= low
        return False

    def dominant(self, path: str) -> float:
        """u_q."""
        return self.shares[path]

    def demand_share(self, path: str) -> float:
        """δ_q."""
        return self.demand_shares[path]

    def task_share(self, app) -> float:
        return self.frac(app.demand)

    def min_share(self, path: str) -> float:
        lo = self.tree.by_path[path].min
        return self.frac(lo) if lo is not None else 0.0

    def min_ratio(self, path: str) -> float:
        lo = self.tree.by_path[path].min
        if lo is None:
            return INF
        return max((u / m for u, m in zip(self.usage[path], lo) if m > 0), default=INF)

    def _fill(self, q) -> None:
        """F down the tree: each parent's F divided among its active children."""
        kids = [c for c in q.children if self.demand_shares[c.spec.path] > 0]
        for c in q.children:
            self.fair[c.name] = 0.0
        if kids:
            bounds = [(m, min(big, self.demand_shares[c.spec.path]))
                      for c in kids for m, big in (self._static[c.spec.path],)]
            key = (tuple(c.weight for c in kids), tuple(bounds), self.fair[q.name])
            shares = _FAIR_CACHE.get(key)
            if shares is None:
                if len(_FAIR_CACHE) > 4096:
                    _FAIR_CACHE.clear()
                shares = _FAIR_CACHE[key] = fair_shares(list(key[0]), [min(m, hi) for m, hi in bounds],
                                                        [hi for _, hi in bounds], key[2])
            for c, f in zip(kids, shares):
                self.fair[c.name] = f
        for c in q.children:
            if c.children:
                self._fill(c)


def _shape(tree, static: dict, inverse: tuple):
    """The compiled core's ``TreeShape`` of ``tree``: its queues in ``tree.queues`` order (the
    root first), each one's parent, weight, m and M, and the order ``_fill`` names the queues
    in (F's dict keeps it)."""
    queues = tree.queues
    at = {id(q): i for i, q in enumerate(queues)}
    assert queues[0] is tree.root
    parents = [-1] + [at[id(tree._parent(q))] for q in queues[1:]]
    children = [[at[id(c)] for c in q.children] for q in queues]
    order = [0]

    def visit(q):
        order.extend(at[id(c)] for c in q.children)
        for c in q.children:
            if c.children:
                visit(c)
    visit(tree.root)
    return compiled("_fairshare").TreeShape(
        parents, children, [float(q.weight) for q in queues], [static[q.spec.path][0] for q in queues],
        [static[q.spec.path][1] for q in queues], list(inverse), order, [queues[i].name for i in order],
        [q.spec.path for q in queues])
