"""Faults that wait for an event (``KIND[:TARGET]@EVENT[+S]``, rm/core/faults.py): the spec,
the run log's watch that fires them, the simulator's and the replay injector's firing.

The simulated instance (``samples.TWO_QUEUES``) is test_preemption_replay's: 4 nodes <cpu:2> = 8 slots;
a1 takes all 8 from t = 0 with 16 tasks of 20 s; b1 asks 4 at t = 2 and is starved (share 0
< 0.5 x 1/2) until ``fair_share_timeout`` = 3 has passed, so at t = 2 + 3 = 5 four of a1's
containers are warned (``preempt_warned``) and killed at 5 + grace 3 = 8.  Heartbeats are
1 trace s and ``run.rm_restart`` is 1 heartbeat: a killed RM serves again 1 s later
(``rm_recovered``) and every NM and AM has resynced a heartbeat after that.
"""

from __future__ import annotations

import math
import pickle

import pytest

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.faults import TRIGGERS, check_times, parse_fault
from rayrm.rm.core.config import parse_config
from rayrm.rm.runs.log import RunLog
from rayrm.rm.runs.reader import RunDir
from rayrm.rm.sim.engine import simulate

from samples import TWO_QUEUES

@pytest.mark.parametrize("spec, kind, target, after, delay, duration, ms", [
    ("kill-rm@preempt_warned", "kill-rm", "", "preempt_warned", 0.0, 0.0, 0.0),
    ("kill-rm@preempt_warned+1.5", "kill-rm", "", "preempt_warned", 1.5, 0.0, 0.0),
    ("kill-am:job2@am_expired+0", "kill-am", "job2", "am_expired", 0.0, 0.0, 0.0),
    # a lasting fault: its +D after the event, or after the event's +S
    ("partition-nm-host:0@node_lost+30", "partition-nm-host", "0", "node_lost", 0.0, 30.0, 0.0),
    ("partition-nm-host:0@node_lost+2+30", "partition-nm-host", "0", "node_lost", 2.0, 30.0, 0.0),
    ("slow-am-host:1@rm_recovered+2+20:50", "slow-am-host", "1", "rm_recovered", 2.0, 20.0, 50.0),
])
def test_a_fault_may_wait_for_an_event_and_has_no_time_until_then(spec, kind, target, after, delay, duration, ms):
    f = parse_fault(spec)
    assert (f.kind, f.target, f.after, f.delay, f.duration, f.ms, f.text) == (kind, target, after, delay, duration,
                                                                              ms, spec)
    assert f.time == math.inf and f.after in TRIGGERS
    # seen at trace time 12.25: due delay later, lasting as long, the spec unchanged
    due = f.fired(12.25)
    assert (due.time, due.end, due.text, due.kind) == (12.25 + delay, 12.25 + delay + duration, spec, kind)
    # no end of the trace can be too early for it: it fires only if its event comes in time
    assert check_times([f], until=1.0, earliest=0.0) == []


@pytest.mark.parametrize("spec, message", [
    ("kill-rm@soon", "must be a number of trace seconds or an event to wait for (preempt_warned, node_lost, "
                     "am_expired, rm_recovered), got 'soon'"),
    ("kill-rm@preempt_warned+1+2", "write kill-rm@preempt_warned[+S] (S: trace seconds after the event)"),
    ("kill-rm@preempt_warned+-1", "the delay after preempt_warned must be >= 0 trace seconds, got '-1'"),
    ("kill-rm@preempt_warned+x", "the delay after the event (trace seconds) must be a number, got 'x'"),
    ("kill-rm@preempt_warned+", "missing the delay after the event"),
    ("partition-nm-host:0@node_lost", "write partition-nm-host:INDEX@node_lost[+S]+D"),
    ("partition-nm-host:0@node_lost+1+2+3", "write partition-nm-host:INDEX@node_lost[+S]+D"),
    ("partition-nm-host:0@node_lost+1+0", "the duration must be > 0 trace seconds, got '0'"),
    ("kill-nm:n1@5+1", "kill-nm is instant and takes no '+D'"),       # a delay only after an event
])
def test_bad_event_triggers_say_what_is_wrong(spec, message):
    with pytest.raises(InputError) as e:
        parse_fault(spec)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_run_logs_watch_fires_once_at_the_first_event_of_its_kind_and_is_not_pickled():
    log = RunLog(("cpu",), mode="sim", policy="tsf")
    seen = []
    log.event("node_lost", 3.0, node="n1")
    log.watch("node_lost", lambda t: seen.append(("node_lost", t)))     # already seen: at once
    log.watch("preempt_warned", lambda t: seen.append(("warned", t)))
    assert seen == [("node_lost", 3.0)]
    log.event("preempt_warned", 5.0, app="a1")
    log.event("preempt_warned", 6.0, app="a1")                         # not the first: nothing
    assert seen == [("node_lost", 3.0), ("warned", 5.0)]
    log.watch("am_expired", seen.append)
    again = pickle.loads(pickle.dumps(log))            # the record keeps the first times only
    assert again.first_at == {"node_lost": 3.0, "preempt_warned": 5.0} and again._watches == {}
    again.watch("preempt_warned", lambda t: seen.append(("again", t)))
    assert seen[-1] == ("again", 5.0)


def simulated(tmp_path, *faults):
    summary = simulate(parse_config(TWO_QUEUES), out=tmp_path, progress=False, faults=list(faults))
    ev = RunDir(tmp_path).events
    return summary, ev


def test_the_simulator_fires_a_fault_its_event_triggers(tmp_path):
    summary, ev = simulated(tmp_path, "kill-rm@preempt_warned+1")
    assert list(ev[ev.kind == "preempt_warned"].time) == [5.0] * 4
    # warned at 5, the RM killed 1 s later at 6, serving again at 6 + 1 = 7, resynced at 8
    assert list(ev[ev.kind == "fault"].time) == [6.0]
    assert list(ev[ev.kind == "rm_recovered"].time) == [7.0] and list(ev[ev.kind == "rm_resynced"].time) == [8.0]
    f = summary["faults"]
    assert f["simulated"] == ["kill-rm@preempt_warned+1"] and f["not_triggered"] == [] and f["rm_restarts"] == 1
    assert summary["tasks"]["finished"] == 20 and summary["tasks"]["preempted"] == 4


def test_a_triggered_fault_fires_once_and_one_whose_event_never_comes_not_at_all(tmp_path):
    # kill-rm@6 -> recovered at 7 -> the fault waiting for the first rm_recovered kills it at
    # 7 + 2 = 9 -> recovered again at 10, which fires nothing more; no AM attempt ever fails
    summary, ev = simulated(tmp_path, "kill-rm@6", "kill-rm@rm_recovered+2", "kill-rm@am_expired")
    assert list(ev[ev.kind == "fault"].time) == [6.0, 9.0]
    assert list(ev[ev.kind == "fault"].detail) == ["kill-rm@6", "kill-rm@rm_recovered+2"]
    assert list(ev[ev.kind == "rm_recovered"].time) == [7.0, 10.0]
    f = summary["faults"]
    assert f["rm_restarts"] == 2 and f["not_triggered"] == ["kill-rm@am_expired"]


def test_simulate_says_which_faults_waited_for_an_event_that_never_came(tmp_path, capsys):
    import yaml

    from rayrm.rm.cli.main import main

    (tmp_path / "c.yaml").write_text(yaml.safe_dump(TWO_QUEUES))
    code = main(["simulate", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "run"),
                 "--fault", "kill-rm@am_expired", "--fault", "kill-rm@preempt_warned"])
    out = capsys.readouterr().out
    assert code == 0
    assert "  faults: kill-rm@preempt_warned; RM restarts 1, AM crashes 0" in out
    assert "  not injected, their event never came: kill-rm@am_expired\n" in out


def test_the_replay_injector_asks_the_rm_for_the_event_and_again_when_the_rm_died(local_ray):
    import ray

    from rayrm.rm.core.clock import TraceClock
    from rayrm.rm.runtime.supervisor import FaultInjector

    @ray.remote(num_cpus=0)
    def died(kind):
        raise RuntimeError("the RM died")

    answers = [died.remote, lambda kind: ray.put(4.5)]               # first it dies, then it answers

    class RM:
        class first_event:                                           # noqa: N801 (an actor method)
            remote = staticmethod(lambda kind: answers.pop(0)(kind))

    faults = [parse_fault("kill-rm@preempt_warned+1"), parse_fault("kill-rm@2")]
    inj = FaultInjector(faults, clock=TraceClock(0.0, 1.0), rm=RM, am={}, hosts={}, host_of_node={}, ray_nodes=[],
                        nms_on_ray_node={}, nm_restart_after=1.0)
    assert [f.text for f in inj.todo] == ["kill-rm@2"] and inj.seconds_to_watch() == math.inf
    (ref,) = inj.watches()
    assert inj.watches() == [ref]                                    # one call out per event
    ray.wait([ref], timeout=30)
    inj.seen(ref)                                                    # it failed: asked again soon
    assert inj.watches() == [] and 0 < inj.seconds_to_watch() <= 0.2
    inj._rewatch["preempt_warned"] = 0.0
    (ref,) = inj.watches()
    inj.seen(ref)
    # the event at trace 4.5: the fault due at 4.5 + 1 = 5.5, after kill-rm@2
    assert [(f.text, f.time) for f in inj.todo] == [("kill-rm@2", 2.0), ("kill-rm@preempt_warned+1", 5.5)]
    assert inj.waiting == [] and inj.watches() == [] and inj.seconds_to_watch() == math.inf
