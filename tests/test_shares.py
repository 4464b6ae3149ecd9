"""The one module of h_i, the resource roles and the share formulas (``rm/core/shares.py``).

The instance, worked by hand: nodes n1 <4 cpu, 8 GB> and n2 <2 cpu, 8 GB> (total <6, 16>);
apps a <1, 2>, b <2, 1> at weight 2, c <1, 4> on n2 only.

    h (floor min_r C_mr / d_r summed): a 4 + 2 = 6, b 2 + 1 = 3, c 2 + 2 = 4; h^c of c: 2
    one task's dominant share max_r d_r / total_r: a max(1/6, 2/16) = 1/6,
    b max(2/6, 1/16) = 1/3, c max(1/6, 4/16) = 1/4
"""

from __future__ import annotations

import numpy as np
import pytest

from rayrm.rm.core.cluster import ClusterState
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.core.shares import (CPU_SHARE, DOMINANT_SHARE, MEM_SHARE, TASK_SHARE, WORK_SLOWDOWN, Holders,
                                  h_tasks, resource_index, tasks_fit, tasks_per_machine)

KINDS = (TASK_SHARE, WORK_SLOWDOWN, DOMINANT_SHARE, CPU_SHARE, MEM_SHARE)


@pytest.fixture
def cluster():
    c = ClusterState(("cpu", "memory_mb"))
    c.add_nodes([NodeSpec("n1", Resources.parse("cpu:4;memory_mb:8")),
                 NodeSpec("n2", Resources.parse("cpu:2;memory_mb:8"))])
    c.add_app(AppSpec("a", Resources.parse("cpu:1;memory_mb:2"), 10))
    c.add_app(AppSpec("b", Resources.parse("cpu:2;memory_mb:1"), 10, weight=2.0))
    c.add_app(AppSpec("c", Resources.parse("cpu:1;memory_mb:4"), 10, constraint=Constraint.whitelist(["n2"])))
    return c


def test_h_is_one_sum_online_and_offline(cluster):
    assert [cluster.apps[x].h for x in "abc"] == [6.0, 3.0, 4.0]
    assert cluster.apps["c"].h_c == 2.0
    # divisible (offline): <1.5, 2> on n1 holds min(4/1.5, 8/2) = 8/3 tasks, floored 2
    cap, demand = [[4, 8], [2, 8]], [[1.5, 2]]
    assert tasks_per_machine(cap, demand).tolist() == [[2.0, 1.0]]
    np.testing.assert_allclose(h_tasks(cap, demand, divisible=True), [8 / 3 + 4 / 3])
    # with eligibility (n2 only) and machine counts (two of n1): 1 and 2·2 + 1 = 5
    assert h_tasks(cap, demand, eligible=[[False, True]]).tolist() == [1.0]
    assert h_tasks(cap, demand, count=[2, 1]).tolist() == [5.0]



@pytest.mark.parametrize("capacity, demand, divisible, fit", [
    ((4, 8), (1.5, 2), False, 2.0),          # min(4/1.5, 8/2) = 8/3, floored
    ((4, 8), (1.5, 2), True, 8 / 3),         # not floored (offline)
    ((8, 0.7), (1, 0.1), False, 7.0),        # 0.7/0.1 = 6.999999999999999: EPS floors it to 7
    ((2, 8), (0, 4), False, 2.0),            # cpu 0 is not a bound: 8/4
    ((2, 8), (0, 0), False, 0.0),            # a demand of nothing fits nowhere
    ((0, 8), (1, 1), False, 0.0),            # no cpu: 0/1
])
def test_one_machine_and_one_demand_as_floats_is_the_same_formula(capacity, demand, divisible, fit):
    assert tasks_fit(capacity, demand, divisible) == fit
    assert tasks_fit(capacity, demand, divisible) == tasks_per_machine([capacity], [demand], divisible)[0, 0]


def test_each_kind_on_the_hand_worked_instance(cluster):
    holders = Holders.of_views([cluster.apps[x].view for x in "abc"], cluster.view)
    n = np.array([2.0, 1.0, 1.0])
    # task share n / (h w): 2/6, 1/(3·2), 1/4; work slowdown n / (h^c w): c 1/2
    np.testing.assert_allclose(TASK_SHARE.of(n, holders), [1 / 3, 1 / 6, 1 / 4])
    assert WORK_SLOWDOWN.of(n, holders)[2] == 0.5
    # dominant share n max_r(d/total) / w: 2·1/6, 1·1/3 / 2, 1/4
    np.testing.assert_allclose(DOMINANT_SHARE.of(n, holders), [1 / 3, 1 / 6, 1 / 4])
    # cpu n d_cpu / 6 / w: 2/6, 2/6/2, 1/6; memory n d_mem / 16 / w: 4/16, 1/16/2, 4/16
    np.testing.assert_allclose(CPU_SHARE.of(n, holders), [1 / 3, 1 / 6, 1 / 6])
    np.testing.assert_allclose(MEM_SHARE.of(n, holders), [1 / 4, 1 / 32, 1 / 4])


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_one_app_as_floats_gives_the_same_bits(cluster, kind):
    # the scheduler's per-app unit and the run log's rows (Holders.one) against the vector form
    apps = [cluster.apps[x] for x in "abc"]
    holders = Holders.of_views([a.view for a in apps], cluster.view)
    for i, app in enumerate(apps):
        for n in (1.0, 3.0, 7.0):
            assert kind.of(n, Holders.one(app.view, cluster.view)) == kind.of(n, holders)[i]


def test_a_set_of_apps_has_a_share_under_the_same_formula(cluster):
    # queues q1 = {a, b} at weight 2 and q2 = {c} at weight 1, running 2, 1, 1:
    # task share adds n_i / h_i: (2/6 + 1/3) / 2 = 1/3, and 1/4;
    # dominant share of the use: q1 2<1,2> + <2,1> = <4,5>, max(4/6, 5/16) / 2 = 1/3; q2 1/4
    holders = Holders.of_views([cluster.apps[x].view for x in "abc"], cluster.view)
    n, members, weight = [2, 1, 1], [[0, 1], [2]], [2.0, 1.0]
    np.testing.assert_allclose(TASK_SHARE.set_share(n, holders, members, weight), [1 / 3, 1 / 4])
    np.testing.assert_allclose(DOMINANT_SHARE.set_share(n, holders, members, weight), [1 / 3, 1 / 4])


@pytest.mark.parametrize("dims, wanted, index", [
    (("cpu", "memory_mb"), "memory", 1), (("vcores", "memory_mb"), "cpu", 0), (("cpu", "mem_gb", "gpu"), "memory", 1),
    (("cpu", "mem_gb", "gpu"), "gpu", 2), (("cpu",), "memory", None), (("Memory", "CPU"), "cpu", 1),
])
def test_one_rule_for_cpu_and_memory(dims, wanted, index):
    assert resource_index(dims, wanted) == index


def test_a_policy_gives_a_queues_share_in_its_own_kind(cluster):
    # drf ranks by the dominant share, so its queues too: q1 = {a, b} 1/3, q2 = {c} 1/4 (above);
    # tsf by the task share: the same numbers here, by the other formula
    from rayrm.rm.core.policies import make_policy
    holders = Holders.of_views([cluster.apps[x].view for x in "abc"], cluster.view)
    for name in ("drf", "tsf"):
        got = make_policy(name).set_shares([2, 1, 1], holders, [[0, 1], [2]], [2.0, 1.0])
        np.testing.assert_allclose(got, [1 / 3, 1 / 4])
    # cdrf by work slowdown (h^c of c is 2): q2 = 1/2; a and b may use both nodes, q1 = 1/3
    got = make_policy("cdrf").set_shares([2, 1, 1], holders, [[0, 1], [2]], [2.0, 1.0])
    np.testing.assert_allclose(got, [1 / 3, 1 / 2])
