"""The worked examples of examples/policies/, each loaded as a user would (by path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.core.policies import make_policy
from rayrm.rm.core.scheduler import OnlineScheduler

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "policies"


def one_cpu_apps(policy, cpus, *apps):
    """A scheduler over one node of ``cpus`` cpu; apps (id, tasks, submit) of 1 cpu each."""
    sched = OnlineScheduler(policy, ("cpu",), [NodeSpec("m1", Resources(cpu=cpus))])
    for app_id, tasks, submit in apps:
        sched.submit(AppSpec(app_id, Resources(cpu=1), tasks, submit=submit))
    return sched


def test_priority_tsf_gives_boosted_jobs_boost_times_the_tasks():
    """h = 10 for both; units prod 1/(10*4) = 0.025, batch 1/10 = 0.1.  Ten offers, lowest
    (key, submit, id) first: batch (0 = 0, 'batch-b' < 'prod-a'), prod x4 (0 .. 0.075 -> 0.1),
    batch (0.1 = 0.1, id), prod x4 (0.1 .. 0.175 -> 0.2): batch 2, prod 8 — the 4:1 of the boost."""
    policy = make_policy(f"{EXAMPLES}/priority_tsf.py:PriorityTSF:prefix=prod:boost=4")
    sched = one_cpu_apps(policy, 10, ("prod-a", 10, 0.0), ("batch-b", 10, 0.0))
    placed = [c.app_id for c in sched.schedule()]
    assert placed == ["batch-b"] + ["prod-a"] * 4 + ["batch-b"] + ["prod-a"] * 4
    assert sched.cluster.apps["prod-a"].unit == pytest.approx(0.025)


def test_priority_tsf_rejects_a_boost_that_is_not_positive():
    from rayrm.rm.core.policies import PolicyError
    with pytest.raises(PolicyError, match="__init__: ValueError: boost must be > 0"):
        make_policy(f"{EXAMPLES}/priority_tsf.py:PriorityTSF:boost=0")


@pytest.mark.parametrize("policy, first", [("tsf", "new"),
                                           (f"{EXAMPLES}/aging.py:AgingFairShare:tau=10:small=20", "old")])
def test_aging_lets_a_long_waiting_small_job_ahead(policy, first):
    """One node of 4 cpu, h = 4.  'old' (5 tasks, submit 0) runs 4 and waits for 1; 'new'
    (100 tasks, submit 30) arrives; one of old's tasks ends, and the freed cpu goes to
    whom?  TSF: old 3/4 = 0.75 against new 0: new.  Aging (tau 10, small 20): old's unit is
    min(1, 5/20) / 4 = 0.0625, key 3 * 0.0625 + 0/10 = 0.1875; new's 0 * 0.25 + 30/10 = 3.0: old."""
    sched = one_cpu_apps(make_policy(policy), 4, ("old", 5, 0.0))
    first_round = sched.schedule()
    assert [c.app_id for c in first_round] == ["old"] * 4
    sched.submit(AppSpec("new", Resources(cpu=1), 100, submit=30.0))
    assert sched.schedule() == []                     # the node is full
    sched.release(first_round[0].container_id)
    assert [c.app_id for c in sched.schedule()] == [first]
    if first == "old":
        assert sched.cluster.apps["new"].key == pytest.approx(3.0)
        assert sched.cluster.apps["old"].key == pytest.approx(4 * 0.0625)   # after its 4th again
