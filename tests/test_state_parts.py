"""The RM state's parts (rm/service/state.py); its calls are tests/test_calls.py's."""

from __future__ import annotations

from harness import Harness


def test_the_state_and_every_part_declare_their_fields():
    rm = Harness().rm
    # slots: an attribute a part never declared cannot be set on it
    for part in (rm, rm.nodes, rm.apps, rm.containers, rm.liveness, rm.resync, rm.records):
        assert not hasattr(part, "__dict__"), type(part).__name__
        try:
            part.undeclared = 1
        except AttributeError:
            continue
        raise AssertionError(f"{type(part).__name__} accepts an undeclared attribute")
