"""``yarn-capacity``: Hadoop's Capacity Scheduler on the queue tree (docs/yarn-schedulers.md).

Each queue is guaranteed a fraction of the cluster, its *absolute capacity*
g_Q = g_parent · capacity_Q / 100 (root: 1); a queue that sets no ``capacity`` takes
weight_Q / Σ_siblings weight (the weight mode of Hadoop's Capacity Scheduler page, "Queue Properties").
All on memory, as the default resource calculator (DefaultResourceCalculator) reads it:

* **Which queue first.**  A free node goes down the tree; at each queue, of the children
  with a pending task that fits the node within their caps, the one of least *used
  capacity* U_c / (g_c · total_mem) is offered first — the most under its guarantee — ties
  to the larger guarantee, then the name (PriorityUtilizationQueueOrderingPolicy, the
  parent's ``utilization`` order).  A queue with no guarantee comes after every queue with one.
* **Elasticity.**  A queue takes more than its capacity when others leave it idle, up to
  ``max_capacity`` (percent of the parent's, hence of the cluster g^max_Q; absolute
  ``max`` too): the tree's max cap (LeafQueue/AbstractCSQueue.canAssignToThisQueue).
* **User limit** (LeafQueue.canAssignToUser, UsersManager.computeUserLimit): in a leaf with
  guarantee G = g_Q · total_mem and usage C, and a task of r MB,

      current = G if C < G else C + r
      limit   = min(max(current / active_users, current · min_user_limit_percent / 100),
                    G · user_limit_factor)          (G = 0: the queue's max instead)

  with active_users the users with a pending task in the leaf; a user holding more than
  ``limit`` is not offered the node (one holding at most ``limit`` may take one more
  container and so pass it by one, as in YARN).  Defaults: min_user_limit_percent 100,
  user_limit_factor 1 — one user alone holds at most the queue's capacity.
* **Inside a leaf** (``policy``): ``fifo`` (the default FifoOrderingPolicy, by submit
  time) or ``fair``/``cmmf-mem`` (FairOrderingPolicy: least memory held first).

``max_apps`` holds a leaf's extra apps unstarted.  Capacity's ``maximum-applications``
rejects submissions beyond it instead; rayrm keeps every job and delays it (docs).
"""

from __future__ import annotations

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.queues.keyed import KeyedTreeState
from rayrm.rm.core.queues.accounts import INF, QueueState
from rayrm.rm.core.queues.tree import QueueTree
from rayrm.rm.core.shares import resource_index

#: policies a leaf may order its apps by under yarn-capacity (its ordering-policy)
LEAF_POLICIES = ("yarn-capacity", "fifo", "cmmf-mem")
#: settings the Capacity Scheduler has no counterpart for: an error, not silently ignored
FAIR_ONLY = {"min": "minResources is a Fair Scheduler setting (under yarn-capacity a queue's "
                    "guarantee is its capacity)",
             "preemption": "these preemption timeouts are the Fair Scheduler's",
             "user_limit": "user_limit is rayrm's own (under yarn-capacity use user_limit_factor "
                           "and min_user_limit_percent)"}


class YarnCapacityTreeState(KeyedTreeState):
    """The tree's accounting with the Capacity Scheduler's order and user limits."""

    def __init__(self, tree, policies, default, cluster, index, naive=False):
        self.mem = resource_index(cluster.dims, "memory")
        self.share_resources = (self.mem,)  # DefaultResourceCalculator: memory alone
        self._stamp: dict = {}              # queue -> count of changes to its accounting
        self._verdicts: dict = {}           # leaf -> (stamp, its users' verdicts)
        super().__init__(tree, policies, default, cluster, index, naive)
        # g_Q, the absolute capacity (``tree.child_shares``), is each queue's share
        self.guarantee: dict[QueueState, float] = {q: q.share for q in self.queues}
        for q in self.queues:
            if not q.children and q is not self.root:
                q.user_limit = 1.0          # the base class then keeps each user's usage
                q.capped = True

    def absolute_capacity(self, path: str) -> float:
        """g_Q: the fraction of the cluster queue ``path`` is guaranteed."""
        return self.guarantee[self.by_path[path]]

    def report(self) -> list[dict]:
        """``QueueTreeState.report`` with each queue's fair share its absolute capacity g_Q."""
        out = super().report()
        for row in out:
            row["fair_share"] = self.absolute_capacity(row["queue"].partition(".")[2])
        return out

    def child_key(self, parent: QueueState, child: QueueState) -> tuple:
        """(used capacity, -guarantee, name): most under its guarantee first, ties to the
        larger guarantee, then the name."""
        return self.used_capacity(child), -self.guarantee[child], child.name

    def used_capacity(self, q: QueueState) -> float:
        """U_Q / (g_Q · total_mem); inf for a queue with no guarantee."""
        g = self.guarantee[q] * self.cluster.total[self.mem]
        return q.usage[self.mem] / g if g > 0 else INF

    def _within_caps(self, q: QueueState, cf: int) -> int:
        """The candidates its max(-capacity), max_apps and, in a leaf, user limit admit."""
        cf = self._within_bounds(q, cf)
        if q.children or not cf:
            return cf
        return self._within_user_limit(q, cf)

    def _within_user_limit(self, q: QueueState, cf: int) -> int:
        """The candidates whose user holds at most the user limit (module docstring)."""
        passing, per_task, limit = self._user_verdicts(q)
        allowed = cf & passing
        unsure = cf & per_task
        if unsure:
            mem, index, consumed = self.mem, self.index, q.usage[self.mem]
            for usage, slots in q.users.values():
                uf = unsure & slots
                while uf:
                    low = uf & -uf
                    if usage[mem] <= limit(consumed + index.item(low).demand[mem]) + 1e-9:
                        allowed |= low
                    uf ^= low
        return allowed

    def _user_verdicts(self, q: QueueState) -> tuple:
        """(slots of the users within the limit whatever the task, slots of those it depends
        on the task's size for, the limit as a function of current), kept until the leaf's
        accounting or its pending apps change: a node offered again and again in between, or
        another leaf's change, asks the same."""
        stamp = (self._stamp.get(q, 0), self.index.pending_mask & q.mask)
        hit = self._verdicts.get(q)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        mem, spec = self.mem, q.spec
        pending = self.index.pending_mask
        active = sum(1 for _, slots in q.users.values() if slots & pending) or 1
        guaranteed = self.guarantee[q] * self.cluster.total[mem]
        factor = spec.user_limit_factor if spec.user_limit_factor is not None else 1.0
        percent = spec.min_user_limit_percent if spec.min_user_limit_percent is not None else 100.0
        consumed = q.usage[mem]
        # a queue guaranteed nothing bounds a user by its max instead (UsersManager does so
        # for a zero capacity, rather than limit every user to nothing)
        ceiling = guaranteed * factor if guaranteed > 0 else (
            q.max[mem] if q.max is not None else self.cluster.total[mem])

        def limit(current: float) -> float:
            return min(max(current / active, current * percent / 100), ceiling)

        passing = per_task = 0
        for usage, slots in q.users.values():
            used = usage[mem]
            if consumed < guaranteed:
                if used <= limit(guaranteed) + 1e-9:
                    passing |= slots
            # current = C + r: the limit grows with the task's r up to the ceiling, so a user
            # within limit(C) passes for any task and one above the ceiling for none
            elif used <= limit(consumed) + 1e-9:
                passing |= slots
            elif used <= ceiling + 1e-9:
                per_task |= slots
        out = (passing, per_task, limit)
        self._verdicts[q] = (stamp, out)
        return out

    # ----- what invalidates the verdicts ---------------------------------------------

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_verdicts"] = {}             # a cache, and its limits are closures
        return state

    def _changed(self, app) -> None:
        stamp = self._stamp
        for q in self.members[app.app_id].path:
            stamp[q] = stamp.get(q, 0) + 1

    def attach(self, app, leaf) -> None:
        self._verdicts = {}                 # the index may have renumbered every slot
        super().attach(app, leaf)

    def allocated(self, app) -> None:
        self._changed(app)
        super().allocated(app)

    def released(self, app, n: int = 1):
        self._changed(app)
        return super().released(app, n)

    def finished(self, app, running: int):
        self._changed(app)
        return super().finished(app, running)

    def rebuild(self):
        self._verdicts = {}
        return super().rebuild()


def check_capacity_queues(queues: QueueTree, policies: dict, default) -> None:
    """A leaf orders its apps fifo or fair; a parent's order is fixed (used capacity);
    no Fair-only setting (one line, exit 2)."""
    for spec in queues.queues():
        if spec.policy and spec.children:
            raise InputError("the Capacity Scheduler offers child queues by used capacity; a parent "
                             "queue's policy would be ignored", field=f"{spec.full_name}.policy")
        if spec.policy and spec.policy not in LEAF_POLICIES:
            raise InputError(f"policy {spec.policy} is not a Capacity Scheduler ordering-policy "
                             "(under yarn-capacity use fifo or fair/cmmf-mem)", field=f"{spec.full_name}.policy")
        for key, why in FAIR_ONLY.items():
            if getattr(spec, key):
                raise InputError(f"{why}; yarn-capacity would ignore it", field=f"{spec.full_name}.{key}")
