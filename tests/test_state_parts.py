"""The RM state's parts and the actor's typed calls (rm/service/state.py, rm/runtime/actor.py)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from harness import Harness

from rayrm.rm.service.protocol import Call
from rayrm.rm.service.state import _DISPATCH, ResourceManagerState

ROOT = Path(__file__).resolve().parents[1]


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


def _journaled_calls():
    """(Call member, state method, its arguments, the journaled arguments) of each call the
    actor makes: ``self.state.m(now, *a)`` followed by ``self._journal(Call.X, now, (*b,))``."""
    tree = ast.parse((ROOT / "rm" / "runtime" / "actor.py").read_text())
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        applied = None
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            f = node.func
            if isinstance(f.value, ast.Attribute) and f.value.attr == "state" and f.attr in {c.value for c in Call}:
                applied = (f.attr, [ast.unparse(a) for a in node.args[1:]])
            if f.attr == "_journal" and applied is not None:
                call = node.args[0].attr
                journaled = node.args[2]
                args = [ast.unparse(a) for a in journaled.elts] if isinstance(journaled, ast.Tuple) \
                    else ["*" + ast.unparse(journaled)]
                found.append((Call[call], applied[0], applied[1], args))
                applied = None
    return found


def test_the_actor_journals_each_call_with_the_arguments_it_applied():
    calls = _journaled_calls()
    # every protocol call the actor makes is journaled, POLL and the RM's own included
    assert {c for c, *_ in calls} == set(Call)
    for call, method, applied, journaled in calls:
        assert _DISPATCH[call] is getattr(ResourceManagerState, method), call
        assert applied == journaled, (call, applied, journaled)


def test_replaying_a_call_runs_the_typed_method_it_names():
    # the journal's table and the typed methods' signatures agree: (now, caller, request id, ...)
    for call, method in _DISPATCH.items():
        params = list(inspect.signature(inspect.unwrap(method)).parameters)
        assert params[:2] == ["self", "now"], call
        assert method.__name__ == call.value
