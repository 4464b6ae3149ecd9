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

import numpy as np

from rayrm.rm.core.model import EPS
from rayrm.rm.core.policies.base import Policy, dominant_share_per_task


class DominantResourceFairness(Policy):
    name = "drf"

    def unit(self, app, cluster):
        return dominant_share_per_task(app, cluster) / app.weight


class DRFHFirstFit(DominantResourceFairness):
    name = "drfh-ff"


class DRFHBestFit(DominantResourceFairness):
    name = "drfh-bf"
    best_fit = True

    def __init__(self):
        # app id -> (its eligible bytes object, cluster totals, eligible mask, demand, lead,
        # want, divisor): what H needs that changes only when nodes join or leave
        self._fixed: dict[str, tuple] = {}

    def _invariants(self, app, cluster) -> tuple:
        hit = self._fixed.get(app.app_id)
        if hit is not None and hit[0] is app.eligible and hit[1] == cluster.total:
            return hit
        k = len(cluster.dims)
        demand = np.asarray(app.demand)
        total = np.asarray(cluster.total)
        # Normalise by the first resource with a non-zero demand (cpu in the paper).
        lead = int(np.flatnonzero(demand[:k] > 0)[0])
        divisor = np.where(total > 0, total, np.inf)
        want = demand[:k] / divisor
        want = want / want[lead]
        hit = (app.eligible, cluster.total, np.frombuffer(app.eligible, dtype=np.uint8).astype(bool),
               demand, lead, want, divisor)
        self._fixed[app.app_id] = hit
        return hit

    def choose_node(self, app, offered, cluster):
        """argmin over eligible nodes with room of H(i, l) (eq. 9); ties: the first node."""
        k = len(cluster.dims)
        free = cluster.free_matrix
        _, _, eligible, demand, lead, want, divisor = self._invariants(app, cluster)
        fit = eligible.copy()
        for r, d in enumerate(app.demand):       # (free + EPS >= demand).all(axis=1), column by column
            fit &= free[:, r] + EPS >= d
        rows = np.flatnonzero(fit)
        share = free[rows, :k] / divisor
        room = share[:, lead] > 0
        rows, share = rows[room], share[room]
        if not len(rows):
            return offered
        h = np.abs(want - share / share[:, lead:lead + 1]).sum(axis=1)
        best = rows[np.flatnonzero(h <= h.min() + 1e-12)[0]]
        return cluster.nodes[best]


class PerMachineDRF(Policy):
    name = "pm-drf"
    per_node = True

    def unit(self, app, cluster):
        return 0.0

    def node_key(self, app, node, cluster):
        k = len(cluster.dims)
        per_task = max((d / c for d, c in zip(app.demand[:k], node.capacity[:k]) if d > 0 and c > 0),
                       default=0.0)
        return app.on_node.get(node.index, 0) * per_task / app.weight
