"""Partitions, slow and lossy links without Ray: the fault specs (rm/core/faults.py), the
link rules (rm/core/fault_rules.py) and what the RM's state does with a late report or
a retried allocate whose answer was lost (rm/service/).

The protocol cluster is tests/harness.py's: n1 <cpu:2>, n2 <cpu:1>; app "a" has 4
tasks of <cpu:1>, 3 run at once, each for 2 s.
"""

from __future__ import annotations

import pytest

from harness import Harness, kinds

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.fault_rules import LinkFault, link_passage
from rayrm.rm.core.faults import check_cluster, check_times, parse_fault
from rayrm.rm.service.calls import Call
from rayrm.rm.service.protocol import (COMPLETE, FINISHED, LOST, RUNNING, AllocateRequest, ContainerStatus,
                                      NodeRegistration)


def test_lasting_fault_specs_read_their_target_time_duration_and_delay():
    f = parse_fault("partition-nm-host:1@40+30")
    assert (f.kind, f.index, f.time, f.duration, f.end) == ("partition-nm-host", 1, 40.0, 30.0, 70.0)
    f = parse_fault("slow-am-host:0@10+20:50")
    assert (f.index, f.time, f.duration, f.ms) == (0, 10.0, 20.0, 50.0)
    f = parse_fault("drop:0.25@0+60")
    assert (float(f.target), f.time, f.duration) == (0.25, 0.0, 60.0)
    assert parse_fault("kill-rm@100").duration == 0.0                # instant kinds unchanged


@pytest.mark.parametrize("spec, says", [
    ("partition-rm:0@1+2", "unknown fault kind 'partition-rm'"),
    ("partition-nm-host:0@10", "needs a duration"),
    ("partition-nm-host:0@10+-5", "the duration must be > 0"),
    ("partition-am-host:0@10+0", "the duration must be > 0"),
    ("slow-nm-host:0@10+5", "missing the delay"),
    ("slow-nm-host:0@10+5:-3", "the delay must be > 0"),
    ("drop:1.5@0+10", "the probability must be in [0, 1]"),
    ("drop:-0.1@0+10", "the probability must be in [0, 1]"),
    ("drop:x@0+10", "the probability P must be a number"),
    ("kill-rm@10+5", "kill-rm is instant and takes no '+D'"),
    ("partition-nm-host:x@10+5", "index must be a whole number"),
])
def test_a_bad_lasting_fault_is_one_line_naming_the_spec(spec, says):
    with pytest.raises(InputError) as e:
        parse_fault(spec)
    assert says in str(e.value) and spec in str(e.value) and "\n" not in str(e.value)


def test_a_link_fault_on_a_host_that_does_not_exist_is_refused():
    with pytest.raises(InputError, match="2 NodeManager hosts"):
        check_cluster([parse_fault("partition-nm-host:2@1+1")], ray_nodes=2, nm_hosts=2)
    with pytest.raises(InputError, match="1 ApplicationMaster host"):
        check_cluster([parse_fault("slow-am-host:1@1+1:5")], ray_nodes=1, nm_hosts=1, am_hosts=1)
    check_cluster([parse_fault("partition-nm-host:1@1+1")], ray_nodes=2, nm_hosts=2)      # fine


def test_a_fault_after_the_end_is_an_error_with_until_and_a_warning_without():
    late = [parse_fault("kill-rm@100")]
    with pytest.raises(InputError, match="at or after the end of the run"):
        check_times(late, until=50.0, earliest=30.0)
    assert check_times(late, until=200.0, earliest=30.0) == []
    # without --until the makespan is not known: the trace may end at 30, the fault is at 100
    (warning,) = check_times(late, until=None, earliest=30.0)
    assert "may come after the trace's end" in warning and "30" in warning


def test_a_partition_loses_every_call_until_it_heals():
    cut = [LinkFault("partition", 10.0, 25.0)]
    assert link_passage(cut, 12.0, 0.99, 0.99).lost == "request"
    assert link_passage(cut, 12.0, 0.99, 0.99).retry_at == 25.0
    assert link_passage(cut, 25.0, 0.0, 0.0).lost == ""              # healed at 25


def test_slow_links_add_their_delays_and_lossy_ones_lose_with_their_probability():
    links = [LinkFault("slow", 0, 10, delay=0.05), LinkFault("slow", 5, 10, delay=0.02),
             LinkFault("drop", 0, 10, p=0.5), LinkFault("drop", 0, 10, p=0.5)]
    # at 6 both slow links: 0.05 + 0.02 = 0.07 s; two drops of 1/2: lost with 1 - 1/4 = 3/4
    p = link_passage(links, 6.0, 0.74, 0.2)
    assert p.delay == pytest.approx(0.07) and p.lost == "answer"     # leg draw 0.2 < 1/2: the answer
    assert link_passage(links, 6.0, 0.76, 0.2).lost == ""
    assert link_passage(links, 6.0, 0.1, 0.7).lost == "request"
    assert link_passage(links, 2.0, 0.9, 0.0).delay == pytest.approx(0.05)


def test_a_finish_reported_after_a_partition_past_the_expiry_is_ignored_and_logged():
    c = Harness()
    c.step()                                               # t=1: 3 containers placed and started
    c.step()                                               # t=2: reported RUNNING
    (cid,) = [k for k, v in c.running.items() if v[2] == "n2"]
    app, task, node, t0 = c.running[cid]
    c.apply(Call.EXPIRE_NODES, 1.0, ["n2"])                # n2 partitioned past the expiry: lost
    assert c.rm.containers.table[cid].state == COMPLETE
    # the partition heals at t=4: the container finished meanwhile (at 3) and n2 registers
    # again reporting it; its task was asked for again when n2 was lost, so this is not its finish
    c.now = 4.0
    late = ContainerStatus(cid, app, task, 0, node, COMPLETE, t0, t0, 3.0, FINISHED)
    c.call("nm", Call.REGISTER_NODES, [NodeRegistration("n2", {"cpu": 1, "memory_mb": 1024}, {}, "ray-a", 0,
                                                       (late,))])
    (ignored,) = kinds(c.rm, "ignored_finish")
    assert ignored[5] == cid and ignored[4] == task
    assert task not in c.rm.apps.table["a"].finished_tasks and c.rm.records.finished == 0
    c.running.pop(cid)                                     # the harness's NM forgets it too
    c.run(until=20)
    assert c.finished["a"] == {0, 1, 2, 3} and c.rm.records.duplicate_finishes == 0
    assert c.rm.records.finished == 4


def test_a_retried_allocate_whose_long_polled_answer_was_lost_gets_the_same_containers():
    c = Harness()
    c.step()                                               # t=1: 3 of 4 tasks placed
    c.step()                                               # t=2: RUNNING; the 4th still waits
    reqs = [AllocateRequest("a", 1, 1)]
    assert c.call("am", Call.ALLOCATE, reqs)[0].allocated == ()         # full: the AM long-polls
    # t=3: a container on n1 finishes, the 4th task's container is placed
    c.now = 3.0
    done = next(k for k, v in c.running.items() if v[2] == "n1")
    app, task, node, t0 = c.running.pop(done)
    c.beat([ContainerStatus(done, app, task, 0, node, COMPLETE, t0, t0, 3.0, FINISHED)])
    polled = c.apply(Call.POLL, "am", c.rid["am"], reqs, None)
    (given,) = polled[0].allocated
    # the answer is lost on the way; the AM repeats the call with the same request id
    again = c.call("am", Call.ALLOCATE, reqs, again=True)
    assert [a.container for a in again[0].allocated] == [given.container]
    assert c.rm.containers.table[given.container].state != RUNNING     # delivered, not started yet


def test_check_counts_attempts_started_or_finished_on_a_node_the_rm_held_lost():
    import pandas as pd

    from rayrm.rm.runs.check import CheckResult
    from rayrm.rm.runs.check_faults import check_lost_nodes
    # n2 held lost from 10 to 30; n1 never lost
    events = pd.DataFrame({"time": [0.0, 0.0, 10.0, 30.0], "kind": ["node_join", "node_join", "node_lost", "node_join"],
                           "node": ["n1", "n2", "n2", "n2"]})
    tasks = pd.DataFrame({
        "app": ["a"] * 5, "task": [0, 1, 2, 3, 4], "attempt": [0] * 5,
        "node": ["n2", "n2", "n2", "n1", "n2"],
        "start": [5.0, 12.0, 5.0, 12.0, 31.0], "finish": [10.0, 14.0, 15.0, 14.0, 33.0],
        "status": ["lost", "finished", "finished", "finished", "finished"]})
    result = CheckResult("t")
    check_lost_nodes(events, tasks, result)
    # task 1 started at 12 inside (10, 30); task 2 ran 5..15 across the loss at 10 and was
    # counted finished; task 0 ended lost at the loss, 3 is on n1 and 4 after the rejoin
    assert (result.started_on_lost, result.finished_on_lost) == (1, 1)
    assert not result.ok


def test_a_container_delivered_and_never_reported_running_is_lost_to_its_am_which_asks_again():
    c = Harness()
    c.step()                                   # t=1: 3 containers delivered, not yet reported running
    delivered = sorted(c.running)
    assert sorted(x.container for x in c.rm.containers.acquired()) == delivered
    # their NM crashed while the RM was down: the RM expires the allocations
    assert c.apply(Call.EXPIRE_ALLOCATIONS, delivered, "test") == delivered
    assert [e[5] for e in kinds(c.rm, "allocation_expired")] == delivered
    tasks = sorted(task for _, task, _, _ in c.running.values())
    c.running.clear()                          # they never ran
    # the AM's next allocate hears them lost (the AM maps a container to its task itself)
    c.now += 1
    heard = c.allocate(1 + len(tasks))
    assert sorted(st.container for st in heard.completed) == delivered
    assert {st.exit for st in heard.completed} == {LOST}
    c.unplaced["a"] = tasks + c.unplaced["a"]
    for a in heard.allocated:                  # what that call delivered starts now
        c.running[a.container] = ("a", c.unplaced["a"].pop(0), a.node, c.now)
    c.run(until=20)
    # the AM heard them lost and asked again: all 4 tasks finish, each once
    assert c.finished["a"] == {0, 1, 2, 3} and c.rm.records.finished == 4
    assert c.rm.records.duplicate_finishes == 0


def test_a_replay_whose_every_nm_host_is_lost_for_good_stops_saying_why():
    from rayrm.rm.core.clock import TraceClock
    from rayrm.rm.runtime.supervisor import STUCK, Supervisor
    sup = Supervisor(None, {"nm-0": None, "nm-1": None}, None, clock=TraceClock(0.0, 1.0), total=1,
                     label="t", progress=False, stall_after=60.0)
    sup._host_lost("nm-0", "its Ray node is gone")
    assert sup.stop.reason == ""                                   # nm-1 still runs NMs
    sup._host_lost("nm-1", "its Ray node is gone")
    assert sup.stop.reason == f"{STUCK}: every NodeManager host is lost for good"
