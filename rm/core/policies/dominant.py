"""Dominant-resource policies: DRF, DRFH (first and best fit), per-machine DRF.

* DRF (Ghodsi et al., tsf-paper §IV-B): the cluster as one machine; dominant share
  max_r(Σ alloc_ir / total_r) / w_i = n_i · max_r(d_ir / total_r) / w_i.
* DRFH (drfh-paper §IV, eq. 2-3): the same global dominant share, but placed on real
  servers; ``drfh-ff`` takes the offered server (first fit), ``drfh-bf`` the server
  with the least H(i, l) = ‖D_i / D_i1 − c̄_l / c̄_l1‖₁ (drfh-paper eq. 9), with D_i
  and c̄_l the demand and the server's free resources as shares of the cluster total.
* Per-machine DRF (tsf-paper §IV-B1): DRF on each machine separately; the key of
  app i for an offer of machine m is n_im · max_r(d_ir / C_mr) / w_i.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from rayrm.rm.core.model import EPS
from rayrm.rm.core.policies.base import Policy
from rayrm.rm.core.shares import DOMINANT_SHARE

#: above this many candidate nodes, best fit scores them with numpy, all at once
FEW_NODES = 32


class DominantResourceFairness(Policy):
    """Dominant Resource Fairness, the cluster as one machine: key n_i max_r(d_ir / total_r) / w_i."""

    name = "drf"
    share = DOMINANT_SHARE
    pooled = True


class DRFHFirstFit(DominantResourceFairness):
    """DRFH first fit: DRF's global key, each task on the offered server (drfh-paper §IV)."""

    name = "drfh-ff"
    pooled = False


class _Fixed(NamedTuple):
    """What H(i, l) needs of an app that changes only when nodes join or leave."""

    eligible_of: bytes          # the app's eligible bytes object these were made for
    total: tuple                # and the cluster totals
    eligible: np.ndarray        # eligible nodes as a bool mask
    lead: int                   # the first resource the app demands (cpu in the paper)
    want: np.ndarray            # D_i / D_i,lead, D the demand as shares of the totals
    divisor: np.ndarray         # the totals, inf where 0
    want_list: list             # want and divisor as floats, for scoring one node
    divisor_list: list


class DRFHBestFit(DominantResourceFairness):
    """DRFH best fit: the server whose free resources are most like the demand (drfh-paper eq. 9).

    Scoring every server costs a dozen numpy passes over all of them, once per placement.
    Two facts make most placements cheaper with the same answer:

    * the scheduler names the few nodes outside which an app cannot fit (``among``);
    * within one ``schedule()`` resources are only taken, never freed, so an app's scores
      from its first placement of the round stay right except on the nodes chosen since
      (this policy chose them: every placement of the round goes through ``choose_node``).
    """

    name = "drfh-bf"
    best_fit = True
    pooled = False

    def __init__(self):
        self._fixed: dict[str, _Fixed] = {}
        self.new_round()

    def new_round(self) -> None:
        self._chosen: list[int] = []        # the nodes chosen this round, in order
        # app id -> [rows, their scores (inf: no longer fits), row -> position, chosen seen]
        self._scores: dict[str, list] = {}

    def _invariants(self, app, cluster) -> _Fixed:
        hit = self._fixed.get(app.app_id)
        if hit is not None and hit.eligible_of is app.eligible and hit.total == cluster.total:
            return hit
        k = len(cluster.dims)
        demand = np.asarray(app.demand)
        total = np.asarray(cluster.total)
        # Normalise by the first resource with a non-zero demand (cpu in the paper).
        lead = int(np.flatnonzero(demand[:k] > 0)[0])
        divisor = np.where(total > 0, total, np.inf)
        want = demand[:k] / divisor
        want = want / want[lead]
        hit = _Fixed(app.eligible, cluster.total, np.frombuffer(app.eligible, dtype=np.uint8).astype(bool),
                     lead, want, divisor, want.tolist(), divisor.tolist())
        self._fixed[app.app_id] = hit
        return hit

    def choose_node(self, app, offered, cluster, among=None):
        """argmin over eligible nodes with room of H(i, l) (eq. 9); ties (within 1e-12): the
        first node."""
        if among is not None and len(among) == 1 and among[0] == offered.index:
            node = offered      # the offered node alone: it wins if it scores, the fallback if not
        elif among is not None and len(among) <= FEW_NODES:
            fixed = self._invariants(app, cluster)
            nodes, eligible = cluster.nodes, app.eligible
            scored = [(h, m) for m in among
                      if eligible[m] and (h := _score(app, nodes[m], cluster, fixed)) is not None]
            if scored:
                least = min(h for h, _ in scored) + 1e-12
                node = nodes[next(m for h, m in scored if h <= least)]
            else:
                node = offered
        else:
            node = self._choose_all(app, offered, cluster, self._invariants(app, cluster))
        self._chosen.append(node.index)     # whichever node it is, its scores change now
        return node

    def _choose_all(self, app, offered, cluster, fixed):
        """Every node scored at the app's first placement of the round (numpy), then only
        the nodes chosen since rescored (Python, same float operations in the same order)."""
        hit = self._scores.get(app.app_id)
        if hit is None:
            k = len(cluster.dims)
            free = cluster.free_matrix()
            lead, want, divisor = fixed.lead, fixed.want, fixed.divisor
            fit = fixed.eligible.copy()
            for r, d in enumerate(app.demand):       # (free + EPS >= demand).all(axis=1), column by column
                fit &= free[:, r] + EPS >= d
            rows = np.flatnonzero(fit)
            share = free[rows, :k] / divisor
            room = share[:, lead] > 0
            rows, share = rows[room], share[room]
            h = np.abs(want - share / share[:, lead:lead + 1]).sum(axis=1)
            where = dict(zip(rows.tolist(), range(len(rows))))
            hit = self._scores[app.app_id] = [rows, h, where, len(self._chosen)]
        else:
            rows, h, where, seen = hit
            nodes = cluster.nodes
            for m in self._chosen[seen:]:
                i = where.get(m)
                if i is not None:
                    score = _score(app, nodes[m], cluster, fixed)
                    h[i] = np.inf if score is None else score
            hit[3] = len(self._chosen)
        if not len(rows):
            return offered
        best = int(h.argmin())              # the first least; a node before it within 1e-12 wins
        least = h[best]
        if least == np.inf:
            return offered
        if best and h[:best].min() <= least + 1e-12:
            best = int(np.flatnonzero(h[:best] <= least + 1e-12)[0])
        return cluster.nodes[rows[best]]


def _score(app, node, cluster, fixed) -> float | None:
    """H(i, l) of one eligible node, or None when the app's task does not fit there or the
    node has none of the lead resource left; the vector form's float operations in the
    same order (numpy sums a short row left to right), so ties and minima come out the same."""
    if not cluster.fits(app, node):
        return None
    lead, want, divisor = fixed.lead, fixed.want_list, fixed.divisor_list
    share = [f / v for f, v in zip(node.free, divisor)]
    base = share[lead]
    if not base > 0:
        return None
    return sum(abs(w - s / base) for w, s in zip(want, share))


class PerMachineDRF(Policy):
    """Per-machine DRF: the key of an offer of machine m is n_im max_r(d_ir / C_mr) / w_i (tsf-paper §IV-B1)."""

    name = "pm-drf"
    per_node = True
    #: per machine there is no cluster-wide share; the one shown is the global dominant share
    share = DOMINANT_SHARE

    def __init__(self):
        self._per_task: dict[tuple, float] = {}     # (demand, node capacity) -> max_r d_ir / C_mr

    def unit(self, app, cluster):
        return 0.0

    def node_key(self, app, node, cluster):
        n = app.running_on(node.index)
        if not n:
            return 0.0          # n_im = 0: the key is 0 whatever one task's share
        per_task = self._per_task.get((app.demand, node.capacity))
        if per_task is None:
            k = len(cluster.dims)
            per_task = max((d / c for d, c in zip(app.demand[:k], node.capacity[:k]) if d > 0 and c > 0),
                           default=0.0)
            self._per_task[(app.demand, node.capacity)] = per_task
        return n * per_task / app.weight
