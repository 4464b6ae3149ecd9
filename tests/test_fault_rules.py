"""The fault rules both drivers follow (rayrm.rm.core.fault_rules), on their own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rayrm.rm.core.fault_rules import (Fate, Registration, Resync, after_failed_attempt, am_expired_detail,
                                       expiry, fate_on_node_lost, nm_lost_detail, on_nm_registers, trace_seconds,
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
