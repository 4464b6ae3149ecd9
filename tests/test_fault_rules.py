"""The fault rules both drivers follow (rayrm.rm.core.fault_rules), on their own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rayrm.rm.core.fault_rules import (AmRegistration, AttemptCall, Fate, Handover, Registration, Resync,
                                       after_failed_attempt, am_expired_detail, am_host_died, attempt_fails, expiry,
                                       fate_on_node_lost, nm_lost_detail, not_reported, on_am_registers,
                                       on_attempt_call, on_attempt_failed, on_nm_registers, trace_seconds,
                                       wall_seconds)

ROOT = Path(__file__).resolve().parents[1]


def test_expiry_is_k_heartbeats_with_a_floor():
    # 10 heartbeats of 0.05 s = 0.5 s < the 1 s floor; 10 of 1 s = 10 s
    assert expiry(10, 0.05, 1.0) == 1.0
    assert expiry(10, 1.0, 1.0) == 10.0


@pytest.mark.parametrize("delivered, started, want", [
    (False, False, Fate.WITHDRAWN),      # placed, never given to the AM
    (True, False, Fate.REPORTED),        # the AM holds it, no attempt began
    (True, True, Fate.LOST),             # its attempt ends lost
])
def test_the_fate_of_a_container_on_a_lost_node(delivered, started, want):
    assert fate_on_node_lost(delivered, started) is want


@pytest.mark.parametrize("lost, asked, want", [
    (True, False, Registration.REJOIN), (True, True, Registration.REJOIN),
    (False, True, Registration.RESYNC), (False, False, Registration.RECONNECT),
])
def test_what_an_nm_registering_means(lost, asked, want):
    assert on_nm_registers(lost, asked) is want


def test_attempts_lost_with_their_host_do_not_count():
    # max 2: attempt 1 fails counted -> 1 failure, attempt 2 launched
    out = after_failed_attempt(1, 0, True, 2)
    assert (out.attempt, out.uncounted, out.failed) == (2, 0, "")
    # attempt 2 lost with its host: uncounted 1, failures 2 - 1 = 1 < 2 -> attempt 3
    out = after_failed_attempt(2, 0, False, 2)
    assert (out.attempt, out.uncounted, out.failed) == (3, 1, "")
    # attempt 3 fails counted: failures 3 - 1 = 2 >= 2 -> the app fails
    out = after_failed_attempt(3, 1, True, 2)
    assert (out.attempt, out.uncounted, out.failed) == (3, 1, "2 of 2 attempts failed")


@pytest.mark.parametrize("verdict, want", [
    (Registration.REJOIN, []),                # lost with it already: nothing more to lose
    (Registration.RESYNC, [3, 9]),            # RUNNING 3, 5, 9; reports 5 -> 3 and 9 lost
    (Registration.RECONNECT, [3, 9]),
])
def test_what_a_registering_nm_does_not_report_is_lost(verdict, want):
    assert not_reported(verdict, [3, 5, 9], {5, 7}) == want


def test_a_failed_attempt_expired_counts_and_one_lost_with_its_host_does_not():
    # max 2, attempt 1 silent for 4 s: counted, failures 1 - 0 = 1 < 2 -> attempt 2
    f = attempt_fails(1, 0, 2, silence=4.0, seconds=wall_seconds)
    assert (f.why, f.outcome.attempt, f.outcome.uncounted, f.launch) == \
        ("attempt 1 silent for 4.000s", 2, 0, "attempt 2")
    # attempt 2 lost with AM host am-1: uncounted 1, failures 2 - 1 = 1 < 2 -> attempt 3
    f = attempt_fails(2, 0, 2, host_lost=am_host_died("am-1", "ActorDiedError"))
    assert (f.why, f.outcome.attempt, f.outcome.uncounted, f.launch) == \
        ("attempt 2: AM host am-1 died (ActorDiedError)", 3, 1, "attempt 3")
    # attempt 3 never registered for 6 trace s: failures 3 - 1 = 2 >= 2 -> the app fails, no launch
    f = attempt_fails(3, 1, 2, launching=True, silence=6.0, seconds=trace_seconds)
    assert (f.why, f.outcome.failed, f.launch) == \
        ("attempt 3 never registered for 6 trace s", "2 of 2 attempts failed", "")


@pytest.mark.parametrize("delivered, started, want", [
    (False, False, Handover.TAKEN_OVER),     # allocated, never delivered: the next attempt receives it
    (True, False, Handover.WITHDRAWN),       # only the failed attempt knew its task
    (True, True, Handover.KEPT),             # runs on (work-preserving AM restart)
])
def test_what_a_failed_attempt_leaves_to_the_next(delivered, started, want):
    assert on_attempt_failed(delivered, started) is want


@pytest.mark.parametrize("done, attempt, current, registered, want", [
    (False, 2, 2, True, AttemptCall.CURRENT),
    (False, 2, 2, False, AttemptCall.RESYNC),     # launched, or asked by the restarted RM
    (False, 1, 2, True, AttemptCall.FENCED),      # replaced by attempt 2
    (True, 1, 2, True, AttemptCall.SHUTDOWN),     # the app ended: whichever attempt calls
])
def test_the_answer_to_an_attempts_call(done, attempt, current, registered, want):
    assert on_attempt_call(done, attempt, current, registered) is want


def test_an_attempt_registering_is_a_launch_or_a_resync():
    assert on_am_registers(True) is AmRegistration.LAUNCHED and AmRegistration.LAUNCHED.value == "am_registered"
    assert on_am_registers(False) is AmRegistration.RESYNC and AmRegistration.RESYNC.value == "am_resync"


def test_a_restarted_rm_asks_every_live_nm_and_registered_attempt():
    r = Resync(trace_seconds)
    r.recovered(5.0, "")
    r.restart(["a", "b"], ["j"])
    assert r.waiting == {("node", "a"), ("node", "b"), ("app", "j")}


def test_details_are_written_on_each_drivers_clock():
    assert nm_lost_detail(3.0, trace_seconds) == "no heartbeat for 3 trace s"
    assert nm_lost_detail(1.25, wall_seconds) == "no heartbeat for 1.250s"
    assert am_expired_detail(2, True, 7.0, trace_seconds) == "attempt 2 never registered for 7 trace s"


def test_a_restarted_rm_waits_for_everyone_it_asked_then_logs_resynced_once():
    r = Resync(trace_seconds)
    assert r.check(1.0) is None                                  # never restarted: waits for nobody
    assert r.recovered(11.0, "state rebuilt") == "epoch 1; state rebuilt"
    r.wait_for([("node", "a"), ("app", "j")])
    assert r.asked(("node", "a")) and not r.asked(("node", "b"))
    r.registered(("node", "a"))
    assert r.check(12.0) is None                                 # j still to register
    r.registered(("app", "j"))
    # 12.5 - 11 = 1.5 trace s after recovery
    assert r.check(12.5) == "epoch 1: every NM and AM registered again 1.5 trace s after recovery"
    assert r.check(13.0) is None                                 # logged once
    r.lost()
    assert r.epoch == 1 and not r.asked(("node", "a"))


def test_the_simulators_fault_model_calls_only_public_methods_of_the_engine():
    tree = ast.parse((ROOT / "rm" / "sim" / "faults.py").read_text())
    private = sorted({n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                      and isinstance(n.value, ast.Name) and n.value.id == "sim" and n.attr.startswith("_")}
                     | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                        and isinstance(n.value, ast.Attribute) and n.value.attr == "sim"
                        and n.attr.startswith("_")})
    assert private == []


def _names(paths) -> set[str]:
    """Every name and attribute the modules at ``paths`` read."""
    out = set()
    for path in paths:
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.Name):
                out.add(n.id)
            elif isinstance(n, ast.Attribute):
                out.add(n.attr)
    return out


#: the fault rules both drivers decide with (docs/design.md's table); on_attempt_failed's
#: WITHDRAWN needs a container delivered and not started, which the simulator never has
SHARED_RULES = ("expiry", "silent_host_expiry", "nm_lost_detail", "fate_on_node_lost", "on_nm_registers",
                "not_reported", "nm_registered_detail", "on_late_status", "late_status_detail", "attempt_fails",
                "on_am_registers", "am_registered_detail", "on_attempt_call", "fenced_detail", "restart")


@pytest.mark.parametrize("rule", SHARED_RULES)
def test_each_fault_rule_is_called_by_the_service_and_by_the_simulator(rule):
    service = _names((ROOT / "rm" / "service").glob("*.py")) | _names([ROOT / "rm" / "runtime" / "actor.py"])
    simulator = _names([ROOT / "rm" / "core" / "recovery.py", ROOT / "rm" / "sim" / "faults.py"])
    assert rule in service and rule in simulator
