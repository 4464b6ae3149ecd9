"""What a policy reads: read-only views of an app, a node and the cluster.

A policy is handed these views, never the accounting itself (docs/policies.md).  Each
view holds the one state object it reads and answers through properties without
setters, so ``app.running = 0`` inside a policy raises ``AttributeError``; the
mutable containers inside the state come out immutable (a node's free vector as a
tuple, an app's per-node counts as a read-only mapping, the free matrix as a
read-only array).  A view of an app or a node is made once, with its state, so
reading through it costs one attribute lookup more, not an allocation.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

from rayrm.rm.core.model import EPS

if TYPE_CHECKING:
    import numpy as np

    from rayrm.rm.core.model import AppSpec, NodeSpec


class AppView:
    """One app as a policy sees it (tsf-paper §V-A names: h_i, h_i^c, n_i, w_i)."""

    __slots__ = ("_app",)

    def __init__(self, app):             # a rayrm.rm.core.cluster.AppState
        self._app = app

    @property
    def app_id(self) -> str:
        return self._app.app_id

    @property
    def spec(self) -> "AppSpec":
        """The app as submitted (frozen): ``num_tasks``, ``constraint``, ``demand`` by name."""
        return self._app.spec

    @property
    def demand(self) -> tuple[float, ...]:
        """d_i, one task's demand in the order of ``ClusterView.dims`` (virtual dims last)."""
        return self._app.demand

    @property
    def weight(self) -> float:
        """w_i (> 0)."""
        return self._app.weight

    @property
    def submit(self) -> float:
        """Trace time the app arrived."""
        return self._app.submit

    @property
    def eligible(self) -> bytes:
        """``eligible[m]`` is 1 when node m matches the constraint and holds one task."""
        return self._app.eligible

    @property
    def eligible_count(self) -> int:
        return self._app.eligible_count

    @property
    def h(self) -> float:
        """h_i: tasks the whole live cluster holds with constraints removed (TSF)."""
        return self._app.h

    @property
    def h_c(self) -> float:
        """h_i^c: tasks the app's eligible nodes hold (constrained CDRF)."""
        return self._app.h_c

    @property
    def running(self) -> int:
        """n_i, the app's running tasks."""
        return self._app.running

    @property
    def pending(self) -> int:
        """Tasks asked for and not placed yet."""
        return self._app.pending

    @property
    def unit(self) -> float:
        """What the policy's ``unit`` last returned for this app."""
        return self._app.unit

    @property
    def on_node(self) -> Mapping[int, int]:
        """Node index -> the app's running tasks there (kept for per-node policies only)."""
        return MappingProxyType(self._app.on_node)

    def running_on(self, node_index: int) -> int:
        """n_im, the app's running tasks on node m (per-node policies only)."""
        return self._app.on_node.get(node_index, 0)

    def __repr__(self) -> str:
        return f"AppView({self.app_id}, running={self.running}, pending={self.pending})"


class NodeView:
    """One node as a policy sees it."""

    __slots__ = ("_node",)

    def __init__(self, node):            # a rayrm.rm.core.cluster.NodeState
        self._node = node

    @property
    def index(self) -> int:
        """The node's position in ``ClusterView.nodes`` (stable for the run)."""
        return self._node.index

    @property
    def name(self) -> str:
        return self._node.name

    @property
    def spec(self) -> "NodeSpec":
        return self._node.spec

    @property
    def attributes(self) -> Mapping:
        return MappingProxyType(self._node.spec.attributes)

    @property
    def capacity(self) -> tuple[float, ...]:
        """C_m in the order of ``ClusterView.dims`` (virtual dims last)."""
        return self._node.capacity

    @property
    def free(self) -> tuple[float, ...]:
        """What is left of C_m now (a copy)."""
        return tuple(self._node.free)

    @property
    def alive(self) -> bool:
        return self._node.alive

    def __repr__(self) -> str:
        return f"NodeView({self.name}, free={self.free})"


class ClusterView:
    """The cluster as a policy sees it: totals, nodes, apps, and the fit test."""

    __slots__ = ("_cluster", "_nodes")

    def __init__(self, cluster):         # a rayrm.rm.core.cluster.ClusterState
        self._cluster = cluster
        self._nodes: tuple[NodeView, ...] = ()

    @property
    def dims(self) -> tuple[str, ...]:
        """Resource names, the order of every vector."""
        return self._cluster.dims

    @property
    def virtual_dims(self) -> tuple[str, ...]:
        return self._cluster.virtual_dims

    @property
    def total(self) -> tuple[float, ...]:
        """Σ_m C_m over live nodes (real dims)."""
        return self._cluster.total

    @property
    def virtual_total(self) -> tuple[float, ...]:
        return self._cluster.virtual_total

    @property
    def nodes(self) -> tuple[NodeView, ...]:
        """Every node ever joined, by index (a lost one has ``alive`` False)."""
        states = self._cluster.nodes
        if len(self._nodes) != len(states):
            self._nodes = tuple(n.view for n in states)
        return self._nodes

    def node(self, name: str) -> NodeView:
        return self._cluster.nodes[self._cluster.node_index[name]].view

    def app(self, app_id: str) -> AppView:
        return self._cluster.apps[app_id].view

    def apps(self) -> list[AppView]:
        """Every app registered and not finished."""
        return [a.view for a in self._cluster.apps.values()]

    def fits(self, app: AppView, node: NodeView) -> bool:
        """Does one more task of ``app`` fit in ``node``'s free resources (within 1e-9)?"""
        free = node._node.free
        for i, d in enumerate(app._app.demand):
            if d > free[i] + EPS:
                return False
        return True

    def h_unconstrained(self, demand: tuple[float, ...]) -> float:
        """Σ_m floor(min_{r: d_r>0} C_mr / d_r) over live nodes (tsf-paper §V-A)."""
        return self._cluster.h_unconstrained(demand)

    def free_matrix(self) -> "np.ndarray":
        """Every node's free vector as a read-only nodes x dims array (best-fit policies only:
        the scheduler keeps it when the policy sets ``best_fit``)."""
        view = self._cluster.free_matrix().view()
        view.flags.writeable = False
        return view
