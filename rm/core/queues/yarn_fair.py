"""``yarn-fair``: Hadoop's Fair Scheduler on the queue tree (docs/yarn-schedulers.md).

A free node goes down the tree as under hierarchical TSF (``rayrm.rm.core.queues.state``):
at each queue, of the children with a pending task that fits the node within every cap on
the way, the first under the queue's ``schedulingPolicy`` takes it (FSParentQueue sorts its
children with its policy's comparator and offers them in turn), then the leaf's first app.
The comparators, per queue ``policy`` (Hadoop's Fair Scheduler page, "Allocation file format",
``schedulingPolicy``; Hadoop's ``fair/policies``):

* ``fair`` (``cmmf-mem``, the default): FairSharePolicy.  A child is *needy* when its
  memory usage U is below min(minShare, demand); needy children first, least
  U / max(min(minShare, demand), 1) first; the others by least U / weight.
* ``drf``: DominantResourceFairnessPolicy.  With s_r = U_r / (total_r · weight) and d the
  child's dominant resource (largest s_r), a child is needy when U_d / minShare_d < 1; needy
  children first, compared on U_r / minShare_r, the others on their s_r, each vector in
  the child's own dominant-first order and compared lexicographically.  A ``fair`` parent
  cannot have a ``drf`` child (FairSharePolicy.isChildPolicyAllowed).
* ``fifo``: FifoPolicy, leaves only — apps by submit time.

Ties go to the start time, then the name (queues start at 0, so the name).  Children with no
demand come last in YARN; here they are never candidates, as they have no task to place.
``maxResources`` (``max``) caps usage plus the task (FSQueue.fitsInMaxShare), and
``maxRunningApps`` (``max_apps``) holds apps back unstarted (MaxRunningAppsEnforcer), through
the tree's caps.  ``fair_share`` gives the instantaneous fair share (``fairshare``) that
preemption asks about; the order does not use it, as in YARN.
"""

from __future__ import annotations

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.queues.fairshare import fair_shares
from rayrm.rm.core.queues.keyed import KeyedTreeState
from rayrm.rm.core.queues.accounts import INF, QueueState
from rayrm.rm.core.queues.tree import QueueTree
from rayrm.rm.core.shares import resource_index

#: a queue's rayrm policy -> the Fair Scheduler policy it selects, by its class's name (the
#: schema maps YARN's ``fair`` to ``cmmf-mem``)
FAIR, DRF, FIFO = "FairSharePolicy", "DominantResourceFairnessPolicy", "FifoPolicy"
FAIR_POLICIES = {"yarn-fair": FAIR, "cmmf-mem": FAIR, "drf": DRF, "fifo": FIFO}
#: settings only the Capacity Scheduler reads: an error here, not silently ignored
CAPACITY_ONLY = ("user_limit_factor", "min_user_limit_percent")


class YarnFairTreeState(KeyedTreeState):
    """The tree's accounting with the Fair Scheduler's order (module docstring)."""

    def __init__(self, tree, policies, default, cluster, index, naive=False):
        super().__init__(tree, policies, default, cluster, index, naive)
        self.mem = resource_index(cluster.dims, "memory")
        self.fair_policy = {q: FAIR_POLICIES[q.policy.name] for q in self.queues}
        # FairSharePolicy compares queues on memory, DRF on the dominant share: the root's decides
        self.share_resources = None if self.fair_policy[self.root] == DRF else (self.mem,)

    def child_key(self, parent: QueueState, child: QueueState) -> tuple:
        """child's key under parent's Fair Scheduler policy (``drf_key`` or ``fair_key``)."""
        return self.drf_key(child) if self.fair_policy[parent] == DRF else self.fair_key(child)

    def fair_key(self, c: QueueState) -> tuple:
        """FairShareComparator: (0, U / max(min(minShare, demand), 1)) when needy, else
        (1, U / weight); on memory; ties on the name."""
        used = c.usage[self.mem]
        if c.min is not None and c.min[self.mem] > used:
            floor = min(c.min[self.mem], self.demand(c)[self.mem])
            if used < floor:
                return 0, used / max(floor, 1.0), c.name
        return 1, used / c.weight, c.name

    def drf_key(self, c: QueueState) -> tuple:
        """DominantResourceFairnessComparator: (0, U_r / minShare_r) when needy, else
        (1, U_r / (total_r · weight)), each dominant resource first; ties on the name."""
        total = self.cluster.total
        shares = [(u / t / c.weight if t > 0 else 0.0, r) for r, (u, t) in enumerate(zip(c.usage, total))]
        shares.sort(key=lambda x: (-x[0], x[1]))
        if c.min is not None:
            of_min = [c.usage[r] / c.min[r] if c.min[r] > 0 else INF for _, r in shares]
            if of_min[0] < 1:
                return 0, tuple(of_min), c.name
        return 1, tuple(s for s, _ in shares), c.name

    def demand(self, q: QueueState) -> list[float]:
        """What the queue's apps run and still ask for: Σ_i (n_i + pending_i) d_i."""
        out = [0.0] * len(self.cluster.dims)
        bits = q.mask
        while bits:
            low = bits & -bits
            app = self.index.item(low)
            for r, d in enumerate(app.demand[:len(out)]):
                out[r] += (app.running + app.pending) * d
            bits ^= low
        return out

    # ----- the instantaneous fair share ---------------------------------------------

    def is_active(self, q: QueueState) -> bool:
        """An app of the queue runs, or may start now (FSQueue.isActive: runnable apps)."""
        return q.running_apps > 0 or bool(q.mask and (q.max_apps is None or q.running_apps < q.max_apps))

    def fair_shares(self) -> dict[str, list[float]]:
        """Every queue's instantaneous fair share, per resource: root's is the cluster; each
        parent's is divided among its active children by ``fairshare.fair_shares`` with their
        weights and min/max (inactive children: 0).  FairSharePolicy reads the memory
        entry, DominantResourceFairnessPolicy every one."""
        out = {self.root.spec.path: list(self.cluster.total)}
        stack = [self.root]
        while stack:
            q = stack.pop()
            have = out[q.spec.path]
            active = [c for c in q.children if self.is_active(c)]
            for c in q.children:
                out[c.spec.path] = [0.0] * len(have)
            for r, total in enumerate(have):
                lo = [c.min[r] if c.min is not None else 0.0 for c in active]
                hi = [c.max[r] if c.max is not None else INF for c in active]
                for c, s in zip(active, fair_shares([c.weight for c in active], lo, hi, total)):
                    out[c.spec.path][r] = s
            stack.extend(q.children)
        return out

    def report(self) -> list[dict]:
        """``QueueTreeState.report`` with each queue's fair share the Fair Scheduler's
        instantaneous one, as a fraction of the cluster's memory."""
        out = super().report()
        shares, total = self.fair_shares(), self.cluster.total[self.mem]
        for row in out:
            path = row["queue"].partition(".")[2]
            row["fair_share"] = shares[path][self.mem] / total if total > 0 else 0.0
        return out

    def fair_share(self, path: str) -> list[float]:
        """Queue ``path``'s instantaneous fair share now, per resource."""
        return self.fair_shares()[path]

    def min_share(self, path: str) -> list[float]:
        """Queue ``path``'s min share now, per resource (minResources; 0 where unset)."""
        q = self.by_path[path]
        return list(q.min) if q.min is not None else [0.0] * len(self.cluster.dims)


def check_fair_queues(queues: QueueTree, policies: dict, default) -> None:
    """Each queue's policy is one the Fair Scheduler has (fair/cmmf-mem, drf, fifo),
    fifo only on a leaf, no drf under fair; no Capacity-only setting (one line, exit 2)."""
    for spec in queues.queues():
        p = policies.get(spec.policy, default) if spec.policy else default
        kind = FAIR_POLICIES.get(getattr(p, "name", None))
        if kind is None:
            raise InputError(f"policy {p.name} is not a Fair Scheduler policy "
                             "(under yarn-fair use fair/cmmf-mem, drf or fifo)", field=f"{spec.full_name}.policy")
        if kind == FIFO and spec.children:
            raise InputError("fifo orders apps, so only a leaf queue may use it "
                             "(Hadoop's Fair Scheduler page, schedulingPolicy)", field=f"{spec.full_name}.policy")
        for c in spec.children if spec.path else ():      # root's policy stands for YARN's root's
            cp = policies.get(c.policy, default) if c.policy else p
            if kind == FAIR and FAIR_POLICIES.get(cp.name) == DRF:
                raise InputError("a drf queue cannot sit under a fair one "
                                 "(FairSharePolicy.isChildPolicyAllowed)", field=f"{c.full_name}.policy")
        for key in CAPACITY_ONLY:
            if getattr(spec, key) is not None:
                raise InputError(f"{key} is a Capacity Scheduler setting that "
                                 "yarn-fair would ignore (use yarn-capacity)", field=f"{spec.full_name}.{key}")
