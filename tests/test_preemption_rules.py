"""The clock-free preemption rules (rm/core/queues/preemption.py), without a driver: the
scheduler is driven by hand and ``decide`` is asked at chosen times."""

import math
import pickle

import pytest

from rayrm.rm.core.config import parse_config
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.queues.preemption import Preemption, PreemptionConfig
from rayrm.rm.core.queues.scheduler import make_scheduler
from rayrm.rm.service.store import restricted_loads

TASK = {"cpu": 1, "memory_mb": 1024}


def doc(preemption=None, policy="tsf", queues=None):
    """4 nodes <4 CPU, 4096 MB>: 16 tasks of <1, 1024>.  a1 (queue a, 40 tasks) at 0, b1
    (queue b, 20 tasks) at 10."""
    out = {"cluster": {"nodes": [{"name": "n{i}", "count": 4, "capacity": {"cpu": 4, "memory_mb": 4096}}]},
           "queues": queues or [{"name": "a"}, {"name": "b"}], "policy": policy,
           "workload": {"jobs": [
               {"id": "a1", "queue": "a", "submit": 0, "tasks": 40, "demand": TASK, "duration": 1000},
               {"id": "b1", "queue": "b", "submit": 10, "tasks": 20, "demand": TASK, "duration": 1000}]}}
    if preemption is not None:
        out["preemption"] = preemption
    return out


def started(cfg, policy="tsf"):
    """The scheduler with a1 running 16 tasks and b1 pending, and the rules."""
    s = make_scheduler(policy, cfg.dims, cfg.nodes, cfg.queues)
    p = Preemption(cfg.preemption, cfg.queues)
    s.submit(cfg.jobs[0].app)
    assert len(s.schedule()) == 16
    assert p.decide(0.0, s) == []
    s.submit(cfg.jobs[1].app)
    assert s.schedule() == []
    return s, p


def test_fair_share_starvation_takes_the_newest_containers_down_to_the_share():
    cfg = parse_config(doc({"enabled": True, "fair_share_timeout": 60, "grace": 15}))
    s, p = started(cfg)
    # b is starved from 10: u_b = 0 < 0.5 · F_b, F_b = 0.5 (two active leaves, equal weights)
    assert p.decide(10.0, s) == []
    assert p.wake(10.0) == 70.0            # 10 + fair_share_timeout
    assert p.decide(69.0, s) == []
    victims = p.decide(70.0, s)
    # k = ⌈(F_b − u_b) / s⌉ = ⌈0.5 / (1/16)⌉ = 8; a keeps 8/16 = F_a: the 8 newest, ids 16..9
    assert [v.container for v in victims] == list(range(16, 8, -1))
    assert {(v.source, v.starved, v.deadline) for v in victims} == {("root.a", "root.b", 85.0)}
    assert p.fair == {"root": 1.0, "root.a": 0.5, "root.b": 0.5}
    # warned once: asked again before the kill, nothing new
    assert p.decide(71.0, s) == []
    assert p.due(84.0) == [] and p.due(85.0) == list(range(9, 17))
    # the kill at 85: the containers go, b gets them, the episode 10..85 ends
    for v in victims:
        s.release(v.container)
        s.ask("a1", 1)
    assert sum(1 for c in s.schedule() if c.app_id == "b1") == 8
    assert p.decide(85.0, s) == []
    assert p.episodes == [("root.b", 10.0, 85.0)]
    assert p.warned == {}


def test_min_share_starvation_preempts_up_to_the_min():
    # b's min is 4 CPU = 1/4 of the cluster; only min-share preemption is on (fair: infinite)
    cfg = parse_config(doc({"enabled": True, "min_share_timeout": 30, "grace": 5},
                           queues=[{"name": "a"}, {"name": "b", "min": {"cpu": 4}}]))
    s, p = started(cfg)
    assert p.decide(10.0, s) == [] and p.wake(10.0) == 40.0
    victims = p.decide(40.0, s)
    # k = ⌈(1/4 − 0) / (1/16)⌉ = 4, deadline 40 + 5
    assert [v.container for v in victims] == [16, 15, 14, 13]
    assert {v.deadline for v in victims} == {45.0}


def test_a_finished_victim_is_forgotten_and_not_replaced_while_covered():
    cfg = parse_config(doc({"enabled": True, "fair_share_timeout": 60, "grace": 15}))
    s, p = started(cfg)
    p.decide(10.0, s)
    victims = p.decide(70.0, s)
    s.release(victims[0].container)        # container 16 finished before its deadline
    # b takes the freed slot: u_b = 1/16; still starved (< 0.25); 7 victims still cover 7 of
    # the k = ⌈(0.5 − 1/16) · 16⌉ = 7 tasks it needs: nothing new
    assert [c.app_id for c in s.schedule()] == ["b1"]
    assert p.decide(72.0, s) == []
    assert len(p.warned) == 7


def test_a_search_counts_the_victims_already_warned_as_gone():
    """One node of 3 slots: a holds all 3, b (2 tasks) starves from 10.  Equal weights and
    both demands above 1/2 give F_a = F_b = 1/2.  At 70 b asks back k = ⌈(1/2 − 0) / (1/3)⌉
    = 2 containers, but a, at 3/3, may lose only one and stay at or above F_a (3/3 − 1/3 =
    2/3; one more would leave 1/3 < 1/2): one victim, a's newest (3), due at 70 + 15.  At 85,
    searching again before that kill, b still lacks k = 2 − 1 (the covered task) = 1 task,
    and a's usage *after* the kill due is 2/3: taking another would leave it at 1/3, so
    nothing more is taken."""
    d = doc({"enabled": True, "fair_share_timeout": 60, "grace": 15})
    d["cluster"] = {"nodes": [{"name": "n", "capacity": {"cpu": 3, "memory_mb": 3072}}]}
    d["workload"]["jobs"][0]["tasks"], d["workload"]["jobs"][1]["tasks"] = 4, 2
    cfg = parse_config(d)
    s = make_scheduler("tsf", cfg.dims, cfg.nodes, cfg.queues)
    p = Preemption(cfg.preemption, cfg.queues)
    s.submit(cfg.jobs[0].app)
    assert [c.container_id for c in s.schedule()] == [1, 2, 3]
    s.submit(cfg.jobs[1].app)
    assert s.schedule() == [] and p.decide(10.0, s) == []
    assert [v.container for v in p.decide(70.0, s)] == [3]
    assert p.fair == {"root": 1.0, "root.a": 0.5, "root.b": 0.5}
    assert p.decide(85.0, s) == [] and p.due(85.0) == [3]


def test_under_yarn_capacity_a_queue_is_measured_on_memory():
    """One node <4 CPU, 4096 MB>; capacity queues a and b, 50% each (min 50%), yarn-capacity.
    a runs 4 tasks of <1, 256>: all the CPU but 1024 MB, a memory share of 1/4 (its dominant
    share would be 1).  b asks 2 tasks of <1, 1024> and finds no CPU.  On memory, as the
    Capacity Scheduler's DefaultResourceCalculator reads queues: a's demand share 1/4 caps
    F_a = 1/4, b's 2048/4096 caps F_b = 1/2; u_b = 0 < 0.5 × 1/2, so b starves, but a at
    exactly F_a can give nothing (1/4 − 1/16 < 1/4): no victim.  Read on dominant shares a
    (F_a = 1/2, u_a = 1) would lose containers it is not over its capacity by."""
    task = {"cpu": 1, "memory_mb": 256}
    d = doc({"enabled": True, "fair_share_timeout": 10}, policy="yarn-capacity",
            queues=[{"name": "a", "capacity": 50}, {"name": "b", "capacity": 50}])
    d["cluster"] = {"nodes": [{"name": "n", "capacity": {"cpu": 4, "memory_mb": 4096}}]}
    d["workload"]["jobs"] = [
        {"id": "a1", "queue": "a", "submit": 0, "tasks": 4, "demand": task, "duration": 100},
        {"id": "b1", "queue": "b", "submit": 0, "tasks": 2, "demand": {"cpu": 1, "memory_mb": 1024}, "duration": 100}]
    cfg = parse_config(d)
    s = make_scheduler("yarn-capacity", cfg.dims, cfg.nodes, cfg.queues)
    p = Preemption(cfg.preemption, cfg.queues)
    s.submit(cfg.jobs[0].app)
    assert len(s.schedule()) == 4
    s.submit(cfg.jobs[1].app)
    assert s.schedule() == [] and p.decide(0.0, s) == []
    assert p.decide(10.0, s) == []
    assert p.fair == {"root": 1.0, "root.a": 0.25, "root.b": 0.5}
    assert p.episodes == [] and "b" in p.starved_since


def test_per_queue_timeouts_inherit_down_the_tree():
    cfg = parse_config(doc({"enabled": True, "fair_share_timeout": 60},
                           queues=[{"name": "a"}, {"name": "p", "preemption": {"fair_share_timeout": 20},
                                                   "children": [{"name": "b"}]}]))
    p = Preemption(cfg.preemption, cfg.queues)
    assert p.settings["a"].fair_share_timeout == 60
    assert p.settings["p.b"].fair_share_timeout == 20
    assert p.settings["p.b"].min_share_timeout == math.inf


@pytest.mark.parametrize("setting, message", [
    ({"enabled": True, "grace": 0}, "preemption.grace: must be positive"),
    ({"enabled": True, "min_share_timeout": -3}, "preemption.min_share_timeout: must be positive"),
    ({"enabled": True, "fair_share_timeout": "soon"}, "preemption.fair_share_timeout: must be a number"),
    ({"enabled": True, "fair_share_threshold": 1.5}, "preemption.fair_share_threshold: must be in [0, 1]"),
    ({"enabled": "yes"}, "preemption.enabled: must be true or false"),
    ({"enabled": True, "timeout": 3}, "preemption.timeout: unknown setting"),
])
def test_bad_settings_name_the_field(setting, message):
    with pytest.raises(InputError) as e:
        parse_config(doc(setting))
    assert message in str(e.value).replace("'", "")


def test_preemption_needs_a_queue_tree():
    d = doc({"enabled": True, "fair_share_timeout": 60})
    del d["queues"]
    for j in d["workload"]["jobs"]:
        del j["queue"]
    with pytest.raises(InputError) as e:
        parse_config(d)
    assert "needs a queue tree" in str(e.value)
    assert PreemptionConfig.parse(None).enabled is False


def test_victims_come_from_the_queue_furthest_above_and_never_below_its_share():
    d = doc({"enabled": True, "fair_share_timeout": 60},
            queues=[{"name": "a"}, {"name": "b"}, {"name": "c"}])
    d["workload"]["jobs"][0]["tasks"] = 10
    d["workload"]["jobs"].append({"id": "c1", "queue": "c", "submit": 0, "tasks": 6, "demand": TASK,
                                  "duration": 1000})
    cfg = parse_config(d)
    s = make_scheduler("tsf", cfg.dims, cfg.nodes, cfg.queues)
    p = Preemption(cfg.preemption, cfg.queues)
    s.submit(cfg.jobs[0].app)
    s.submit(cfg.jobs[2].app)
    assert len(s.schedule()) == 16                     # a 10, c 6: the cluster is full
    s.submit(cfg.jobs[1].app)
    p.decide(10.0, s)
    victims = p.decide(70.0, s)
    # F = 1/3 each (three active leaves, none capped below it by its demand: a 10/16, c 6/16).
    # b asks k = ⌈(1/3 − 0) · 16⌉ = 6.  a (10/16 − 1/3 = 0.29 above) goes first and may give 4,
    # keeping 6/16 ≥ 1/3 (5/16 < 1/3); c (6/16) would fall to 5/16 < 1/3: it gives none.
    assert abs(p.fair["root.a"] - 1 / 3) < 1e-9 and abs(p.fair["root.c"] - 1 / 3) < 1e-9
    a_ids = sorted(cid for cid, c in s.cluster.containers.items() if c.app_id == "a1")
    assert [v.source for v in victims] == ["root.a"] * 4
    assert sorted(v.container for v in victims) == a_ids[-4:]       # a's newest four


def test_the_tree_keeps_each_queues_pending_demand():
    # a1: 40 tasks of <1, 1024>, 16 placed -> 24 pending: P_a = <24, 24576>; b1 asks 20 tasks
    cfg = parse_config(doc())
    s, _ = started(cfg)
    s.tree.track_pending()
    a, b = s.tree.by_path["a"], s.tree.by_path["b"]
    assert a.pend == [24.0, 24576.0] and b.pend == [20.0, 20480.0]
    s.cancel("b1", 5)                       # 15 left: <15, 15360>
    s.ask("a1", 2)                          # 26: <26, 26624>
    assert a.pend == [26.0, 26624.0] and b.pend == [15.0, 15360.0]
    s.release(1)                            # a1's container 1 ends: one node slot free,
    assert [c.app_id for c in s.schedule()] == ["b1"]      # b1 (furthest below) takes it
    assert b.pend == [14.0, 14336.0]
    s.finish_app("b1")
    assert b.pend == [0.0, 0.0] and a.pend == [26.0, 26624.0]


def test_rules_pickled_while_starved_decide_as_the_originals():
    # the replay's RM snapshots its whole state, the rules' clocks in it, and reads it back
    # with only rayrm's classes callable (restricted_loads): restored mid-episode, b's clock
    # still counts from 10, so both take the same 8 victims at 70 (k = ⌈0.5 / (1/16)⌉ = 8,
    # as in the first test) and none before
    cfg = parse_config(doc({"enabled": True, "fair_share_timeout": 60, "grace": 15}))
    s, p = started(cfg)
    assert p.decide(10.0, s) == [] and p.starved_since == {"b": 10.0}
    q = restricted_loads(pickle.dumps(p))
    assert q.starved_since == {"b": 10.0} and q.wake(10.0) == 70.0
    assert q.decide(69.0, s) == [] and p.decide(69.0, s) == []
    taken_q, taken_p = q.decide(70.0, s), p.decide(70.0, s)
    assert [v.container for v in taken_q] == [v.container for v in taken_p] == list(range(16, 8, -1))
    assert q.wake(70.0) == p.wake(70.0) == 85.0            # the next search waits for the grace


def test_two_leaves_starved_at_once_leave_the_source_at_its_share():
    # a runs all 16 slots; b and c (20 tasks each) arrive at 10: three active leaves of equal
    # weight, F = 1/3 each, one task 1/16.  At 70 both may preempt, b first (leaf order):
    # k_b = ⌈(1/3 − 0) / (1/16)⌉ = ⌈5.33⌉ = 6, a 16 → 10.  c asks 6 too, but a may only go
    # down to 16 · 1/3 = 5.33 tasks, counting b's 6 victims as gone: 10 → 6, so c gets 4
    # (5 would leave a at 5/16 < 1/3).  The newest first: b 16..11, c 10..7.
    d = doc({"enabled": True, "fair_share_timeout": 60, "grace": 15},
            queues=[{"name": "a"}, {"name": "b"}, {"name": "c"}])
    d["workload"]["jobs"].append({"id": "c1", "queue": "c", "submit": 10, "tasks": 20, "demand": TASK,
                                  "duration": 1000})
    cfg = parse_config(d)
    s, p = started(cfg)
    s.submit(cfg.jobs[2].app)
    assert s.schedule() == [] and p.decide(10.0, s) == []
    victims = p.decide(70.0, s)
    assert [(v.container, v.starved) for v in victims] == \
        [(c, "root.b") for c in range(16, 10, -1)] + [(c, "root.c") for c in range(10, 6, -1)]
