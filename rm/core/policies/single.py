"""Single-resource and slot policies: CMMF (Choosy) on CPU or memory, FIFO, slots.

* CMMF (choosy-paper §4; tsf-paper §IV-A): constrained max-min fairness on one
  resource; the key is the app's share of that resource, n_i · d_ir / total_r / w_i.
* FIFO: the key is the submit time.
* Slots (drfh-paper §VI, Table II; Hadoop Fair Scheduler): every node is cut into
  slots of (largest node) / k and a task takes ceil(max_r d_ir / slot_r) slots; the
  key is the app's share of all slots.  Slots are accounted as a virtual resource,
  so fragmentation inside a slot is real, as it is in a slot scheduler.
"""

from __future__ import annotations

import math

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import EPS
from rayrm.rm.core.policies.base import Policy
from rayrm.rm.core.shares import TASK_SHARE, resource_index, resource_share, tasks_fit


class ConstrainedMaxMin(Policy):
    """Constrained max-min fairness on one resource: key n_i d_ir / total_r / w_i (choosy-paper §4)."""

    def __init__(self, resource: str):
        self.resource = resource
        self.share = resource_share(resource)
        self.name = f"cmmf-{'cpu' if resource == 'cpu' else 'mem'}"

    def prepare(self, nodes, dims):
        if resource_index(dims, self.resource) is None:
            raise InputError(f"{self.name} shares {self.resource}, and there is no such resource "
                             f"among {', '.join(dims)}", field="policy")


class FirstInFirstOut(Policy):
    """First in, first out: the key is the submit time."""

    name = "fifo"
    #: FIFO ranks by its key, not a share; the share it reports is the task share
    share = TASK_SHARE

    def unit(self, app, cluster):
        return 0.0

    def key(self, app):
        return app.submit


class Slots(Policy):
    """Slot scheduler: nodes cut into slots of (largest node) / k; key = the app's share of all slots (drfh-paper §VI)."""

    name = "slots"
    virtual_dims = ("slots",)
    share = resource_share("slots")

    def __init__(self, k: int = 14):
        if k < 1:
            raise ValueError("slots per node must be at least 1")
        self.k = k
        self.slot: tuple[float, ...] = ()
        self.dims: tuple[str, ...] = ()

    def prepare(self, nodes, dims):
        self.dims = dims
        largest = [max((n.capacity[d] for n in nodes), default=0.0) for d in dims]
        self.slot = tuple(c / self.k for c in largest)

    def virtual_capacity(self, node):
        return (tasks_fit(node.capacity.vector(self.dims), self.slot),)

    def slots_per_task(self, demand) -> float:
        return float(max((math.ceil(d / s - EPS) for d, s in zip(demand, self.slot) if s > 0 and d > 0),
                         default=1))

    def virtual_demand(self, app):
        return (self.slots_per_task(app.demand.vector(self.dims)),)
