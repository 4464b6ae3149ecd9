"""The online scheduler over a queue tree: the offer rule of tsf-paper §V-D, down the tree.

``make_scheduler`` gives a config's scheduler: the flat ``OnlineScheduler`` when the
config has no ``queues:`` (one leaf, root.default: every app in it, served exactly as
before), else a ``TreeScheduler``.  The tree scheduler keeps the flat one's accounting —
the cluster, the sorted order of pending apps, the pending index — and replaces the offer:
a dirty node (or one a fresh app may use) is offered to ``QueueTreeState.choose``, the app
the tree names gets one container, and the offer goes on until the tree names none
(``rayrm.rm.core.queues.state``).  Each leaf's policy keys its own apps; a leaf's apps are the
restriction of one sorted order, so the least entry among a leaf's candidates is the one
its policy serves first.

Not supported under a tree (one line, exit 2): policies that key per node (``pm-drf``),
choose the node (``drfh-bf``) or account virtual resources (``slots``); and as a parent's
policy, one whose key is not per task (``fifo``).
"""

from __future__ import annotations

from numbers import Real
from typing import Iterable

import numpy as np

from rayrm.rm.core.cluster import AppState
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.native import compiled
from rayrm.rm.core.queues.state import QueueTreeState
from rayrm.rm.core.model import AppSpec, Container, NodeSpec
from rayrm.rm.core.policies import Policy, PolicyError, make_policy
from rayrm.rm.core.policies.base import policy_label
from rayrm.rm.core.policies.plugins import resolve_policy
from rayrm.rm.core.queues.tree import QueueTree
from rayrm.rm.core.queues.yarn_capacity import YarnCapacityTreeState, check_capacity_queues
from rayrm.rm.core.queues.yarn_fair import YarnFairTreeState, check_fair_queues
from rayrm.rm.core.scheduler import OnlineScheduler, any_fits
from rayrm.rm.core.shares import served_key

#: a policy's ``scheduler`` -> the tree's accounting and offer rule, and the check of the
#: queues' settings, of YARN's schedulers (``rayrm.rm.core.policies.yarn``)
YARN_SCHEDULERS = {"yarn-fair": (YarnFairTreeState, check_fair_queues),
                   "yarn-capacity": (YarnCapacityTreeState, check_capacity_queues)}


def make_scheduler(policy: Policy | str, dims: Iterable[str], nodes: Iterable[NodeSpec] = (),
                   queues: QueueTree | None = None) -> OnlineScheduler:
    """The scheduler of a config: flat without ``queues:``, else over the tree."""
    if queues is None or queues.flat:
        return OnlineScheduler(policy, dims, nodes)
    return TreeScheduler(policy, dims, nodes, queues)


def check_queues(policy: Policy | str, queues: QueueTree | None, file=None) -> None:
    """The queue settings ``policy``'s scheduler would ignore, refused before any work: one
    line naming ``file``, the queue and the setting (YARN's schedulers; docs/yarn-schedulers.md)."""
    policy = make_policy(policy) if isinstance(policy, str) else policy
    check = YARN_SCHEDULERS.get(getattr(policy, "scheduler", None), (None, None))[1]
    if check is None or queues is None or queues.flat:
        return
    policies = {s.policy: make_policy(s.policy) for s in queues.queues() if s.policy}
    try:
        check(queues, policies, policy)
    except InputError as e:
        raise InputError(e.reason, file=file, field=e.field) from None


class TreeScheduler(OnlineScheduler):
    """``OnlineScheduler`` whose offers go down a queue tree (module docstring)."""

    def __init__(self, policy: Policy | str, dims: Iterable[str], nodes: Iterable[NodeSpec], queues: QueueTree,
                 naive: bool = False):
        nodes = list(nodes)
        dims = tuple(dims)
        super().__init__(policy, dims, nodes)
        self._flat = False
        self.queues = queues
        policies: dict[str, Policy] = {}
        for spec in queues.queues():
            if spec.policy and spec.policy not in policies:
                p = make_policy(spec.policy)
                self._call(p.prepare, "prepare", nodes, dims)
                policies[spec.policy] = p
        state, check = YARN_SCHEDULERS.get(getattr(self.policy, "scheduler", None), (QueueTreeState, None))
        if check is None:
            self._check_policies(queues, policies)
        else:
            check(queues, policies, self.policy)
        self.tree = state(queues, policies, self.policy, self.cluster, self._index, naive)
        #: a node's proof (``OnlineScheduler._offer``) holds down the tree too when the tree
        #: chooses every app that fits (no cap holds one back): then, as flat, no app pending
        #: at the last ``schedule()`` fitted a node's free vector then
        self._tree_proofs = state is QueueTreeState and not any(q.capped for q in self.tree.queues)
        self._leaf_policy: dict[str, tuple[Policy, bool]] = {
            q.spec.path: (q.policy, type(q.policy).key is Policy.key) for q in self.tree.queues}
        self._uniform = self._unit_key and all(p is self.policy for p, _ in self._leaf_policy.values())

    def _check_policies(self, queues: QueueTree, policies: dict) -> None:
        """Every queue's policy can order its children (one line, exit 2, when not)."""
        for spec in queues.queues():
            p = policies.get(spec.policy, self.policy) if spec.policy else self.policy
            _check_policy(p, spec.full_name, parent=bool(spec.children) or not spec.path)

    # ----- the tree's accounting beside the flat one's ---------------------------

    def submit(self, spec: AppSpec, pending: int | None = None) -> tuple[AppState | None, str | None]:
        leaf, reason = self.queues.leaf(spec.queue)
        if leaf is None:
            return None, reason
        app, reason = super().submit(spec, pending)
        if app is not None:
            self.tree.attach(app, self.tree.leaf(leaf.path))
            self.tree.asked(app, app.pending)       # asked for before it joined the tree
        return app, reason

    def _place(self, app: AppState, node, order: list) -> Container:
        container = super()._place(app, node, self._order)
        self.tree.allocated(app)
        return container

    def ask(self, app_id: str, count: int) -> None:
        super().ask(app_id, count)
        if count > 0:
            self.tree.asked(self.cluster.apps[app_id], count)

    def cancel(self, app_id: str, count: int) -> None:
        app = self.cluster.apps[app_id]
        before = app.pending
        super().cancel(app_id, count)
        self.tree.asked(app, app.pending - before)

    def release(self, container_id: int) -> Container:
        app, node = self.cluster.holders[container_id]
        container = super().release(container_id)
        self.tree.node_changed(node.index)
        blocked = self.tree.released(app)
        if blocked:
            self._redirty(blocked)
        return container

    def finish_app(self, app_id: str) -> list[Container]:
        app = self.cluster.apps[app_id]
        running = app.running
        self.tree.asked(app, -app.pending)
        left = super().finish_app(app_id)
        index = self.cluster.node_index
        for c in left:
            self.tree.node_changed(index[c.node])
        self._redirty(self.tree.finished(app, running))
        return left

    def _rekey_all(self) -> None:
        super()._rekey_all()
        self._redirty(self.tree.rebuild())

    def _redirty(self, nodes) -> None:
        """Nodes a cap had kept from some app, now that the cap loosened: offer them again."""
        live = self.cluster.nodes
        self._dirty.update(m for m in nodes if live[m].alive)

    # ----- keys: each leaf's own policy -------------------------------------------

    def _unit(self, app: AppState) -> float:
        policy = self._leaf_policy[app.spec.queue][0]
        if policy is self.policy:
            return super()._unit(app)
        u = self._call(policy.unit, "unit", app.view, self._view)
        if not (isinstance(u, Real) and not isinstance(u, bool)) or not u >= 0:
            raise PolicyError(policy_label(policy), "unit", f"returned {u!r} for app {app.app_id}: "
                              "a unit must be a number >= 0")
        return u

    def _set_key(self, app: AppState) -> None:
        if self._uniform:               # every leaf keys its apps as the flat scheduler does
            app.key = key = served_key(app.running, app.unit)
            app.entry = (key, app.submit, app.app_id, app)
            return
        policy, per_task = self._leaf_policy[app.spec.queue]
        if per_task:
            key = served_key(app.running, app.unit)
        else:
            key = self._checked_key(self._call(policy.key, "key", app.view), "key", app)
        app.key = key
        app.entry = (key, app.submit, app.app_id, app)

    # ----- scheduling ---------------------------------------------------------------

    def schedule(self) -> list[Container]:
        """Offer the dirty nodes, then the nodes a fresh app may use, each down the tree.
        The compiled core's ``_tree.schedule`` under the native core (the same steps)."""
        if self._native:
            return compiled("_tree").schedule(self)
        placed: list[Container] = []
        dirty, fresh = self._dirty, self._fresh
        tree = self.tree
        if not dirty and not fresh and not tree.deferred:
            return placed
        proofs = self._proof if self._tree_proofs else {}
        self._dirty, self._fresh, self._proof = set(), {}, {}
        nodes = self.cluster.nodes
        stopped = None if self._order else -1
        asked = list(fresh.values())
        for m in tree.offer_round(dirty, bool(fresh)):
            if nodes[m].alive and self._order:
                self._offer_tree(nodes[m], placed, proofs.get(m), asked)
                if not self._order:
                    stopped = m
        tree.close_round(stopped)
        fresh_apps = [a for a in fresh.values() if a.pending > 0]
        if fresh_apps and self._order:
            # Only nodes some fresh app may use, and of those only where one of them fits
            # (by the invariant, no older app fits a node that was not freed since).
            mask = np.frombuffer(fresh_apps[0].eligible, dtype=np.uint8)
            for a in fresh_apps[1:]:
                mask = mask | np.frombuffer(a.eligible, dtype=np.uint8)
            for m in np.flatnonzero(mask).tolist():
                node = nodes[m]
                if m in dirty or not node.alive or not any_fits(fresh_apps, m, node.free):
                    continue
                # a node not freed since fits no app pending then: its free vector is its proof
                self._offer_tree(node, placed, tuple(node.free) if self._tree_proofs else None, fresh_apps)
                if not self._order:
                    break
        self.placements += len(placed)
        return placed

    def _offer_tree(self, node, placed: list, proof: tuple | None = None, asked: list = ()) -> None:
        """Offer ``node`` down the tree until nothing is chosen.  With the node's ``proof``
        (its free vector at the last ``schedule()``, when no app pending then fitted): once
        the node has no more than that left, only an app ``asked`` for since can fit, and
        when none of them does the next choice would be none: the offer ends without it."""
        if self._native and type(self)._place is TreeScheduler._place and "_place" not in self.__dict__:
            return compiled("_tree").offer(self, node, placed, proof, asked)     # the same, compiled
        choose, m, free, order = self.tree.choose, node.index, node.free, self._order
        while True:
            app = choose(m, free, order)
            if app is None:
                return
            placed.append(self._place(app, node, self._order))
            if proof is not None and all(f <= p for f, p in zip(free, proof)) and not any_fits(asked, m, free):
                return


def check_tree_policies(queues: QueueTree, policy: str) -> None:
    """Refuse, before anything runs, a policy the tree cannot use (``_check_policy``), read
    from the classes the config's policy strings name."""
    if queues.flat:
        return
    if getattr(resolve_policy(policy).cls, "scheduler", None) in YARN_SCHEDULERS:
        check_queues(policy, queues)    # YARN's schedulers: their own rules (docs/yarn-schedulers.md)
        return
    for spec in queues.queues():
        text = spec.policy or policy
        cls = resolve_policy(text).cls
        _check_policy(cls, spec.full_name, parent=bool(spec.children) or not spec.path, name=text)


def _check_policy(policy, queue: str, parent: bool, name: str | None = None) -> None:
    """``policy``: a Policy, or its class."""
    name = name or getattr(policy, "name", "?")
    if policy.per_node or policy.best_fit or policy.virtual_dims:
        raise InputError(f"policy {name} keys per node, picks nodes or counts slots: it cannot "
                         f"order queue {queue} (use tsf, cdrf, drf, drfh-ff, cmmf-cpu/mem or fifo)",
                         field="queues")
    cls = policy if isinstance(policy, type) else type(policy)
    if parent and cls.key is not Policy.key:
        raise InputError(f"policy {name} has no per-task share to order queue {queue}'s children by "
                         f"(set it on leaf queues)", field="queues")
