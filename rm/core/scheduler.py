"""The online scheduler: the offer rule of tsf-paper §V-D for every policy.

When a node has free resources (a task finished, the node joined) it is offered
to the apps in policy order: the lowest-key app that may use the node and whose
task fits gets one container; its key grows and the offer goes on; it ends when
no eligible pending app fits.  Ties break on (submit time, app id).

Invariant after ``schedule()``: on every live node, no pending app that may use
it has a task that fits its free resources.  Only three things break it — a node
frees resources or joins (the node is *dirty*), or an app gains pending tasks
(the app is *fresh*) — so ``schedule`` offers dirty nodes to every pending app,
and the other nodes only to fresh apps.  Pending apps are kept in one list sorted
by (key, submit, app id); an offer walks it from the front, and since a key only
grows when its app is served, the walk resumes where it left off instead of
starting again.  Two shortcuts give the walk's answer sooner (``_offer``): a
vector index of pending apps (``rayrm.rm.core.pending``) names the apps that fit a node, and
a dirty node's free vector at the last ``schedule()`` — when nothing fitted it — is
kept as a *proof*: once an offer has brought the node back under it, only apps
asked for since can fit.  A best-fit policy leans on the same invariant: an app that was
pending at the last ``schedule()`` fits only on nodes freed or joined since, so only those
are scored for it (``_choose_node``).  Nothing here reads a clock: the simulator and the
Ray ResourceManager drive it with their own.

The policy sees read-only views (``rayrm.rm.core.views``) and its answers are checked
where they enter: a unit once per computation (a number >= 0, not NaN), a key or node
key once per call (a number, not NaN), a chosen node for liveness, eligibility and
room.  A wrong answer or an exception inside the policy is a ``PolicyError`` naming
the policy and the method; the call that met it changes nothing after that point.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from numbers import Real
from typing import Iterable

import numpy as np

from rayrm.rm.core.cluster import AppState, ClusterState, NodeState
from rayrm.rm.core.model import DEFAULT_QUEUE, EPS, AppSpec, Container, NodeSpec
from rayrm.rm.core.native import compiled, core_name
from rayrm.rm.core.pending import PendingIndex
from rayrm.rm.core.policies import Policy, PolicyError, make_policy
from rayrm.rm.core.policies.base import policy_label
from rayrm.rm.core.shares import served_key
from rayrm.rm.core.views import NodeView

# Below this many pending apps a plain walk beats the vector "could anything fit" test.
VECTOR_FROM = 48
WALK_STEPS = 8


class OnlineScheduler:
    """Cluster accounting plus a policy, with incremental policy order."""

    # the Python core unless __init__ selected the compiled one (rayrm.rm.core.native)
    _native = _inline_key = False

    def __init__(self, policy: Policy | str, dims: Iterable[str], nodes: Iterable[NodeSpec] = ()):
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        nodes = list(nodes)
        dims = tuple(dims)
        p = self.policy
        self._label = policy_label(p)
        self._call(p.prepare, "prepare", nodes, dims)
        self._best_fit, self._per_node = p.best_fit, p.per_node
        # key = running * unit for most policies (Policy.key): computed inline in _set_key
        self._unit_key = type(p).key is Policy.key
        self.cluster = ClusterState(dims, p.virtual_dims, p.virtual_capacity, p.virtual_demand,
                                    track_free=p.best_fit, count_per_node=p.per_node)
        self._view = self.cluster.view
        self._order: list[tuple] = []      # (key, submit, app_id, app) of apps with pending > 0
        self._dirty: set[int] = set()      # node indexes to offer to every pending app
        self._fresh: dict[str, AppState] = {}
        # node index -> its free vector at the last schedule(), when no pending app fitted it
        # (see _offer: "proofs"); and the apps asked for since, which that proof does not cover.
        self._proof: dict[int, tuple] = {}
        self._new: list[AppState] = []
        # during schedule(): the apps asked for since the last one, and the nodes freed or
        # joined since (sorted) — by the invariant, the only nodes an older app can fit on
        self._round_fresh: dict[str, AppState] = {}
        self._round_nodes: list[int] = []
        self.placements = 0
        self._flat = True                  # no queue tree (rayrm.rm.core.queues.scheduler)
        # which core walks the offers (rayrm.rm.core.native): the same decisions either way
        width = len(dims) + len(p.virtual_dims)
        self._native = core_name() == "native" and width <= compiled("_offer").MAX_WIDTH
        # the compiled core may compute key = n u itself when _set_key is this class's
        self._inline_key = self._unit_key and type(self)._set_key is OnlineScheduler._set_key
        for spec in nodes:
            self.cluster.add_node(spec)
            self._dirty.add(self.cluster.node_index[spec.name])
        self._index = PendingIndex(len(dims) + len(p.virtual_dims), len(self.cluster.nodes), self._native)

    # ----- events --------------------------------------------------------------

    def add_node(self, spec: NodeSpec) -> NodeState:
        return self.add_nodes([spec])[0]

    def add_nodes(self, specs: list[NodeSpec]) -> list[NodeState]:
        """Nodes join; the policy order is rekeyed once for the batch."""
        nodes = self.cluster.add_nodes(specs)
        self._proof.clear()
        self._rekey_all()
        self._dirty.update(node.index for node in nodes)
        return nodes

    def remove_node(self, name: str, departed: bool = False) -> list[Container]:
        """The node is lost (``departed``: it left for good); returns its containers, now
        released (the caller re-asks)."""
        return self.remove_nodes([name], departed)

    def remove_nodes(self, names: list[str], departed: bool = False) -> list[Container]:
        """Nodes are lost together (rekeyed once); returns their containers, now released."""
        lost = self.cluster.remove_nodes(names, departed)
        self._dirty.difference_update(self.cluster.node_index[n] for n in names)
        self._proof.clear()
        self._rekey_all()
        return lost

    def submit(self, spec: AppSpec, pending: int | None = None) -> tuple[AppState | None, str | None]:
        """Register an app with ``pending`` tasks to place (all of them by default).

        Returns (app, None), or (None, reason) when no node could ever run it
        (``ClusterState.rejection_reason``); an app only lost nodes can run waits for them.
        """
        cluster = self.cluster
        if spec.queue != DEFAULT_QUEUE and self._flat:      # the flat tree: one leaf, root.default
            return None, (f"queue root.{spec.queue} does not exist" if spec.queue
                          else "queue root is a parent queue (jobs go to leaf queues)")
        if any(k not in cluster.dims for k in spec.demand):
            return None, cluster.rejection_reason(spec)
        app = cluster.add_app(spec)
        if not app.eligible_count:
            # No live node both matches and holds a task (runnable apps need not pay for
            # the question): rejected unless a lost node, back later, could
            reason = cluster.rejection_reason(spec)
            if reason is not None:
                del cluster.apps[spec.app_id]
                return None, reason
        self._index.add(app.app_id, app.demand, app.eligible, app)
        app.unit = self._unit(app)
        self._set_key(app)
        self.ask(spec.app_id, spec.num_tasks if pending is None else pending)
        return app, None

    def ask(self, app_id: str, count: int) -> None:
        """The app wants ``count`` more tasks placed (a new app, or a lost task asked again)."""
        if count <= 0:
            return
        app = self.cluster.apps[app_id]
        if app.pending == 0:
            self._enter(app)
        app.pending += count
        self._fresh[app_id] = app

    def cancel(self, app_id: str, count: int) -> None:
        """The app no longer wants ``count`` of its pending tasks."""
        app = self.cluster.apps[app_id]
        app.pending = max(0, app.pending - count)
        if app.pending == 0:
            self._leave(app)

    def release(self, container_id: int) -> Container:
        """A container ended; its node is offered again at the next ``schedule``."""
        if self._native:
            return compiled("_offer").release(self, container_id)
        cluster = self.cluster
        container = cluster.containers[container_id]
        node = cluster.holders[container_id][1]
        m = node.index
        if m not in self._dirty:        # first release since the last schedule(): keep its proof
            self._proof[m] = tuple(node.free)
        app, node = cluster.release(container_id)
        self._rekey(app)
        if node.alive:
            self._dirty.add(m)
        return container

    def finish_app(self, app_id: str) -> list[Container]:
        """The app is done (or gone); returns containers it still held, now released."""
        app = self.cluster.apps[app_id]
        if app.pending:
            self._leave(app)
            app.pending = 0
        self._fresh.pop(app_id, None)
        self._index.remove(app_id)
        app.entry = app.view = None     # both refer to app: let refcounting free it
        if app.running == 0:
            # Nothing to release: skip ClusterState.remove_app's scan of every container.
            del self.cluster.apps[app_id]
            return []
        left = self.cluster.remove_app(app_id)
        for c in left:
            node = self.cluster.nodes[self.cluster.node_index[c.node]]
            if node.alive:
                self._dirty.add(node.index)
        return left

    # ----- scheduling ----------------------------------------------------------

    def schedule(self) -> list[Container]:
        """Offer what the last events freed; returns the containers placed, in order."""
        if self._native:            # the same round, compiled (rm/core/native/_offer.pyx)
            return compiled("_offer").schedule(self)
        placed: list[Container] = []
        dirty, fresh = self._dirty, self._fresh
        if not dirty and not fresh:
            return placed
        proofs = self._proof
        self._dirty, self._fresh, self._proof = set(), {}, {}
        nodes = self.cluster.nodes
        if fresh:
            self._new = [a for a in fresh.values() if a.pending > 0]
        ordered = sorted(dirty)
        if self._best_fit:
            self._round_fresh, self._round_nodes = fresh, ordered
            self.policy.new_round()
        order = self._order
        if order:
            offer = self._offer
            for m in ordered:
                if nodes[m].alive:
                    offer(nodes[m], order, placed, proofs.get(m))
                    if not order:           # nothing pending is left (an offer adds nobody)
                        break
        if not self._new:
            self.placements += len(placed)
            return placed
        fresh_apps = [a for a in self._new if a.pending > 0]
        self._new = []
        if fresh_apps:
            # Only nodes some fresh app may use, in node order.
            mask = np.frombuffer(fresh_apps[0].eligible, dtype=np.uint8)
            for a in fresh_apps[1:]:
                mask = mask | np.frombuffer(a.eligible, dtype=np.uint8)
            indexes = np.flatnonzero(mask).tolist()
            cand = sorted(a.entry for a in fresh_apps)
            for m in indexes:
                node = nodes[m]
                if m in dirty or not node.alive:
                    continue
                # Most of these nodes are full: test the fit here before paying for an offer
                # (which would walk the same apps and place nothing).
                if not any_fits((entry[3] for entry in cand), m, node.free):
                    continue
                self._offer(node, cand, placed)
                if not cand:
                    break
        self.placements += len(placed)
        return placed

    def _offer(self, node: NodeState, order: list, placed: list, proof: tuple | None = None) -> None:
        """Serve ``node`` to apps in ``order`` (sorted entries) until no eligible app fits.

        Walk the order from the front: the first app that may use the node and fits is
        served, its key grows, and the walk goes on from the same place (the apps before
        it still do not fit: the node only has less left).  Two shortcuts, same result:

        * long lists: after ``WALK_STEPS`` misses the vector index names every pending app
          that fits; the least of their entries is the one the walk would reach first;
        * ``proof``, the node's free vector at the last ``schedule()``, when (invariant)
          no app pending then fitted: once the node has no more than that left in every
          dimension, only apps asked for since (``self._new``) can still fit.
        """
        if self._per_node:
            self._offer_per_node(node, order, placed)
            return
        if self._native:
            compiled("_offer").offer(self, node, order, placed, proof)
            return
        m = node.index
        free = node.free
        best_fit = self._best_fit
        vector = order is self._order and len(order) >= VECTOR_FROM
        i = 0
        while True:
            app = None
            n = len(order)
            stop = min(n, i + WALK_STEPS) if vector else n
            for i in range(i, stop):
                a = order[i][3]
                if a.eligible[m]:
                    for r, d in enumerate(a.demand):
                        if d > free[r] + EPS:
                            break
                    else:
                        app = a
                        break
            else:
                i = stop
            if app is None:
                if i >= n:
                    return
                app = self._first_fitting(m, free)
                if app is None:
                    return
                i = bisect_left(order, app.entry)
            target = self._choose_node(app, node) if best_fit else node
            placed.append(self._place(app, target, order))
            if proof is not None:
                for f, p in zip(free, proof):
                    if f > p:
                        break
                else:
                    if self._new:
                        self._serve_new(node, placed)
                    return

    def _first_fitting(self, m: int, free) -> AppState | None:
        """The pending app with the least entry that may use node m and fits ``free``."""
        if self._native:
            return compiled("_offer").first_fitting(self._index, m, free)
        apps = self._index.fitting(m, free)
        return min([a.entry for a in apps])[3] if apps else None

    def _serve_new(self, node: NodeState, placed: list) -> None:
        """The rest of an offer when only apps asked for since the node's proof can fit."""
        m, free = node.index, node.free
        best_fit = self._best_fit
        while True:
            best = None
            for a in self._new:
                if a.pending > 0 and a.eligible[m] and (best is None or a.entry < best.entry):
                    for r, d in enumerate(a.demand):
                        if d > free[r] + EPS:
                            break
                    else:
                        best = a
            if best is None:
                return
            target = self._choose_node(best, node) if best_fit else node
            placed.append(self._place(best, target, self._order))

    def _choose_node(self, app: AppState, offered: NodeState) -> NodeState:
        """A best-fit policy's node for the app's next task.  By the invariant (module
        docstring) an app that was pending at the last ``schedule()`` fits only on nodes
        freed or joined since; only an app asked for since may fit anywhere."""
        among = None if app.app_id in self._round_fresh else self._round_nodes
        try:
            chosen = self.policy.choose_node(app.view, offered.view, self._view, among)
        except Exception as e:          # noqa: BLE001 - the policy's code
            raise self._error("choose_node", e) from None
        if chosen is offered.view:      # the offer found the app fits there
            return offered
        node = chosen._node if isinstance(chosen, NodeView) else None
        if node is None or node is not self.cluster.nodes[node.index]:
            raise PolicyError(self._label, "choose_node", f"returned {chosen!r} for app {app.app_id}, "
                              "not a node of this cluster")
        if not (node.alive and app.eligible[node.index] and self.cluster.fits(app, node)):
            raise PolicyError(self._label, "choose_node", f"returned node {node.name} for app {app.app_id}, "
                              "where its task does not fit (refused: nothing was allocated)")
        return node

    def _offer_per_node(self, node: NodeState, order: list, placed: list) -> None:
        """Per-machine keys: pick the least node_key among eligible apps that fit, repeatedly.
        The apps that fit only dwindle as the offer goes on (the node has less left, and
        no app is added): each round filters the last round's."""
        cluster, m = self.cluster, node.index
        if order is self._order:
            fitting = self._index.fitting(m, node.free)
        else:
            fitting = [e[3] for e in order if e[3].eligible[m] and cluster.fits(e[3], node)]
        node_key, view = self.policy.node_key, node.view

        def order_of(a):
            try:
                k = node_key(a.view, view, self._view)
            except Exception as e:      # noqa: BLE001 - the policy's code
                raise self._error("node_key", e) from None
            return self._checked_key(k, "node_key", a), a.submit, a.app_id

        while fitting:
            best = min(fitting, key=order_of)
            placed.append(self._place(best, node, order))
            fitting = [a for a in fitting if a.pending > 0 and cluster.fits(a, node)]

    def _place(self, app: AppState, node: NodeState, order: list) -> Container:
        if self._native:
            return compiled("_offer").place(self, app, node, order)
        container = self.cluster.allocate(app, node)
        main = self._order
        if order is not main:
            del order[bisect_left(order, app.entry)]
        i = bisect_left(main, app.entry)            # pending > 0: the app is in the order
        app.pending -= 1
        self._set_key(app)
        if app.pending > 0:
            _reposition(main, i, app.entry)
            if order is not main:
                insort(order, app.entry)
        else:
            del main[i]
            self._index.set_pending(app.app_id, False)
        return container

    # ----- the sorted order ----------------------------------------------------

    def _set_key(self, app: AppState) -> None:
        app.key = key = served_key(app.running, app.unit) if self._unit_key else self._key(app)
        app.entry = (key, app.submit, app.app_id, app)

    # ----- calling the policy ----------------------------------------------------

    def _error(self, method: str, e: Exception) -> PolicyError:
        if isinstance(e, PolicyError):
            return e
        return PolicyError(self._label, method, f"raised {type(e).__name__}: {e}")

    def _call(self, method, name: str, *args):
        try:
            return method(*args)
        except Exception as e:          # noqa: BLE001 - the policy's code
            raise self._error(name, e) from None

    def _unit(self, app: AppState) -> float:
        """u_i from the policy, checked once per computation: a number >= 0 (inf allowed),
        so that key = n_i * u_i only grows as the app is served."""
        u = self._call(self.policy.unit, "unit", app.view, self._view)
        if not (type(u) is float or (isinstance(u, Real) and not isinstance(u, bool))) or not u >= 0:
            raise PolicyError(self._label, "unit", f"returned {u!r} for app {app.app_id}: "
                              "a unit must be a number >= 0")
        return u

    def _key(self, app: AppState) -> float:
        return self._checked_key(self._call(self.policy.key, "key", app.view), "key", app)

    def _checked_key(self, k, method: str, app: AppState) -> float:
        """A key or node key as the policy returned it, if it is a number and not NaN."""
        if not (type(k) is float or isinstance(k, Real)) or k != k:
            raise PolicyError(self._label, method, f"returned {k!r} for app {app.app_id}: "
                              "a key must be a number, not NaN")
        return k

    def _enter(self, app: AppState) -> None:
        self._set_key(app)
        insort(self._order, app.entry)
        self._index.set_pending(app.app_id, True)

    def _leave(self, app: AppState) -> None:
        i = bisect_left(self._order, app.entry)
        if i < len(self._order) and self._order[i][3] is app:
            self._order.pop(i)
            self._index.set_pending(app.app_id, False)

    def _rekey(self, app: AppState) -> None:
        """The app's running count changed: recompute its key and its place in the order."""
        if app.pending > 0:                 # in the order: move it to its new place
            i = bisect_left(self._order, app.entry)
            self._set_key(app)
            _reposition(self._order, i, app.entry)
        else:
            self._set_key(app)

    def _rekey_all(self) -> None:
        """Nodes joined or left: every unit (h_i, totals) may have changed."""
        for app in self.cluster.apps.values():
            app.unit = self._unit(app)
            self._set_key(app)
            self._index.set_eligible(app.app_id, app.eligible)
        self._order = sorted(a.entry for a in self.cluster.apps.values() if a.pending > 0)
        for entry in self._order:
            self._index.set_pending(entry[3].app_id, True)


def any_fits(apps: Iterable[AppState], m: int, free) -> bool:
    """Does a task of one of ``apps`` that may use node m fit ``free``?"""
    for a in apps:
        if a.pending > 0 and a.eligible[m]:
            for r, d in enumerate(a.demand):
                if d > free[r] + EPS:
                    break
            else:
                return True
    return False


def _reposition(order: list, i: int, entry: tuple) -> None:
    """Put ``entry`` in the sorted ``order`` in place of the entry at ``i`` (its app's old one).

    An entry still between its neighbours keeps the place (the usual case: the key moves
    by one unit and the app stays between the same two), saving a del + insort."""
    if (i + 1 < len(order) and order[i + 1] < entry) or (i > 0 and entry < order[i - 1]):
        del order[i]
        insort(order, entry)
    else:
        order[i] = entry
