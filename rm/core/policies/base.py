"""What a policy is: an ordering key over apps, and optionally a placement rule.

A policy answers "of the apps that could use this node now, whom do I serve
first?" — the app with the lowest key, ties broken on (submit time, app id) —
and, for best-fit policies, "which node fits this task best?".  It reads the
cluster's accounting and never writes to it (docs/design.md, principle 2).

Most policies' keys grow by a fixed amount per running task, key_i = n_i * u_i,
so ``unit`` returns u_i and the scheduler keeps key = running * unit; ``unit`` is
recomputed whenever the cluster changes (nodes join or leave).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rayrm.rm.core.shares import dominant_share

if TYPE_CHECKING:
    from rayrm.rm.core.cluster import AppState, ClusterState, NodeState
    from rayrm.rm.core.model import NodeSpec


class Policy:
    name = "?"
    #: the key depends on the offered node (per-machine DRF): no global order exists
    per_node = False
    #: the policy picks the node for the chosen app (DRFH best fit)
    best_fit = False
    #: extra accounting dimensions the policy needs (slots)
    virtual_dims: tuple[str, ...] = ()

    def prepare(self, nodes: "list[NodeSpec]", dims: tuple[str, ...]) -> None:
        """Called once with the initial cluster, before any app arrives."""

    def virtual_capacity(self, node: "NodeSpec") -> tuple:
        return ()

    def virtual_demand(self, app) -> tuple:
        return ()

    def unit(self, app: "AppState", cluster: "ClusterState") -> float:
        """Increase of the app's key per running task."""
        raise NotImplementedError

    def key(self, app: "AppState") -> float:
        return app.running * app.unit

    def node_key(self, app: "AppState", node: "NodeState", cluster: "ClusterState") -> float:
        """Key of ``app`` for an offer of ``node`` (only for per-node policies)."""
        raise NotImplementedError

    def new_round(self) -> None:
        """A ``schedule()`` begins: until it ends resources are only taken (best-fit policies
        may keep what they learnt within it)."""

    def choose_node(self, app: "AppState", offered: "NodeState", cluster: "ClusterState",
                    among: "list[int] | None" = None) -> "NodeState":
        """The node to place the app's next task on (only for best-fit policies).

        ``among``: node indexes, ascending, outside which the app's task fits nowhere (the
        scheduler knows this from its invariant), or None: any node may fit."""
        return offered

    def __repr__(self) -> str:
        return f"<policy {self.name}>"


def resource_index(dims: tuple[str, ...], wanted: str) -> int:
    """Index of a resource dimension by name; ``memory`` also finds ``memory_mb`` or ``mem``."""
    if wanted in dims:
        return dims.index(wanted)
    for i, d in enumerate(dims):
        if d.startswith(wanted[:3]):
            return i
    raise KeyError(f"no resource dimension '{wanted}' among {', '.join(dims)}")


def dominant_share_per_task(app: "AppState", cluster: "ClusterState") -> float:
    """max_r d_ir / total_r: one task's share of its dominant resource (DRF, DRFH eq. 2)."""
    return dominant_share(app.demand, cluster.total)
