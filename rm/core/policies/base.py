"""What a policy is: an ordering key over apps, and optionally a placement rule.

A policy answers "of the apps that could use this node now, whom do I serve
first?" — the app with the lowest key, ties broken on (submit time, app id) —
and, for best-fit policies, "which node fits this task best?".  It reads the
cluster through read-only views (``rayrm.rm.core.views``) and never writes to it
(docs/design.md, principle 2).  This class is the public API (``from rayrm import
Policy``); docs/policies.md states the contract, and every built-in policy is
written against it alone.

A policy states once what it ranks by: ``share``, a ``ShareKind`` of
``rayrm.rm.core.shares`` (task share, work slowdown, dominant share, a resource's share).
Its unit u_i is that share of one task, key_i = n_i * u_i, and every reader — the
scheduler, the offline solver, the audit, the UI — asks the policy (``shares``,
``share_kind``), never its name.  A plugin may instead define ``unit`` alone: its share is
then n_i * u_i under a kind named after it.  ``unit`` is recomputed whenever the cluster
changes (nodes join or leave).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.shares import Holders, ShareKind, served_key

if TYPE_CHECKING:
    from rayrm.rm.core.model import NodeSpec
    from rayrm.rm.core.views import AppView, ClusterView, NodeView


class Policy:
    """Subclass this and set ``share`` or override ``unit`` (and ``key``, ``node_key``,
    ``choose_node``, ``prepare`` where needed); docs/policies.md says when each is called."""

    name = "?"
    #: what the policy ranks by; None: its own share n_i * unit (a plugin's ``unit``), or,
    #: with ``unit`` returning 0 and ``key`` overridden, no share at all (FIFO)
    share: ShareKind | None = None
    #: offline, the cluster is pooled into one machine with its total capacity (DRF)
    pooled = False
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
        """Increase of the app's key per running task: a number >= 0 (inf allowed); by
        default ``share`` of one task (inf where it is undefined: h_i = 0)."""
        if self.share is None:
            raise NotImplementedError
        u = self.share.unit(Holders.one(app, cluster))
        return u if u == u else float("inf")

    def share_kind(self) -> ShareKind:
        """The kind of share the policy ranks by: ``share``, or one named after the policy
        whose formula is n_i * unit (``shares`` asks ``unit`` for each holder)."""
        if self.share is not None:
            return self.share
        return ShareKind(f"{self.name}_share", f"{self.name} share", "n_i * unit_i",
                         lambda n, holders: _own_share(n, holders, self), "sum")

    def shares(self, running, holders: Holders) -> np.ndarray:
        """The share of every holder at ``running`` tasks, vectorised; holders made from views
        (``Holders.of_views``) when the policy defines only ``unit``."""
        if self.share is not None:
            return np.asarray(self.share.of(running, holders), dtype=float)
        return _own_share(running, holders, self)

    def set_shares(self, running, holders: Holders, members, weight) -> np.ndarray:
        """The share of each set of holders (a queue: ``members[q]`` indexes ``holders``) at
        the set's weight, under the kind this policy ranks by (``ShareKind.set_share``)."""
        return self.share_kind().set_share(running, holders, members, weight)

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


def _own_share(running, holders: Holders, policy: "Policy | None" = None) -> np.ndarray:
    """n_i * unit_i, each unit asked of the policy through the holders' views."""
    if policy is None or not holders.apps:
        raise ValueError("a policy that defines only unit() is asked through views (Holders.of_views)")
    units = np.array([policy.unit(a, holders.cluster) for a in holders.apps], dtype=float)
    running = np.broadcast_to(np.asarray(running, dtype=float), units.shape)
    with np.errstate(invalid="ignore"):
        out = running * units
    return np.where(out == out, out, np.inf)
