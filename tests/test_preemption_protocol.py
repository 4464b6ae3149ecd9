"""Preemption in the RM's protocol state, without Ray (``Preemptions`` in rm/service/containers.py, state.py).

The cluster and app are tests/harness.py's: n1 <cpu:2; memory_mb:2048>, n2 <cpu:1;
memory_mb:1024>; app "a" has 4 tasks of <cpu:1>, so 3 run at once (containers 1 and 2 on
n1, 3 on n2, placed at the first heartbeat, t = 1, started by the AM then).  Here a task
runs ``DURATION`` = 10 s, so the first three finish at t = 11 and the fourth, started
then, at 21.  The decision is injected (``Fixed``: the rules' victims at one instant); the
trace clock is the wall clock (``TraceClock(0, 1)``), so deadlines read in seconds.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

import harness
from harness import APP, Harness, kinds

from rayrm.rm.service.calls import Call
from rayrm.rm.service.protocol import COMPLETE, KILLED, PREEMPTED, AllocateResponse
from rayrm.rm.service.store import StateStore


class Fixed:
    """Rules that choose ``victims`` (container, deadline) once, at the first decision at or
    after ``at``, and nothing else (the API of rm/core's rules: ``decide(now, scheduler)``)."""

    def __init__(self, at: float, victims):
        self.at, self.victims, self.asked = at, list(victims), []

    def decide(self, now, scheduler):
        self.asked.append(now)
        if now < self.at or not self.victims:
            return []
        out, self.victims = self.victims, []
        return [SimpleNamespace(container=c, app="a", source="root.a", starved="root.b", deadline=d)
                for c, d in out]


@pytest.fixture(autouse=True)
def long_tasks(monkeypatch):
    monkeypatch.setattr(harness, "DURATION", 10.0)


def decide(c: Harness) -> None:
    """The RM actor's monitor at ``c.now`` (rmactor/preemption.py): preemption's journaled
    call, the rules' new victims warned and the containers due killed."""
    c.apply(Call.PREEMPT)


def run(c: Harness, until: float) -> None:
    while c.now < until:
        c.step()
        decide(c)


def finishes(c: Harness) -> Counter:
    return Counter((r[0], r[1]) for r in c.rm.log.tasks.values() if r[7] == "finished")


def test_warned_then_killed_at_the_deadline_and_run_again():
    c = Harness(preemption=Fixed(2.0, [(1, 5.0)]))
    run(c, 2)
    # t = 2: container 1 (task 0 on n1) is warned; its AM hears it in that step's allocate
    assert [e[3] for e in kinds(c.rm, "preempt_warned")] == ["a"]
    run(c, 3)
    assert c.warnings == [(3.0, "a", 1, 5.0)]
    run(c, 5)
    # t = 5 >= deadline 5: killed (its node's cleanup), not yet reported
    assert [e[5] for e in kinds(c.rm, "preempt_killed")] == [1]
    run(c, 6)
    # t = 6: the NM killed it at its heartbeat; the status arrives at t = 7's heartbeat
    run(c, 7)
    rows = {(r[0], r[1], r[2]): r for r in c.rm.log.tasks.values()}
    assert rows[("a", 0, 0)][7] == PREEMPTED and rows[("a", 0, 0)][6] == 6.0
    assert c.rm.preemptions.counts() == {"apps": {"a": 1}, "queues": {"root.a": 1}, "warned": 0,
                                         "warned_apps": {}, "spared": 0, "preempted": 1}
    # the AM asked for task 0 again: a new attempt (attempt 1) on the freed slot of n1
    run(c, 40)
    assert finishes(c) == {("a", t): 1 for t in range(4)}
    assert rows[("a", 0, 0)][7] == PREEMPTED
    assert sorted(k for k in c.rm.log.tasks if k[1] == 0) == [("a", 0, 0), ("a", 0, 1)]


def test_a_container_that_finishes_before_its_deadline_is_not_killed():
    # warned at 2 with deadline 11.5; it finishes at 11 (started at 1, 10 s), reported at 11
    c = Harness(preemption=Fixed(2.0, [(1, 11.5)]))
    run(c, 14)
    assert kinds(c.rm, "preempt_killed") == []
    assert c.rm.preemptions.counts()["spared"] == 1 and c.rm.preemptions.counts()["preempted"] == 0
    run(c, 40)
    assert finishes(c) == {("a", t): 1 for t in range(4)}
    assert "preempted" not in {r[7] for r in c.rm.log.tasks.values()}


def test_a_container_not_live_or_warned_twice_is_skipped():
    c = Harness(preemption=Fixed(2.0, [(1, 5.0)]))
    run(c, 2)
    # the same decision again, and one for a container that does not exist: nothing new
    c.rm.preemptions.rules.victims = [(1, 9.0), (99, 9.0)]
    assert c.apply(Call.PREEMPT) == ([], [])
    assert len(kinds(c.rm, "preempt_warned")) == 1
    assert c.rm.preemptions.table[1].victim.deadline == 5.0


@pytest.mark.parametrize("restart_at", [3.0, 5.0])
def test_an_rm_restart_between_warning_and_kill_neither_loses_nor_doubles_it(tmp_path, restart_at):
    # restart at 3: warned at 2 (journaled), the kill not yet issued: the restored RM issues
    # it at 5.  Restart at 5: the kill was issued (journaled) and the NM not yet told: the
    # restored RM sends it again after the NMs resync.  Either way one kill, one rerun.
    c = Harness(StateStore(tmp_path), preemption=Fixed(2.0, [(1, 5.0)]))
    run(c, restart_at)
    c.restart(trusted={__name__})          # the injected rules are this module's
    assert 1 in c.rm.preemptions.table
    run(c, 40)
    assert len(kinds(c.rm, "preempt_killed")) == 1
    preempted = [k for k, r in c.rm.log.tasks.items() if r[7] == PREEMPTED]
    assert preempted == [("a", 0, 0)]
    assert finishes(c) == {("a", t): 1 for t in range(4)}
    assert c.rm.preemptions.counts()["preempted"] == 1 and c.rm.records.duplicate_finishes == 0


def test_a_kill_sent_again_after_a_restart_is_listed_once(tmp_path):
    c = Harness(StateStore(tmp_path), preemption=Fixed(2.0, [(1, 5.0)]))
    run(c, 5)                       # killed at 5: on n1's cleanup list, not yet answered
    assert c.rm.nodes.table["n1"].cleanup == [1]
    c.restart(trusted={__name__})
    assert c.rm.nodes.table["n1"].cleanup == [1]       # replayed, and ``resend`` adds nothing
    run(c, 8)
    assert c.rm.nodes.table["n1"].cleanup == []


def test_off_by_default_nothing_changes():
    c = Harness()
    run(c, 30)
    assert c.rm.preemptions.rules is None and c.rm.containers.preemptions is None
    assert c.rm.preemptions.decide(c.now, c.rm.scheduler) == []
    assert [e for e in c.rm.log.events if e[2].startswith("preempt")] == []
    assert AllocateResponse("a").preemption is None


def test_the_nm_host_kills_a_container_once():
    from rayrm.nodes.containers import HostContainers
    from rayrm.nodes.nm import NodeManagerState
    killed = []
    launcher = SimpleNamespace(kill=killed.append)
    hc = HostContainers(launcher, b"", {"killed": 0}, lambda *a: None)
    nm = NodeManagerState(harness.NODES[0])
    nm.containers[7] = (None, 0.0, "ref-7")
    hc.kill(nm, 7)
    hc.kill(nm, 7)                  # the RM sent it again (a restart): still one kill
    hc.kill(nm, 8)                  # not running here: nothing
    assert killed == ["ref-7"] and hc.stats["killed"] == 1


# ----- the rules of rm/core in the RM's state -----------------------------------------

def test_the_rules_decide_in_the_rm_and_a_restore_rebuilds_their_clocks(tmp_path):
    """Queues a and b (equal weights) on the harness's 3 slots (n1: 2, n2: 1; one task is
    1 cpu, a dominant share of 1/3).  a's 4 tasks take the 3 slots at t = 1; b registers 1
    task at t = 3: its demand share 1/3 caps F_b = 1/3 (a gets the rest, F_a = 2/3).  The
    rules evaluate at most every 0.5 s and did at t = 3 before b came, so the monitor's
    call at 3 after b's registration is not evaluated; at t = 4, u_b = 0 < 0.5 × 1/3: b is
    starved from 4.  After ``fair_share_timeout`` = 2 (t = 6) it asks back
    ⌈(1/3 − 0) / (1/3)⌉ = 1 container, and a (3/3 held) stays at F_a = 2/3 without it: one
    victim, a's newest container (3, on n2), killed at 6 + ``grace`` 2 = 8; the NM kills it
    at its next heartbeat (9), b's task runs there from 10.  Snapshots taken between the warning and the kill and after are rebuilt
    exactly from the one before plus its journal (``rayrm check --restores``)."""
    from rayrm.rm.core.config import parse_config
    from rayrm.rm.core.model import AppSpec, Resources
    from rayrm.rm.core.queues.preemption import Preemption
    from rayrm.rm.service.protocol import AllocateRequest, AppRegistration
    from rayrm.rm.service.restores import check_restores

    cfg = parse_config({"name": "q", "cluster": {"nodes": [{"name": "x", "capacity": {"cpu": 3}}]},
                        "queues": [{"name": "a"}, {"name": "b"}],
                        "preemption": {"enabled": True, "fair_share_timeout": 2, "grace": 2},
                        "workload": {"jobs": [{"id": "j", "tasks": 1, "demand": {"cpu": 1}, "duration": 1}]}})
    a = AppSpec("a", Resources.parse("cpu:1;memory_mb:512"), num_tasks=4, queue="a")
    b = AppSpec("b", Resources.parse("cpu:1;memory_mb:512"), num_tasks=1, queue="b")
    store = StateStore(tmp_path, keep=True)
    c = Harness(store, apps=(a,), preemption=Preemption(cfg.preemption, cfg.queues), queues=cfg.queues)
    run(c, 3)
    c.call("am", Call.REGISTER_APPS, [AppRegistration(b)])
    c.apps["b"], c.attempt["b"], c.unplaced["b"], c.finished["b"] = b, 1, [0], set()
    c.call("am", Call.ALLOCATE, [AllocateRequest("b", 1, 1)])
    decide(c)
    run(c, 6)
    (w,) = kinds(c.rm, "preempt_warned")
    assert w[0] == 6.0 and w[3] == "a" and w[5] == 3 and w[6] == "n2" and "from root.a for root.b" in w[7]
    store.snapshot(c.rm)                           # between the warning and the kill
    run(c, 12)
    (k,) = kinds(c.rm, "preempt_killed")
    assert k[0] == 8.0 and k[5] == 3
    assert c.rm.preemptions.counts()["preempted"] == 1
    assert [(r[0], r[3], r[5]) for r in c.rm.log.tasks.values() if r[0] == "b"] == [("b", "n2", 10.0)]
    store.snapshot(c.rm)
    run(c, 60)
    store.snapshot(c.rm)
    checks = check_restores(tmp_path)
    assert len(checks) >= 3 and all(x.same for x in checks), [x.differences for x in checks]
    assert finishes(c) == {**{("a", t): 1 for t in range(4)}, ("b", 0): 1}
    assert c.rm.preemptions.summary(c.now)["queues"]["root.a"]["preempted_containers"] == 1
