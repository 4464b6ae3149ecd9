"""``rayrm check`` on hand-built run directories: a clean one and one of each violation.

The cluster (written through rm.runlog.RunLog, as the drivers do)::

    n1  cpu 2, memory_mb 4096   gpu=yes, cores=8
    n2  cpu 1, memory_mb 2048   cores=4

    a  2 tasks, <cpu 1, mem 1024>, constraint "cores == 8.0 and gpu exists"  -> n1 only
    b  2 tasks, <cpu 1, mem 512>,  no constraint
    r  rejected (demand cpu 4 fits no node)

nodes.csv stores cores as the text "8"; the constraint says 8.0, so the check must
compare them as numbers, as rm.constraints does.
"""

from __future__ import annotations

import pytest

from rayrm.rm.runs import check
from rayrm.rm.runs.check import check_run
from rayrm.rm.cli.main import main
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.runs.log import RunLog

NODES = [NodeSpec("n1", Resources(cpu=2, memory_mb=4096), {"gpu": "yes", "cores": 8}),
         NodeSpec("n2", Resources(cpu=1, memory_mb=2048), {"cores": 4})]
APPS = [AppSpec("a", Resources(cpu=1, memory_mb=1024), 2,
                constraint=Constraint.parse("cores == 8.0 and gpu exists")),
        AppSpec("b", Resources(cpu=1, memory_mb=512), 2)]
REJECTED = AppSpec("r", Resources(cpu=4, memory_mb=512), 1)

# (app, task, attempt, node, start, finish, status).  Clean schedule:
#   n1: a/0 and a/1 over [0, 10] -> cpu 1 + 1 = 2 of 2 (full, not over);
#       b/1 attempt 1 starts at 10, the instant a's tasks end: releases go first -> 1 of 2.
#   n2: b/0 over [0, 5]; b/1 attempt 0 over [5, 7], lost (its node went away) -> re-run.
CLEAN = [("a", 0, 0, "n1", 0, 10, "finished"), ("a", 1, 0, "n1", 0, 10, "finished"),
         ("b", 0, 0, "n2", 0, 5, "finished"), ("b", 1, 0, "n2", 5, 7, "lost"),
         ("b", 1, 1, "n1", 10, 12, "finished")]


def write_run(path, attempts, apps=APPS, nodes=NODES, rejected=(REJECTED,)):
    log = RunLog(("cpu", "memory_mb"), mode="sim", policy="tsf")
    for n in nodes:
        log.add_node(n, 0.0)
    for app in apps:
        log.submit(app, 0.0)
    for app in rejected:
        log.reject(app, "demand above every eligible node", 0.0)
    for app, task, attempt, node, start, finish, status in attempts:
        log.start(app, task, attempt, node, 0.0, start)
        if status != "running":
            log.end(app, task, attempt, status, finish)
    log.write(path)
    return path


def replace(attempts, old, new):
    return [new if a[:3] == old else a for a in attempts]


CASES = [
    # name, attempts, expected non-zero counts (all others 0)
    ("clean", CLEAN, {}),
    # b/1 starts on n1 at 9, before a's tasks end at 10: cpu 1 + 1 + 1 = 3 > 2, once.
    ("over-allocated", replace(CLEAN, ("b", 1, 1), ("b", 1, 1, "n1", 9, 12, "finished")),
     {"over_allocations": 1}),
    # a/1 on n2 (cores 4, no gpu) in [7, 10]: fits (b/1's lost attempt ended at 7) but is forbidden.
    ("constraint", replace(CLEAN, ("a", 1, 0), ("a", 1, 0, "n2", 7, 10, "finished")),
     {"constraint_violations": 1}),
    # b/1 attempt 1 never ran: b/1 has no finished row.
    ("missing", [a for a in CLEAN if a[:3] != ("b", 1, 1)], {"tasks_missing": 1}),
    # b/1 attempt 0 ends 'finished' instead of 'lost': two finished rows for b/1.
    ("twice", replace(CLEAN, ("b", 1, 0), ("b", 1, 0, "n2", 5, 7, "finished")), {"finished_twice": 1}),
    # The rejected job r ran a task on n2 — and its 4 cpu overfill n2's 1.
    ("rejected ran", CLEAN + [("r", 0, 0, "n2", 20, 21, "finished")],
     {"unexpected_attempts": 1, "over_allocations": 1}),
    # Task index 2 of a (which has tasks 0 and 1) is not a task of a.
    ("out of range", CLEAN + [("a", 2, 0, "n1", 20, 21, "finished")], {"unexpected_attempts": 1}),
    # b/1's second attempt is still running when the log ends: not finished, so missing.
    ("still running", replace(CLEAN, ("b", 1, 1), ("b", 1, 1, "n1", 10, None, "running")),
     {"tasks_missing": 1}),
]


@pytest.mark.parametrize("name,attempts,expected", CASES, ids=[c[0] for c in CASES])
def test_each_violation_is_counted(tmp_path, name, attempts, expected):
    result = check_run(write_run(tmp_path / "run", attempts))
    counts = {k: getattr(result, k) for k in result.VIOLATIONS}
    assert counts == {k: expected.get(k, 0) for k in result.VIOLATIONS}
    assert result.ok == (not expected)
    # a: 2 tasks + b: 2 tasks = 4 tasks of 2 accepted jobs; r is rejected.
    assert (result.tasks, result.jobs_accepted, result.jobs_rejected) == (4, 2, 1)
    assert result.attempts == len(attempts)


def test_running_attempt_holds_its_node_to_the_end(tmp_path):
    # b/1 attempt 1 never ends on n1 (cpu 1 held for ever); b/0 attempt 1 starts on n1 at 50
    # and a/0 attempt 1 at 60: 1 + 1 = 2 fits; one more at 70 makes 3 > 2 -> one over-allocation.
    attempts = replace(CLEAN, ("b", 1, 1), ("b", 1, 1, "n1", 10, None, "running")) + [
        ("b", 0, 1, "n1", 50, 80, "killed"), ("a", 0, 1, "n1", 70, 90, "killed")]
    result = check_run(write_run(tmp_path / "run", attempts))
    assert result.over_allocations == 1
    assert "n1 at t=70: cpu 3 in use of 2" in result.examples["over_allocations"][0]


def test_float_tolerance_is_per_container(tmp_path):
    # Three tasks of 1/3 cpu on a 1-cpu node: jobs.csv stores 0.333333, sum 0.999999 <= 1: fine.
    # A fourth makes 1.333332 > 1 + 1e-9 + 4e-6: one over-allocation.
    node = [NodeSpec("x", Resources(cpu=1), {})]
    third = [AppSpec("t", Resources(cpu=1 / 3), 4)]
    three = [("t", k, 0, "x", 0, 1, "finished") for k in range(3)] + [("t", 3, 0, "x", 1, 2, "finished")]
    assert check_run(write_run(tmp_path / "ok", three, third, node, ())).ok
    four = three[:3] + [("t", 3, 0, "x", 0.5, 2, "finished")]
    assert check_run(write_run(tmp_path / "over", four, third, node, ())).over_allocations == 1


@pytest.mark.parametrize("marked", [check.MARKED_PAIRS, 0], ids=["marked", "sorted"])
def test_unknown_node_is_a_constraint_violation(tmp_path, monkeypatch, marked):
    # a's two constraint-bound attempts on n2 (cores 4, no gpu) and b/0 on a node nodes.csv
    # does not list: 3 violations, found alike whether the pairs that occur are marked or sorted
    monkeypatch.setattr(check, "MARKED_PAIRS", marked)
    attempts = replace(CLEAN, ("b", 0, 0), ("b", 0, 0, "ghost", 0, 5, "finished"))
    attempts = replace(attempts, ("a", 0, 0), ("a", 0, 0, "n2", 0, 10, "finished"))
    attempts = replace(attempts, ("a", 1, 0), ("a", 1, 0, "n2", 0, 10, "finished"))
    result = check_run(write_run(tmp_path / "run", attempts))
    assert result.constraint_violations == 3
    assert sorted(result.examples["constraint_violations"]) == [
        "a ran on n2: 'cores == 8.0 and gpu exists' does not hold there",
        "a ran on n2: 'cores == 8.0 and gpu exists' does not hold there",
        "b ran on ghost: a node nodes.csv does not list"]


def test_cli_counts_and_exit_status(tmp_path, capsys):
    clean = write_run(tmp_path / "clean", CLEAN)
    bad = write_run(tmp_path / "bad", replace(CLEAN, ("b", 1, 0), ("b", 1, 0, "n2", 5, 7, "finished")))
    assert main(["check", str(clean)]) == 0
    out = capsys.readouterr().out
    assert "over-allocations       0" in out and "tasks checked          4" in out
    assert "attempts checked       5" in out and "OK" in out
    assert main(["check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "finished twice         1" in out and "b task 1 finished 2 times" in out
    assert main(["check", "--json", str(clean)]) == 0
    assert '"over_allocations": 0' in capsys.readouterr().out


@pytest.mark.parametrize("damage,where", [
    (lambda d: (d / "tasks.csv").unlink(), "tasks.csv: is missing"),
    (lambda d: (d / "jobs.csv").write_text("app,status\na,finished\n"), "jobs.csv:1: the header has no"),
    (lambda d: (d / "tasks.csv").write_text(
        "app,task,attempt,node,submit,start,finish,status\na,zero,0,n1,0,0,1,finished\n"),
     "tasks.csv:2: field 'task': must be a whole number, got 'zero'"),
    (lambda d: (d / "jobs.csv").write_text((d / "jobs.csv").read_text().replace(
        "cores == 8.0 and gpu exists", "cores === 8")), "jobs.csv:2: field 'constraint'"),
])
def test_unreadable_run_dir_is_one_line(tmp_path, capsys, damage, where):
    run = write_run(tmp_path / "run", CLEAN)
    damage(run)
    assert main(["check", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and where in err and err.startswith("rayrm check: error:")


def test_not_a_directory(tmp_path):
    with pytest.raises(InputError, match="is not a run directory"):
        check_run(tmp_path / "nowhere")
