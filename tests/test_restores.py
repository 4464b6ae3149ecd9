"""rm/service/restores.py: a kept snapshot plus its journal rebuilds the next snapshot.

Driven by the protocol harness (no Ray): the state is snapshotted through a store that
keeps every generation, as ``rayrm replay --keep-rm-state`` does.
"""

from __future__ import annotations

from pathlib import Path

from harness import Harness

from rayrm.rm.cli.main import main
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.model import AppSpec, Resources
from rayrm.rm.service.restores import check_restores, kept_generations
from rayrm.rm.service.store import StateStore

DEMAND = Resources.parse("cpu:1;memory_mb:512")
# 60 apps that may use n1 only, then one that may use any node: n2 is offered through
# the pending index (see test_failures_protocol's restored-RM test)
APPS = tuple(AppSpec(f"a{i:02d}", DEMAND, num_tasks=4, constraint=Constraint.parse("disk != ssd"))
             for i in range(60)) + (AppSpec("z", DEMAND, num_tasks=10),)


def kept_run(tmp_path, tamper=None) -> Harness:
    """Snapshots 1 (empty), 2 at t = 3 and 3 at t = 6; ``tamper(rm)`` between 2 and 3."""
    c = Harness(StateStore(tmp_path, keep=True), apps=APPS)
    c.run(until=3)
    c.store.snapshot(c.rm)
    c.run(until=5)
    if tamper is not None:
        tamper(c.rm)
    c.run(until=6)
    c.store.snapshot(c.rm)
    return c


def test_each_kept_snapshot_is_rebuilt_from_the_one_before_and_its_journal(tmp_path):
    c = kept_run(tmp_path)
    assert kept_generations(tmp_path) == [1, 2, 3]
    assert c.store.journal_path(1).exists()          # kept, not dropped by snapshot 2
    checks = check_restores(tmp_path)
    assert [(k.generation, k.same) for k in checks] == [(1, True), (2, True)]
    # journal 1: registrations, the clock, the first asks and t = 1..3 (a heartbeat and an
    # allocate each); journal 2: t = 4..6
    assert [k.records for k in checks] == [4 + 2 * 3, 2 * 3]


def test_a_change_the_journal_does_not_hold_is_named(tmp_path):
    def tamper(rm):                                   # as if a call changed state unjournaled
        rm.records.allocations += 1
    kept_run(tmp_path, tamper)
    first, second = check_restores(tmp_path)
    assert first.same
    # t = 1, 3, 5: two a-tasks on n1 and z on n2 each time -> 9 allocations, 10 live
    assert second.differences == ["state.records.allocations: 9 replayed, 10 live"]


def test_cli_reports_restores_and_refuses_a_run_that_kept_none(tmp_path, capsys):
    config = Path(__file__).parents[1] / "configs" / "paper-micro.yaml"
    run = tmp_path / "run"
    assert main(["simulate", str(config), "--out", str(run)]) == 0
    kept_run(run / "rm-state")
    capsys.readouterr()
    assert main(["check", "--restores", str(run)]) == 0
    assert "restores               2 of 2 snapshots rebuilt exactly" in capsys.readouterr().out
    bare = tmp_path / "bare"
    assert main(["simulate", str(config), "--out", str(bare)]) == 0
    capsys.readouterr()
    assert main(["check", "--restores", str(bare)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rayrm check: error: {bare / 'rm-state'}: no kept RM snapshots to check (replay with " \
                  "--keep-rm-state)"
