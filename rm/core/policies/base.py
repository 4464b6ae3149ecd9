"""What a policy is: an ordering key over apps, and optionally a placement rule.

A policy answers "of the apps that could use this node now, whom do I serve
first?" — the app with the lowest key, ties broken on (submit time, app id) —
and, for best-fit policies, "which node fits this task best?".  It reads the
cluster through read-only views (``rayrm.rm.core.views``) and never writes to it
(docs/design.md, principle 2).  This class is the public API (``from rayrm import
Policy``); docs/policies.md states the contract, and every built-in policy is
written against it alone.

Most policies' keys grow by a fixed amount per running task, key_i = n_i * u_i,
so ``unit`` returns u_i and the scheduler keeps key = running * unit; ``unit`` is
recomputed whenever the cluster changes (nodes join or leave).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.shares import dominant_share, served_key

if TYPE_CHECKING:
    from rayrm.rm.core.model import NodeSpec
    from rayrm.rm.core.views import AppView, ClusterView, NodeView


class Policy:
    """Subclass this and override ``unit`` (and ``key``, ``node_key``, ``choose_node``,
    ``prepare`` where needed); docs/policies.md says when each is called."""

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
        """A node's capacity in ``virtual_dims`` (one number each)."""
        return ()

    def virtual_demand(self, app) -> tuple:
        """One task's demand in ``virtual_dims``; ``app`` is the submitted ``AppSpec``."""
        return ()

    def unit(self, app: "AppView", cluster: "ClusterView") -> float:
        """Increase of the app's key per running task: a number >= 0 (inf allowed)."""
        raise NotImplementedError

    def key(self, app: "AppView") -> float:
        """The app's key, lowest served first; by default n_i * u_i, which the scheduler
        computes inline when this method is not overridden (``shares.served_key``)."""
        return served_key(app.running, app.unit)

    def node_key(self, app: "AppView", node: "NodeView", cluster: "ClusterView") -> float:
        """Key of ``app`` for an offer of ``node`` (only for per-node policies)."""
        raise NotImplementedError

    def new_round(self) -> None:
        """A ``schedule()`` begins: until it ends resources are only taken (best-fit policies
        may keep what they learnt within it)."""

    def choose_node(self, app: "AppView", offered: "NodeView", cluster: "ClusterView",
                    among: "list[int] | None" = None) -> "NodeView":
        """The node to place the app's next task on (only for best-fit policies).

        ``among``: node indexes, ascending, outside which the app's task fits nowhere (the
        scheduler knows this from its invariant), or None: any node may fit.  The node
        returned must be alive, eligible for the app and have room, or the scheduler
        refuses it (``PolicyError``)."""
        return offered

    def __repr__(self) -> str:
        return f"<policy {self.name}>"


class PolicyError(InputError):
    """A policy misbehaved: it could not be loaded, or one of its methods raised or
    answered something the scheduler cannot use.  One line naming the plugin, the
    method and what was wrong (exit status 2 at the command line)."""

    def __init__(self, plugin: str, method: str, what: str, line: str | None = None):
        self.plugin, self.method, self.what, self.line = plugin, method, what, line
        super().__init__(line or f"policy {plugin}: {method}: {what}")

    def __reduce__(self):
        return PolicyError, (self.plugin, self.method, self.what, self.line)


def policy_label(policy: Policy) -> str:
    """How an error names a policy object: its ``name`` and where its class lives."""
    cls = type(policy)
    where = f"{cls.__module__}:{cls.__qualname__}"
    name = getattr(policy, "name", "?")
    return where if name in ("?", None, "") else f"{name} ({where})"


def resource_index(dims: tuple[str, ...], wanted: str) -> int:
    """Index of a resource dimension by name; ``memory`` also finds ``memory_mb`` or ``mem``."""
    if wanted in dims:
        return dims.index(wanted)
    for i, d in enumerate(dims):
        if d.startswith(wanted[:3]):
            return i
    raise KeyError(f"no resource dimension '{wanted}' among {', '.join(dims)}")


def dominant_share_per_task(app: "AppView", cluster: "ClusterView") -> float:
    """max_r d_ir / total_r: one task's share of its dominant resource (DRF, DRFH eq. 2)."""
    return dominant_share(app.demand, cluster.total)
