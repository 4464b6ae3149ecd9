"""YARN's own schedulers named as policies: ``yarn-fair`` and ``yarn-capacity``.

Each is a scheduler over the queue tree (``rayrm.rm.core.queues.yarn_fair``,
``yarn_capacity``; docs/yarn-schedulers.md); as a policy it is the order it gives the apps
of a leaf whose queue sets no ``policy`` of its own, and the only order there is in a
config without ``queues:`` (one leaf, root.default):

* ``yarn-fair``: the Fair Scheduler's default ``fair`` policy (FairSharePolicy) on apps — an
  app has no min share, so its comparator reduces to memory usage over weight, ties on
  start time then name (Hadoop's Fair Scheduler page, "Scheduling policy"; FairSharePolicy's
  FairShareComparator).  Usage over weight ranks as the app's memory share
  n_i d_i,mem / total_mem / w_i, the share ``cmmf-mem`` ranks by.
* ``yarn-capacity``: the Capacity Scheduler's default ``ordering-policy``, ``fifo``
  (Hadoop's Capacity Scheduler page, "Queue Properties": FifoOrderingPolicy), by submit time.
"""

from __future__ import annotations

from rayrm.rm.core.policies.single import ConstrainedMaxMin, FirstInFirstOut


class YarnFair(ConstrainedMaxMin):
    """The Fair Scheduler (FairSharePolicy inside a leaf): key n_i d_i,mem / total_mem / w_i."""

    #: the queue scheduler this policy names (``rayrm.rm.core.queues.scheduler.make_scheduler``)
    scheduler = "yarn-fair"

    def __init__(self):
        super().__init__("memory")
        self.name = "yarn-fair"


class YarnCapacity(FirstInFirstOut):
    """The Capacity Scheduler (FIFO ordering-policy inside a leaf): key = submit time."""

    name = "yarn-capacity"
    scheduler = "yarn-capacity"
