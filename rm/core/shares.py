"""The share formulas, once: what a policy orders apps by and what the run log records.

* task share s_i = n_i / (h_i w_i) (tsf-paper §V-A), where h_i is the number of tasks app i
  could run with the whole cluster to itself; with h_i^c, counting only the nodes i may
  use, the same formula is constrained CDRF's work slowdown (tsf-paper §IV-B3);
* dominant share max_r n_i d_ir / total_r (DRF; DRFH's global dominant share, drfh-paper
  eq. 2), one task's being max_r d_ir / total_r;
* resource share n_i d_ir / total_r of one resource r (CPU, memory).

The policies (``rayrm.rm.core.policies``) take one task's share as their ordering unit;
the run log's share rows (``rayrm.rm.runs.log``) are n_i times the same units.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from rayrm.rm.core.cluster import AppState, ClusterState


def task_share(n: float, h: float, weight: float) -> float:
    """n / (h w): the task share of an app running n tasks of the h it could run alone, at
    weight w (tsf-paper §V-A; with h^c, CDRF's work slowdown).  Needs h > 0."""
    return n / (h * weight)


def served_key(n: float, unit: float) -> float:
    """n u: the key of an app running n tasks of unit share u, lowest served first.  An app
    that no node present can hold has u = inf (h_i = 0); its key is inf even at n = 0
    (where n u would be NaN), so it waits behind every app that can run until a node it
    may use joins and its unit is computed again."""
    key = n * unit
    return key if key == key else float("inf")


def dominant_share(demand: Sequence[float], total: Sequence[float]) -> float:
    """max_r d_r / total_r over the resources the cluster has: one task's dominant share
    (DRF; drfh-paper eq. 2); 0 for a task that demands nothing."""
    return max((d / t for d, t in zip(demand, total) if t > 0), default=0.0)


def _dim_index(dims: tuple[str, ...], prefix: str) -> int | None:
    for i, d in enumerate(dims):
        if d == prefix or d.startswith(prefix):
            return i
    return None


def app_shares(app: "AppState", cluster: "ClusterState") -> tuple[float, float, float, float]:
    """(task share, dominant share, cpu share, memory share) of an app right now:
    n_i / (h_i w_i), n_i max_r d_ir / total_r, n_i d_i,cpu / total_cpu and
    n_i d_i,mem / total_mem; 0 for a share that is undefined (h_i = 0, no such resource)."""
    n = app.running
    total = cluster.total
    share = task_share(n, app.h, app.weight) if app.h > 0 else 0.0
    dominant = n * dominant_share(app.demand, total)
    ci, mi = _dim_index(cluster.dims, "cpu"), _dim_index(cluster.dims, "mem")
    cpu = n * app.demand[ci] / total[ci] if ci is not None and total[ci] else 0.0
    mem = n * app.demand[mi] / total[mi] if mi is not None and total[mi] else 0.0
    return share, dominant, cpu, mem


def share_units(app: "AppState", cluster: "ClusterState") -> tuple[float, float, float, float]:
    """The shares of ``app_shares`` per running task: (1/(h_i w_i), max_r d_ir/total_r,
    d_i,cpu/total_cpu, d_i,mem/total_mem).  ``app_shares`` is n_i times this; a driver
    that records many share rows caches it and recomputes it when the cluster changes.
    """
    total = cluster.total
    share = task_share(1.0, app.h, app.weight) if app.h > 0 else 0.0
    dominant = dominant_share(app.demand, total)
    ci, mi = _dim_index(cluster.dims, "cpu"), _dim_index(cluster.dims, "mem")
    cpu = app.demand[ci] / total[ci] if ci is not None and total[ci] else 0.0
    mem = app.demand[mi] / total[mi] if mi is not None and total[mi] else 0.0
    return share, dominant, cpu, mem
