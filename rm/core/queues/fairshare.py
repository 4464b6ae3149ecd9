"""The Fair Scheduler's fair share: water-filling over weights with min and max clamps.

Hadoop's ComputeFairShares (Hadoop's Fair Scheduler page, "Introduction": a queue's fair share is what it
is entitled to; its docstring gives the definition): given schedulables with weights w_i,
min shares lo_i and max shares hi_i and T to share, an assignment is fair when a ratio R exists
such that

    s_i(R) = min(max(R · w_i, lo_i), hi_i)        and        Σ_i s_i(R) = T,

with T = min(total, Σ_i hi_i) (no one is given more than its max).  Where Σ_i lo_i ≥ T,
R = 0 and each holds its min share.  Hadoop finds R by 25 steps of bisection on integers;
rayrm solves the piecewise-linear Σ_i s_i(R) exactly (its breakpoints are lo_i/w_i and
hi_i/w_i), so the shares are the limit Hadoop's search approaches, in real numbers.

The *instantaneous* fair share is computed over the active queues only — those with an app
that runs or may run now; an inactive queue's is 0 (ComputeFairShares.computeShares,
FSQueue.isActive).  The *steady* share (``steady_shares``) counts every queue, busy or not:
what each would get were every queue busy (ComputeFairShares.computeSteadyShares), as a
fraction of the cluster — root's is 1, each parent's divided among all its children with
their weights and their min and max as fractions of the cluster.  With no min or max it
is F_c = F_parent · W_c / Σ_siblings W.

This is the one water-filling of rayrm: the Fair Scheduler's offer
(``rayrm.rm.core.queues.yarn_fair``), the UI's and REST's owed and steady shares
(``rayrm.rm.core.queues.owed``), the run's queue metrics and the tree's report all divide a
parent's share with ``fair_shares``.
"""

from __future__ import annotations

import math
from typing import Sequence

from rayrm.rm.core.queues.tree import QueueTree, tree_bounds

INF = math.inf


def clamp_share(r: float, weight: float, lo: float, hi: float) -> float:
    """s_i(R) = min(max(R · w_i, lo_i), hi_i) (ComputeFairShares.computeShare)."""
    return min(max(r * weight, lo), hi)


def weight_to_share_ratio(weights: Sequence[float], lo: Sequence[float], hi: Sequence[float],
                          total: float) -> float:
    """R with Σ_i s_i(R) = min(total, Σ_i hi_i) (0 when the min shares already take it all;
    inf when there is nothing to bound it: no schedulable has a positive weight)."""
    target = min(total, sum(hi))
    if sum(clamp_share(0.0, w, a, b) for w, a, b in zip(weights, lo, hi)) >= target:
        return 0.0
    points = sorted({p for w, a, b in zip(weights, lo, hi) if w > 0
                     for p in (a / w, b / w) if p < INF})
    left = 0.0
    for right in points + [INF]:
        # on [left, right] Σ s_i(R) = fixed + R · slope: each term is a constant or R · w_i
        mid = left + 1.0 if right == INF else (left + right) / 2
        fixed = slope = 0.0
        for w, a, b in zip(weights, lo, hi):
            if a >= b or mid * w <= a or mid * w >= b:
                fixed += clamp_share(mid, w, a, b)
            else:
                slope += w
        if slope > 0:
            r = (target - fixed) / slope
            if left - 1e-12 <= r <= right + 1e-12 or right == INF:
                return max(r, left)
        elif fixed >= target - 1e-9:
            return left
        left = right
    return INF


def fair_shares(weights: Sequence[float], lo: Sequence[float], hi: Sequence[float],
                total: float) -> list[float]:
    """Each schedulable's fair share s_i(R) of ``total`` (module docstring)."""
    if not weights:
        return []
    r = weight_to_share_ratio(weights, lo, hi, total)
    return [clamp_share(r, w, a, b) if r < INF else min(max(a, 0.0), b) for w, a, b in zip(weights, lo, hi)]


def steady_shares(tree: QueueTree, total: dict[str, float]) -> dict[str, float]:
    """path -> each queue's steady fair share F_c, a fraction of a cluster of ``total``
    (module docstring; root, path "", is 1)."""
    bounds = tree_bounds(tree, total)
    out = {"": 1.0}
    for q in tree.queues():
        kids = q.children
        for c, f in zip(kids, fair_shares([c.weight for c in kids], [bounds[c.path].m for c in kids],
                                          [bounds[c.path].big for c in kids], out[q.path])):
            out[c.path] = f
    return out
