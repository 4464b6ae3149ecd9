"""ClusterState: incremental accounting of nodes, apps and containers.

A narrow interface in the manner of the Mesos DRF sorter: add/remove a node,
add/remove an app, allocate/release a container.  Policies read from it and never
write to it.  Vectors are tuples in the order of ``dims``; a policy may append
*virtual* dimensions (the slot scheduler accounts slots this way) that take part
in fit checks but not in shares.

Cached quantities (tsf-paper §V-A):

* ``h_unconstrained(demand)`` = Σ_m floor(min_{r: d_r>0} C_mr / d_r) over live nodes,
  cached per demand vector and computed per node *type* (identical capacity), so a
  1,000-node cluster of ten types costs ten terms;
* ``h_constrained(app)`` = the same sum over the nodes the app may use (CDRF's h^c).

Both caches are dropped when a node joins or leaves.  An arriving app's eligibility, its
count and h^c are cached per (constraint, demand), and built from a match per constraint
(the AND of a match per clause, each clause tested once per distinct value of its
attribute) and a fit per demand (computed once per distinct capacity vector): a trace's
thousands of jobs repeat a few hundred constraints and demands over a few node kinds.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Callable, Sequence

import numpy as np

from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.model import EPS, AppSpec, Container, NodeSpec
from rayrm.rm.core.native import compiled, core_name
from rayrm.rm.core.shares import h_tasks, tasks_per_machine
from rayrm.rm.core.views import AppView, ClusterView, NodeView


#: the value of an attribute a node does not have (``ClusterState._attribute_values``)
_ABSENT = object()


class NodeState:
    """A node's accounting: capacity and free vectors, liveness, its containers.

    ``departed``: it left the cluster for good (a trace's leave), as opposed to a node lost
    to a fault, which comes back when its NM restarts; an app is rejected only when no
    node that has not departed could run it."""

    __slots__ = ("index", "spec", "name", "capacity", "free", "alive", "departed", "containers", "view")

    def __init__(self, index: int, spec: NodeSpec, capacity: tuple[float, ...]):
        self.index = index
        self.spec = spec
        self.name = spec.name
        self.capacity = capacity
        self.free = list(capacity)
        self.alive = True
        self.departed = False
        self.containers: set[int] = set()
        self.view = NodeView(self)          # what a policy reads (rm/core/views.py)

    @property
    def attributes(self):
        return self.spec.attributes


class AppState:
    """An app's accounting: demand, eligibility per node, h and h^c, running and pending.

    ``eligible[m]`` is 1 when the app's constraint admits node m *and* one task
    fits m's capacity (immutable bytes).  ``on_node`` (node index -> its running tasks
    there) is kept only when the cluster counts per node.  ``key`` and ``unit`` belong to the scheduler's
    policy; they live here only so the hot path reads one object.  ``view`` is what a
    policy reads (rm/core/views.py); the scheduler drops it when the app finishes.
    """

    __slots__ = ("index", "spec", "app_id", "demand", "weight", "submit", "eligible",
                 "eligible_count", "h", "h_c", "running", "pending", "on_node",
                 "unit", "key", "entry", "view")

    def __init__(self, index: int, spec: AppSpec, demand: tuple[float, ...]):
        self.index = index
        self.spec = spec
        self.app_id = spec.app_id
        self.demand = demand
        self.weight = spec.weight
        self.submit = spec.submit
        self.eligible = b""
        self.eligible_count = 0
        self.h = 0.0
        self.h_c = 0.0
        self.running = 0
        self.pending = 0
        self.on_node: dict[int, int] = {}
        self.unit = 0.0
        self.key = 0.0
        self.entry = None
        self.view = AppView(self)

    def __repr__(self) -> str:
        return f"AppState({self.app_id}, running={self.running}, pending={self.pending})"


class ClusterState:
    """Nodes, apps and containers, with free vectors and running counts kept incrementally."""

    def __init__(self, dims: Sequence[str], virtual_dims: Sequence[str] = (),
                 virtual_capacity: Callable[[NodeSpec], tuple] | None = None,
                 virtual_demand: Callable[[AppSpec], tuple] | None = None,
                 track_free: bool = False, count_per_node: bool = True):
        self.dims = tuple(dims)
        #: keep each app's running tasks per node (``AppState.on_node``): only per-machine
        #: keys read it, and it costs two dict updates a container
        self.count_per_node = count_per_node
        self.virtual_dims = tuple(virtual_dims)
        self._virtual_capacity = virtual_capacity
        self._virtual_demand = virtual_demand
        self.nodes: list[NodeState] = []
        self.node_index: dict[str, int] = {}
        self.apps: dict[str, AppState] = {}
        self.containers: dict[int, Container] = {}
        #: container id -> (its app, its node)
        self.holders: dict[int, tuple[AppState, NodeState]] = {}
        self._next_container = itertools.count(1)
        self._app_seq = itertools.count()
        self.total = tuple(0.0 for _ in self.dims)
        self.virtual_total = tuple(0.0 for _ in self.virtual_dims)
        self._types: Counter = Counter()          # real capacity tuple -> live node count
        self._h_cache: dict[tuple, float] = {}
        # constraint -> node matches (keyed by the object, equal when its clauses are: its
        # text would be built once per job, as each job's constraint is parsed on its own)
        self._match_cache: dict[Constraint, np.ndarray] = {}
        self._clause_cache: dict = {}                    # Clause -> node matches
        # attribute -> (its distinct values on the nodes, each node's value's number)
        self._attr_cache: dict[str, tuple[list, np.ndarray]] = {}
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None  # (capacity, alive)
        # (distinct capacity vectors, each node's vector's number), rebuilt with _arrays
        self._kinds: tuple[np.ndarray, np.ndarray] | None = None
        # (constraint, demand) -> (eligible bytes, count, h^c); dropped with _arrays:
        # a trace's jobs repeat a few hundred shapes, and each costs numpy work over every node
        self._elig_cache: dict[tuple, tuple[bytes, int, float]] = {}
        self._demand_cache: dict[tuple, tuple[np.ndarray, np.ndarray, bool]] = {}
        # under the native core, the AND, count and sum of ``_eligible`` in one C loop
        self._native = core_name() == "native"
        # nodes x dims copy of every node's free vector, kept only when asked for (best fit
        # compares all nodes at once; other policies never read it), and the nodes whose
        # row is out of date: rows are copied when read, not at every allocate and release
        self._free_matrix: np.ndarray | None = (
            np.zeros((0, len(self.dims) + len(self.virtual_dims))) if track_free else None)
        self._free_stale: set[int] = set()
        self.view = ClusterView(self)       # what a policy reads (rm/core/views.py)

    # ----- vectors -------------------------------------------------------------

    def node_vector(self, spec: NodeSpec) -> tuple[float, ...]:
        real = spec.capacity.vector(self.dims)
        return real + tuple(self._virtual_capacity(spec)) if self.virtual_dims else real

    def demand_vector(self, spec: AppSpec) -> tuple[float, ...]:
        real = spec.demand.vector(self.dims)
        return real + tuple(self._virtual_demand(spec)) if self.virtual_dims else real

    # ----- nodes ---------------------------------------------------------------

    def add_node(self, spec: NodeSpec) -> NodeState:
        """A node joins (or a lost node comes back under its name, empty)."""
        return self.add_nodes([spec])[0]

    def add_nodes(self, specs: list[NodeSpec]) -> list[NodeState]:
        """Nodes join together: eligibility and h of every app are recomputed once for the
        batch, not once per node (an NM host of 1,000 NMs registering after a restart)."""
        added = [self._join(spec) for spec in specs]
        if added:
            self._refresh()
        return added

    def _join(self, spec: NodeSpec) -> NodeState:
        cap = self.node_vector(spec)
        idx = self.node_index.get(spec.name)
        if idx is not None:
            node = self.nodes[idx]
            if node.alive:
                raise ValueError(f"node {spec.name} is already registered")
            node.spec, node.capacity, node.free, node.alive = spec, cap, list(cap), True
            node.departed = False
        else:
            node = NodeState(len(self.nodes), spec, cap)
            self.nodes.append(node)
            self.node_index[spec.name] = node.index
        self._match_cache.clear()
        self._clause_cache.clear()
        self._attr_cache.clear()
        self._arrays = None
        self._elig_cache.clear()
        self._demand_cache.clear()
        if self._free_matrix is not None:
            if node.index == len(self._free_matrix):
                self._free_matrix = np.vstack([self._free_matrix, [node.free]])
            self._free_stale.add(node.index)
        self._count_type(node, +1)
        return node

    def remove_node(self, name: str) -> list[Container]:
        """A node is lost: it leaves the cluster and its containers are released and returned."""
        return self.remove_nodes([name])

    def remove_nodes(self, names: list[str], departed: bool = False) -> list[Container]:
        """Nodes are lost together (``departed``: they left for good): they leave and their
        containers (returned, node by node) are released; eligibility and h of every app are
        recomputed once for the batch."""
        lost_all, removed = [], False
        if departed:
            self.depart(names)
        for name in names:
            node = self.nodes[self.node_index[name]]
            if not node.alive:
                continue
            lost = [self.containers[c] for c in sorted(node.containers)]
            for c in lost:
                self.release(c.container_id)
            node.alive, removed = False, True
            self._count_type(node, -1)
            lost_all += lost
        if not removed:
            return []
        self._arrays = None
        self._elig_cache.clear()
        self._demand_cache.clear()
        self._refresh()
        return lost_all

    def depart(self, names) -> None:
        """These nodes, live or lost, left the cluster for good (``NodeState.departed``)."""
        for name in names:
            self.nodes[self.node_index[name]].departed = True

    def _count_type(self, node: NodeState, sign: int) -> None:
        real = node.capacity[:len(self.dims)]
        self._types[real] += sign
        if self._types[real] == 0:
            del self._types[real]
        self.total = tuple(t + sign * c for t, c in zip(self.total, real))
        virtual = node.capacity[len(self.dims):]
        self.virtual_total = tuple(t + sign * c for t, c in zip(self.virtual_total, virtual))

    def free_matrix(self) -> np.ndarray:
        """Every node's free vector as a nodes x dims array (a ClusterState made with
        ``track_free``; read-only)."""
        stale = self._free_stale
        if stale:
            rows = list(stale)
            nodes = self.nodes
            self._free_matrix[rows] = [nodes[m].free for m in rows]
            stale.clear()
        return self._free_matrix

    # ----- eligibility and h ---------------------------------------------------

    def _node_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Capacity matrix (nodes x dims, virtual included) and live mask, rebuilt on change."""
        if self._arrays is None:
            width = len(self.dims) + len(self.virtual_dims)
            cap = np.array([n.capacity for n in self.nodes], dtype=float).reshape(len(self.nodes), width)
            alive = np.array([n.alive for n in self.nodes], dtype=bool)
            self._arrays = (cap, alive)
            kinds, kind_of = np.unique(cap, axis=0, return_inverse=True)
            self._kinds = (kinds, kind_of.reshape(-1))
        return self._arrays

    def constraint_matches(self, constraint: Constraint) -> np.ndarray:
        """Node-by-node match of a constraint on attributes and names (capacity ignored).

        Cached per constraint, and built clause by clause from a per-clause cache: a
        Google-style trace has thousands of distinct constraints made of a few dozen
        clauses, and the match of a conjunction is the AND of its clauses' matches.
        """
        hit = self._match_cache.get(constraint)
        if hit is None:
            for clause in constraint.clauses:
                m = self._clause_cache.get(clause)
                if m is None:
                    m = self._clause_cache[clause] = self._clause_matches(clause)
                hit = m if hit is None else hit & m
            if hit is None:
                hit = np.ones(len(self.nodes), dtype=bool)
            self._match_cache[constraint] = hit
        return hit

    def _clause_matches(self, clause) -> np.ndarray:
        """Node-by-node match of one clause, tested once per distinct value of its attribute
        (a clause reads nothing of a node but that value, or the name for ``node``)."""
        if clause.attr == "node":
            return np.fromiter((clause.matches(n.name, n.attributes) for n in self.nodes),
                               dtype=bool, count=len(self.nodes))
        values, value_of = self._attribute_values(clause.attr)
        attr = clause.attr
        per_value = np.array([clause.matches("", {} if v is _ABSENT else {attr: v}) for v in values],
                             dtype=bool)
        return per_value[value_of]

    def _attribute_values(self, attr: str) -> tuple[list, np.ndarray]:
        """The distinct values of ``attr`` on the nodes (``_ABSENT`` for a node without it) and
        each node's value's place among them.  Values are told apart by type and repr, so
        two values that any clause could tell apart (1 and True, 1 and "1") stay apart."""
        hit = self._attr_cache.get(attr)
        if hit is None:
            place: dict[tuple, int] = {}
            values: list = []
            value_of = np.empty(len(self.nodes), dtype=np.intp)
            for m, node in enumerate(self.nodes):
                v = node.attributes.get(attr, _ABSENT)
                k = place.setdefault((type(v), repr(v)), len(values))
                if k == len(values):
                    values.append(v)
                value_of[m] = k
            hit = self._attr_cache[attr] = (values, value_of)
        return hit

    def _eligible(self, constraint: Constraint, demand: tuple[float, ...]) -> tuple[bytes, int, float]:
        """(eligible, its count, h^c): eligible[m] = 1 for the live nodes m whose attributes
        satisfy the constraint and whose capacity holds one task, and
        h^c = Σ_{m eligible} floor(min_{r: d_r>0} C_mr / d_r)  (CDRF's h_i^c, tsf-paper §V-A)."""
        match = self.constraint_matches(constraint)
        fits, per, exact = self._per_demand(demand)
        if self._native and exact:
            # summed in node order, not numpy's pairwise order: the same float, as every
            # term and partial sum is an integer below 2**52 (``exact``)
            return compiled("_arrival").eligible(match.view(np.uint8), fits.view(np.uint8), per)
        mask = match & fits
        return mask.view(np.uint8).tobytes(), int(np.count_nonzero(mask)), float(per[mask].sum())

    def _per_demand(self, demand: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray, bool]:
        """(live nodes that hold one task of ``demand``, ``_tasks_per_node``, whether any sum
        of the latter is exact in floats: they are integers, and all of them add up to less
        than 2**52), cached per demand vector until a node joins or leaves (a trace repeats a
        few demand shapes)."""
        hit = self._demand_cache.get(demand)
        if hit is None:
            # computed once per distinct capacity vector (a cluster has a few node kinds),
            # then spread to the nodes: the same numbers, row for row
            _, alive = self._node_arrays()
            kinds, kind_of = self._kinds
            fits = (kinds + EPS >= np.asarray(demand)).all(axis=1)[kind_of] & alive
            k = len(self.dims)
            per = tasks_per_machine(kinds[:, :k], [demand[:k]])[0][kind_of]
            per = np.where(alive, per, 0.0)
            hit = self._demand_cache[demand] = (fits, per, bool(per.sum() < 2.0 ** 52))
        return hit

    def _tasks_per_node(self, demand: tuple[float, ...]) -> np.ndarray:
        """floor(min_{r: d_r>0} C_mr / d_r) for every node (0 for dead ones)."""
        return self._per_demand(demand)[1]

    def h_unconstrained(self, demand: tuple[float, ...]) -> float:
        """h_i: tasks of ``demand`` the whole live cluster holds with constraints removed.

        h_i = Σ_m floor(min_{r: d_ir>0} C_mr / d_ir)   (tsf-paper §V-A; indivisible).
        """
        real = demand[:len(self.dims)]
        h = self._h_cache.get(real)
        if h is None:
            types = self._types
            h = float(h_tasks(list(types), [real], count=list(types.values()))[0]) if types else 0.0
            self._h_cache[real] = h
        return h

    def h_constrained(self, app: AppState) -> float:
        """h_i^c: the same sum over only the nodes the app may use (constrained CDRF)."""
        elig = np.frombuffer(app.eligible, dtype=np.uint8).view(bool)
        return float(self._tasks_per_node(app.demand)[elig].sum())

    def _refresh(self) -> None:
        """After a node joins or leaves: eligibility, h and h^c of every app anew."""
        self._h_cache.clear()
        for app in self.apps.values():
            self._set_eligibility(app)

    def _set_eligibility(self, app: AppState) -> None:
        key = (app.spec.constraint, app.demand)
        hit = self._elig_cache.get(key)
        if hit is None:
            hit = self._elig_cache[key] = self._eligible(*key)
        app.eligible, app.eligible_count, app.h_c = hit
        app.h = self.h_unconstrained(app.demand)

    # ----- apps ----------------------------------------------------------------

    def rejection_reason(self, spec: AppSpec) -> str | None:
        """Why no node could ever run this app's tasks, or None if some node can.

        "Ever": over the nodes that have not left for good, live or lost — a node lost to a
        fault comes back when its NM restarts, and an app that only it can run waits for it.
        """
        unknown = sorted(k for k in spec.demand if k not in self.dims)
        if unknown:
            return f"demand names resource {', '.join(unknown)} that no node has"
        cap, _ = self._node_arrays()
        standing = np.fromiter((not n.departed for n in self.nodes), dtype=bool, count=len(self.nodes))
        matches = self.constraint_matches(spec.constraint) & standing
        matching = int(matches.sum())
        if not matching:
            return f"no node matches constraint '{spec.constraint}'"
        if not ((cap + EPS >= np.asarray(self.demand_vector(spec))).all(axis=1) & matches).any():
            shown = ";".join(f"{k}:{v:g}" for k, v in spec.demand.items())
            return f"demand {shown} exceeds every eligible node ({matching} match the constraint)"
        return None

    def add_app(self, spec: AppSpec) -> AppState:
        """Register an app; the caller checks ``rejection_reason`` first."""
        if spec.app_id in self.apps:
            raise ValueError(f"app {spec.app_id} is already registered")
        app = AppState(next(self._app_seq), spec, self.demand_vector(spec))
        self._set_eligibility(app)
        self.apps[spec.app_id] = app
        return app

    def remove_app(self, app_id: str) -> list[Container]:
        """An app leaves; its remaining containers are released and returned."""
        app = self.apps[app_id]
        left = [c for cid, c in self.containers.items() if self.holders[cid][0] is app]
        for c in left:
            self.release(c.container_id)
        del self.apps[app_id]
        return left

    # ----- containers ----------------------------------------------------------

    def fits(self, app: AppState, node: NodeState) -> bool:
        free = node.free
        for i, d in enumerate(app.demand):
            if d > free[i] + EPS:
                return False
        return True

    def allocate(self, app: AppState, node: NodeState, task: int = -1) -> Container:
        """Place one task of ``app`` on ``node``; the caller has checked fit and eligibility."""
        free = node.free
        for i, d in enumerate(app.demand):
            free[i] -= d
        cid = next(self._next_container)
        c = Container(cid, app.app_id, task, node.name)
        self.containers[cid] = c
        self.holders[cid] = (app, node)
        node.containers.add(cid)
        app.running += 1
        if self.count_per_node:
            app.on_node[node.index] = app.on_node.get(node.index, 0) + 1
        if self._free_matrix is not None:
            self._free_stale.add(node.index)
        return c

    def release(self, container_id: int) -> tuple[AppState, NodeState]:
        """A container ends (finished, killed or lost): its resources return to its node."""
        del self.containers[container_id]
        app, node = self.holders.pop(container_id)
        node.containers.discard(container_id)
        free, cap = node.free, node.capacity
        for i, d in enumerate(app.demand):
            # Snap back to capacity on the last release so drift never accumulates.
            free[i] = cap[i] if not node.containers else free[i] + d
        if self._free_matrix is not None:
            self._free_stale.add(node.index)
        app.running -= 1
        if self.count_per_node:
            k = app.on_node[node.index] - 1
            if k:
                app.on_node[node.index] = k
            else:
                del app.on_node[node.index]
        return app, node

    def app_of(self, container_id: int) -> AppState:
        return self.holders[container_id][0]
