"""The share formulas, h_i and the resource roles, once; every reader asks here or asks the policy.

* h_i, the tasks app i could run with the whole cluster to itself (tsf-paper §V-A):
  h_i = Σ_m p_im · min_{r: d_ir>0} C_mr / d_ir, floored per machine for indivisible tasks
  (online) and not for divisible ones (offline, tsf-paper §V-B); p_im = 1 for every m gives
  h_i, the app's eligible machines give h_i^c (CDRF, tsf-paper §IV-B3).  ``tasks_per_machine``
  and ``h_tasks``.
* Which resource is "CPU" and which "memory": ``resource_index``.
* The shares, each a ``ShareKind`` with one vectorised formula of n_i over ``Holders``:

  ================  ===================================  ==================================
  kind              share of holder i                    source
  ================  ===================================  ==================================
  task_share        n_i / (h_i w_i)                      tsf-paper §V-A (TSF)
  work_slowdown     n_i / (h_i^c w_i)                    tsf-paper §IV-B3 (constrained CDRF)
  dominant_share    n_i · max_r (d_ir / total_r) / w_i   DRF; drfh-paper eq. 2
  cpu_share, ...    n_i · d_ir / total_r / w_i           choosy-paper §4 (CMMF); slots too
  ================  ===================================  ==================================

A policy states which kind it ranks by (``Policy.share``); its unit u_i is the share of one
task (n_i = 1) and its key n_i · u_i.  The run log's share columns are the kinds at
w_i = 1 but for the task share (``app_shares``).  A holder is an app or an aggregate (a queue
is a set of apps): ``ShareKind.set_share`` gives a set's share under the same formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from rayrm.rm.core.model import EPS

# ----- resource roles -------------------------------------------------------------------

#: a role and the prefixes (lower case) of the dimension names that play it
ROLES = {"cpu": ("cpu", "vcore"), "memory": ("mem",)}


def resource_index(dims: Sequence[str], wanted: str) -> int | None:
    """Index of resource ``wanted`` among ``dims``: the dimension so named, else, for a role
    (``cpu``, ``vcores``; ``memory``, ``mem``, ``memory_mb``), the first dimension whose name
    starts with one of the role's prefixes (``memory`` finds ``memory_mb`` or ``mem_gb``,
    ``cpu`` finds ``vcores``), else the first starting with ``wanted``'s first three letters;
    None when there is none."""
    if wanted in dims:
        return list(dims).index(wanted)
    low = wanted.lower()
    prefixes = next((p for p in ROLES.values() if low.startswith(p)), (low[:3],))
    return next((i for i, d in enumerate(dims) if d.lower().startswith(prefixes)), None)


# ----- h_i ------------------------------------------------------------------------------

def tasks_per_machine(capacity, demand, divisible: bool = False) -> np.ndarray:
    """fit[i, m] = min_{r: d_ir>0} C_mr / d_ir, floored unless ``divisible`` (one term of h_i,
    tsf-paper §V-A); ``capacity`` M x R, ``demand`` N x R; 0 for a demand of nothing."""
    capacity = np.asarray(capacity, dtype=float)
    demand = np.asarray(demand, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(demand[:, None, :] > 0, capacity[None, :, :] / demand[:, None, :], np.inf)
    fit = ratio.min(axis=2) if ratio.shape[2] else np.full(ratio.shape[:2], np.inf)
    if not divisible:
        fit = np.floor(fit + EPS)
    return np.where(np.isfinite(fit), fit, 0.0)


def h_tasks(capacity, demand, *, eligible=None, count=None, divisible: bool = False) -> np.ndarray:
    """h_i = Σ_m count_m · p_im · fit_im (tsf-paper §V-A): with ``eligible`` p (N x M) the
    constrained h_i^c (tsf-paper §IV-B3), without it h_i; ``count`` machines per row of
    ``capacity`` (machine types), 1 each by default."""
    fit = tasks_per_machine(capacity, demand, divisible)
    if count is not None:
        fit = fit * np.asarray(count, dtype=float)
    if eligible is not None:
        fit = fit * eligible
    return fit.sum(axis=1)


def tasks_fit(capacity: Sequence[float], demand: Sequence[float], divisible: bool = False) -> float:
    """``tasks_per_machine`` of one machine and one demand, as a float: min_{r: d_r>0} C_r / d_r,
    floored unless ``divisible``, 0 for a demand of nothing — in plain floats, as ``Holders.one``
    is (the same bits; a replay's plan asks it for every node and app, where numpy's
    per-call cost would be most of the driver's)."""
    best = math.inf
    for c, d in zip(capacity, demand):
        if d > 0 and c / d < best:
            best = c / d
    if best == math.inf:
        return 0.0
    return best if divisible else float(math.floor(best + EPS))


# ----- the holders the formulas read ------------------------------------------------------

class Holders:
    """N holders of resources as the share formulas read them (tsf-paper §V-A names).

    ``dims`` are the real dimensions then any virtual ones (slots), ``real`` how many are
    real, ``total`` Σ_m C_m over live machines.  Per holder: ``demand`` d_i (N x D), ``weight``
    w_i, ``h`` h_i, ``h_c`` h_i^c and ``dominant`` max_r d_ir / total_r, as arrays — or, made
    by ``one``, as plain floats for a single app, the form the scheduler's per-app unit and
    the run log's per-change rows use (the same formulas, no numpy per call).  ``apps`` and
    ``cluster`` are the views the rows were made from: a policy that defines only ``unit``
    is asked through them.
    """

    __slots__ = ("dims", "real", "total", "demand", "weight", "h", "h_c", "dominant", "apps", "cluster")

    def __init__(self, dims, real, total, demand, weight, h, h_c, dominant=None, apps=(), cluster=None):
        self.dims, self.real, self.total, self.demand = tuple(dims), real, total, demand
        self.weight, self.h, self.h_c, self.apps, self.cluster = weight, h, h_c, tuple(apps), cluster
        self.dominant = dominant_per_task(demand[:, :real], total[:real]) if dominant is None else dominant

    @classmethod
    def of_views(cls, apps: Sequence, cluster) -> "Holders":
        """From ``rayrm.rm.core.views`` AppViews and their ClusterView (or anything with
        their attributes: ``AppState``, ``ClusterState``)."""
        dims = tuple(cluster.dims) + tuple(cluster.virtual_dims)
        col = lambda f: np.array([getattr(a, f) for a in apps], dtype=float)  # noqa: E731
        return cls(dims, len(cluster.dims), np.array(tuple(cluster.total) + tuple(cluster.virtual_total), dtype=float),
                   np.array([a.demand for a in apps], dtype=float).reshape(len(apps), len(dims)),
                   col("weight"), col("h"), col("h_c"), None, apps, cluster)

    @classmethod
    def one(cls, app, cluster) -> "Holders":
        """One app as floats (``of_views``'s fields for one row)."""
        total = tuple(cluster.total) + tuple(cluster.virtual_total)
        key = (app.demand, total)
        dominant = _DOMINANT.get(key)
        if dominant is None:
            if len(_DOMINANT) > 4096:
                _DOMINANT.clear()
            real = len(cluster.dims)
            dominant = _DOMINANT[key] = float(dominant_per_task([app.demand[:real]], total[:real])[0])
        return cls(tuple(cluster.dims) + tuple(cluster.virtual_dims), len(cluster.dims), total, app.demand,
                   app.weight, app.h, app.h_c, dominant, (app,), cluster)

    def with_weight(self, weight) -> "Holders":
        if isinstance(self.weight, np.ndarray):
            weight = np.broadcast_to(np.asarray(weight, dtype=float), self.weight.shape)
        return Holders(self.dims, self.real, self.total, self.demand, weight, self.h, self.h_c,
                       self.dominant, self.apps, self.cluster)

    def column(self, r: int):
        """d_ir of every holder (a float for ``one``)."""
        return self.demand[:, r] if isinstance(self.demand, np.ndarray) and self.demand.ndim == 2 else self.demand[r]

    def __len__(self) -> int:
        return len(self.weight) if isinstance(self.weight, np.ndarray) else 1


#: (demand, totals) -> max_r d_r / total_r, for ``Holders.one``
_DOMINANT: dict[tuple, float] = {}


def dominant_per_task(demand, total) -> np.ndarray:
    """max_r d_ir / total_r over the resources the cluster has (0 for none): one task's
    dominant share (DRF; drfh-paper eq. 2); ``demand`` N x R."""
    demand, total = np.asarray(demand, dtype=float), np.asarray(total, dtype=float)
    positive = total > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(positive, demand / np.where(positive, total, 1.0), 0.0)
    return per.max(axis=1) if per.shape[1] else np.zeros(len(per))


def _div(a, b):
    """a / b for arrays or floats; a / 0 is inf (NaN for 0 / 0), as numpy has it."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.true_divide(a, b)
    return a / b if b else (math.inf if a else math.nan)


# ----- the kinds of share -------------------------------------------------------------------

@dataclass(frozen=True)
class ShareKind:
    """One share: its name (the run log's and the UI's column where there is one), how it
    reads, and its formula ``of(n, holders)``, vectorised over holders, weights included.

    ``aggregate`` says how a set of apps (a queue) is one holder: ``sum`` — the members'
    shares at weight 1 added, then divided by the set's weight (shares counted in tasks; a
    plugin's own share adds its members' shares as its ``unit`` gives them);
    ``usage`` — the formula applied to the members' summed use Σ n_i d_i, as one task of
    the set at the set's weight (shares of resources)."""

    name: str
    title: str
    formula: str
    of: Callable = field(repr=False, compare=False)
    aggregate: str = "sum"

    def unit(self, holders: Holders):
        """u_i, the share of one task (n_i = 1)."""
        return self.of(1.0, holders)

    def set_share(self, running, holders: Holders, members: Sequence, weight) -> np.ndarray:
        """The share of each set of holders (``members[q]``: indexes into ``holders``) at
        the set's weight ``weight[q]``, as ``aggregate`` says."""
        running = np.broadcast_to(np.asarray(running, dtype=float), holders.weight.shape)
        weight = np.asarray(weight, dtype=float)
        if self.aggregate == "sum":
            alone = self.of(running, holders.with_weight(1.0))
            return np.array([alone[list(m)].sum() for m in members]) / weight
        used = np.array([(running[list(m), None] * holders.demand[list(m)]).sum(axis=0) for m in members])
        one = np.ones(len(members))
        sets = Holders(holders.dims, holders.real, holders.total, used.reshape(len(members), len(holders.dims)),
                       weight, one, one)
        return self.of(1.0, sets)


def _task_share(n, holders: Holders):
    return _div(n, holders.h * holders.weight)


def _work_slowdown(n, holders: Holders):
    return _div(n, holders.h_c * holders.weight)


def _dominant_share(n, holders: Holders):
    return n * holders.dominant / holders.weight


TASK_SHARE = ShareKind("task_share", "task share", "n_i / (h_i w_i)", _task_share)
WORK_SLOWDOWN = ShareKind("work_slowdown", "work slowdown", "n_i / (h_i^c w_i)", _work_slowdown)
DOMINANT_SHARE = ShareKind("dominant_share", "dominant share", "n_i max_r (d_ir / total_r) / w_i",
                           _dominant_share, "usage")


class _ResourceFormula:
    """n_i d_ir / total_r / w_i of one named resource (a class, not a closure: a policy
    holding it is pickled with the RM's state)."""

    def __init__(self, resource: str):
        self.resource = resource
        self._where: dict[tuple, int | None] = {}        # dims -> the resource's index

    def __call__(self, n, holders: Holders):
        r = self._where.get(holders.dims, -1)
        if r == -1:
            r = self._where[holders.dims] = resource_index(holders.dims, self.resource)
        if r is None or not holders.total[r] > 0:
            return np.zeros(len(holders.weight)) if isinstance(holders.weight, np.ndarray) else 0.0
        return n * holders.column(r) / holders.total[r] / holders.weight


def resource_share(resource: str) -> ShareKind:
    """The share of one resource, n_i d_ir / total_r / w_i (choosy-paper §4); ``cpu`` and
    ``memory`` (any name of theirs, ``resource_index``) are ``cpu_share`` and ``mem_share``;
    0 on a cluster without the resource."""
    low = resource.lower()
    role = next((r for r, p in ROLES.items() if low.startswith(p)), None)
    name = {"cpu": "cpu_share", "memory": "mem_share"}.get(role, f"{resource}_share")
    return ShareKind(name, f"{role or resource} share", f"n_i d_i,{resource} / total_{resource} / w_i",
                     _ResourceFormula(resource), "usage")


CPU_SHARE = resource_share("cpu")
MEM_SHARE = resource_share("memory")
#: the run log's share columns (shares.csv), in order
LOGGED = (TASK_SHARE, DOMINANT_SHARE, CPU_SHARE, MEM_SHARE)


def served_key(n: float, unit: float) -> float:
    """n u: the key of an app running n tasks of unit share u, lowest served first.  An app
    that no node present can hold has u = inf (h_i = 0); its key is inf even at n = 0
    (where n u would be NaN), so it waits behind every app that can run until a node it
    may use joins and its unit is computed again."""
    key = n * unit
    return key if key == key else float("inf")


def defined(x):
    """A share as the run log records it: 0 where undefined (h_i = 0: inf or NaN)."""
    if isinstance(x, np.ndarray):
        return np.where(np.isfinite(x), x, 0.0)
    return x if math.isfinite(x) else 0.0


def share_units(app, cluster) -> tuple[float, float, float, float]:
    """The run log's shares of one task of an app (``LOGGED`` at n_i = 1, weight 1 but for the
    task share: 1/(h_i w_i), max_r d_ir/total_r, d_i,cpu/total_cpu, d_i,mem/total_mem; 0 where
    undefined); a row is n_i times these.  A driver that records many rows caches them and
    recomputes them when the cluster changes."""
    return _logged(1.0, Holders.one(app, cluster))


def app_shares(app, cluster) -> tuple[float, float, float, float]:
    """The run log's shares of an app right now: n_i / (h_i w_i), n_i max_r d_ir / total_r,
    n_i d_i,cpu / total_cpu and n_i d_i,mem / total_mem (0 where undefined)."""
    return _logged(float(app.running), Holders.one(app, cluster))


def _logged(n: float, holders: Holders) -> tuple[float, float, float, float]:
    plain = holders.with_weight(1.0)
    return tuple(float(defined(k.of(n, holders if k is TASK_SHARE else plain))) for k in LOGGED)
