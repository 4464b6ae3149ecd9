"""An offline instance as a policy sees it: the policy asked for its share of one task.

The offline solver (``rm/offline/filling.py``) and the audit take any policy spec, plugins
included, and ask the policy itself — ``Policy.shares`` over ``Holders`` made from the
same read-only views (``rayrm.rm.core.views``) the scheduler hands it — what one task adds
to each user's share.  The instance is divisible (tsf-paper §V-B), so the views carry
h_i and h_i^c not floored; every user runs nothing yet (n_i = 0).
"""

from __future__ import annotations

import inspect

import numpy as np

from rayrm.rm.core.constraints import ANY_NODE
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import AppSpec, Resources
from rayrm.rm.core.policies import Policy, make_policy
from rayrm.rm.core.policies.plugins import resolve_policy
from rayrm.rm.core.shares import Holders, h_tasks
from rayrm.rm.core.views import AppView, ClusterView

#: the offline names of policies whose online name says more (placement has no offline form)
ALIASES = {"drfh": "drfh-ff", "cmmf": "cmmf-cpu"}


def offline_policy(policy: "str | Policy", resource: str | None = None) -> Policy:
    """The policy a spec names, made for the offline model; ``resource`` is the option of
    a policy that shares one resource (cmmf).  A policy that orders by its own ``key`` or
    accounts virtual resources has no max-min form: ``InputError`` naming it."""
    if isinstance(policy, Policy):
        made, text = policy, policy.name
    else:
        text = str(policy)
        spec = ALIASES.get(text, text)
        takes = "resource" in inspect.signature(resolve_policy(spec).make).parameters
        made = make_policy(spec, **({"resource": resource} if resource and takes else {}))
    if type(made).key is not Policy.key or made.virtual_dims:
        why = "orders by its own key" if made.virtual_dims == () else "accounts virtual resources"
        raise InputError(f"policy '{text}' has no offline (max-min) form: it {why}, not by a share "
                         f"that grows with its tasks", field="policy")
    return made


class _App:
    """One user of an offline instance with the attributes an ``AppView`` reads."""

    def __init__(self, problem, i: int, h: float, h_c: float):
        dims = problem.dims
        self.app_id = problem.app_ids[i]
        self.demand = tuple(float(x) for x in problem.demand[i])
        self.weight = float(problem.weight[i])
        limit = problem.limit[i]
        self.spec = AppSpec(self.app_id, Resources(dict(zip(dims, self.demand))),
                            int(limit) if np.isfinite(limit) else 0, self.weight, 0.0, ANY_NODE)
        self.submit = 0.0
        self.eligible = problem.eligible[i].astype(np.uint8).tobytes()
        self.eligible_count = int(problem.eligible[i].sum())
        self.h, self.h_c = float(h), float(h_c)
        self.running = self.pending = 0
        self.unit = 0.0
        self.on_node: dict = {}


class _Cluster:
    """An offline instance with the attributes a ``ClusterView`` reads (no live nodes)."""

    def __init__(self, problem):
        self.problem = problem
        self.dims = problem.dims
        self.virtual_dims: tuple = ()
        self.total = tuple(float(x) for x in problem.total)
        self.virtual_total: tuple = ()
        self.nodes: list = []
        self.apps: dict = {}

    def h_unconstrained(self, demand) -> float:
        return float(h_tasks(self.problem.capacity, [demand], divisible=True)[0])


def holders(problem) -> Holders:
    """Every user of ``problem`` as ``Holders`` made from views (tsf-paper §V-B: divisible)."""
    h, h_c = problem.h, problem.h_c
    cluster = _Cluster(problem)
    apps = [AppView(_App(problem, i, h[i], h_c[i])) for i in range(len(problem.app_ids))]
    return Holders.of_views(apps, ClusterView(cluster))


def units(policy: Policy, problem) -> np.ndarray:
    """u_i: the policy's share of one task of each user of ``problem``, weights included."""
    return np.asarray(policy.shares(1.0, holders(problem)), dtype=float)
