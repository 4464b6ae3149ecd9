"""The compiled run log (rm/core/native/_runlog.pyx) against the Python RunLog: the same calls
leave the same rows, in memory and streamed (docs/design.md, "Native core")."""

from __future__ import annotations

import pytest

from rayrm.rm.core import native
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.runs import log as runlog
from rayrm.rm.runs.log import RunLog, run_log

pytestmark = pytest.mark.skipif(native.native_module() is None, reason="the compiled core is not built")

DIMS = ("cpu", "mem")


def feed(log: RunLog) -> RunLog:
    """One small run's calls: two attempts of app a, one of b that ends before its delayed
    start, and two instants of shares."""
    log.add_node(NodeSpec("n1", Resources(cpu=4, mem=8)), 0.0)
    for app in ("a", "b"):
        log.submit(AppSpec(app, Resources(cpu=1, mem=2), num_tasks=2), 0)
    log.start("a", 0, 0, "n1", 0, 2, None, 7)           # int times stay as given (ints)
    log.start("a", 1, 0, "n1", 0.5, 2.25, 1.5, 8)
    log.start("b", 0, 0, "n1", 1.0, 5.5, None, 9)        # a launch delay: recorded start 5.5
    # 3 tasks of units (0.25, 0.5, 0.5, 0.125): shares 3 × u = 0.75, 1.5, 1.5, 0.375
    log.shares_at(2.25, [("a", 3, (0.25, 0.5, 0.5, 0.125))])
    log.end("b", 0, 0, "lost", 4.0, None, 9, "node n1 left")    # before 5.5: its start becomes 4.0
    log.end("a", 0, 0, "finished", 12.5, 3.0, 7)
    log.shares_at(12.5, [("a", 1, (0.25, 0.5, 0.5, 0.125)), ("b", 0, (0.5, 0.25, 0.25, 0.25))])
    return log


def test_native_log_is_selected_by_the_core(monkeypatch):
    monkeypatch.setenv("RAYRM_CORE", "native")
    assert type(run_log(DIMS, mode="sim", policy="tsf")).__name__ == "NativeRunLog"
    monkeypatch.setenv("RAYRM_CORE", "python")
    assert type(run_log(DIMS, mode="sim", policy="tsf")) is RunLog


def test_in_memory_rows_match_the_python_log():
    py = feed(RunLog(DIMS, mode="sim", policy="tsf"))
    nat = feed(run_log(DIMS, core="native", mode="sim", policy="tsf"))
    assert nat.tasks == py.tasks == {
        ("a", 0, 0): ["a", 0, 0, "n1", 0, 2, 12.5, "finished"],
        ("a", 1, 0): ["a", 1, 0, "n1", 0.5, 2.25, None, "running"],
        ("b", 0, 0): ["b", 0, 0, "n1", 1.0, 4.0, 4.0, "lost"],
    }
    assert type(nat.tasks[("a", 0, 0)][5]) is int           # 2 as the driver gave it
    assert nat.events == py.events
    assert nat.events[3:5] == [(2.0, None, "start", "a", 0, 7, "n1", ""), (2.25, 1.5, "start", "a", 1, 8, "n1", "")]
    assert nat.events[6] == (4.0, None, "lost", "b", 0, 9, "n1", "node n1 left")
    assert nat.share_rows == py.share_rows == [
        (2.25, "a", 0.75, 1.5, 1.5, 0.375, 3), (12.5, "a", 0.25, 0.5, 0.5, 0.125, 1), (12.5, "b", 0.0, 0.0, 0.0, 0.0, 0)]
    assert nat.jobs["a"]["first_start"] == 2 and nat.jobs["b"]["first_start"] == 5.5
    assert nat.started == py.started == 3


def test_streamed_run_directories_are_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(runlog, "BATCH", 2)      # a flush every 2 rows: batches mid-run
    files = {}
    for core in ("python", "native"):
        out = tmp_path / core
        log = feed(run_log(DIMS, core=core, mode="sim", policy="tsf", out=out, fmt="csv"))
        log.write(out)
        files[core] = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert files["python"] == files["native"]
    # the streamed tasks: ended attempts in the order they ended, the running one last
    # (a whole number of seconds is written without its ".0", as the writer does for both)
    assert files["native"]["tasks.csv"].decode().splitlines()[1:] == [
        "b,0,0,n1,1,4,4,lost", "a,0,0,n1,0,2,12.5,finished", "a,1,0,n1,0.5,2.25,,running"]


def test_text_column_cells_are_str_of_the_values():
    """A streaming log's TextColumn keeps ``str(v)`` of each value ('' for None), as the
    writer turns a list column's cells into text; its Arrow array holds the same cells."""
    col = native.native_module("_runlog").TextColumn()
    values = ["a", "", None, 0, -12, 9_223_372_036_854_775_807, 2 ** 70, 1.5, True, "é-n1"]
    for v in values:
        col.append(v)
    cells = ["a", "", "", "0", "-12", "9223372036854775807", "1180591620717411303424", "1.5", "True", "é-n1"]
    assert len(col) == 10 and list(col) == cells
    assert col.arrow().to_pylist() == cells


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_streamed_text_cells_of_every_kind_are_the_same_bytes(tmp_path, monkeypatch, fmt):
    """Text cells the compiled log writes itself (TextColumn) against the Python log's lists:
    a non-ASCII app, a container id as text, a free-form event with a comma (CSV quotes it),
    None and counts in text columns — the same files either way."""
    monkeypatch.setattr(runlog, "BATCH", 3)
    files = {}
    for core in ("python", "native"):
        out = tmp_path / core
        log = feed(run_log(DIMS, core=core, mode="sim", policy="tsf", out=out, fmt=fmt))
        log.submit(AppSpec("ä", Resources(cpu=1, mem=2), num_tasks=1), 13)
        log.start("ä", 0, 0, "n1", 13, 13, None, "c-1")
        log.event("note", 14.0, app="ä", task=0, container=None, detail="a, b")
        log.shares_at(14.0, [("ä", 1, (0.25, 0.5, 0.5, 0.125))])
        log.end("ä", 0, 0, "finished", 15.0, None, 10 ** 12)
        log.write(out)
        files[core] = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name != "summary.json"}
    assert files["python"] == files["native"]
    if fmt == "csv":
        # None in a text cell goes through ColumnBuffer.append as NaN, written 'nan' by both;
        # the comma sends its batch through the Python formatter (quoted, times by repr); the
        # last row, a batch of its own, through pyarrow (15, not 15.0)
        events = files["native"]["events.csv"].decode().splitlines()
        assert events[-3:] == ['13.0,,start,ä,0,c-1,n1,', '14.0,,note,ä,0,nan,,"a, b"', '15,,finished,ä,0,1000000000000,n1,']
