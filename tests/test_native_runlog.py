"""The compiled run log (rm/core/native/_runlog.pyx) against the Python RunLog: the same calls
leave the same rows, in memory and streamed, and its CSV lines are the bytes pyarrow writes
(docs/design.md, "Native core")."""

from __future__ import annotations

import math
import random

import pytest

from rayrm.rm.core import native
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.runs import log as runlog
from rayrm.rm.runs.columns import ColumnBuffer
from rayrm.rm.runs.encoding import csv_kinds, csv_table, csv_text
from rayrm.rm.runs.log import RunLog, run_log
from rayrm.rm.runs.schema import TABLES
from rayrm.rm.runs.writer import TableSink

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


class _Job:
    def __init__(self, units):
        self.units = units


class _State:
    def __init__(self, running):
        self.running = running


def test_shares_of_the_changed_apps_match_the_python_log():
    """An instant's changed apps: a runs 3 tasks of units (0.25, 0.5, 0.5, 0.125), so shares
    3 × u = 0.75, 1.5, 1.5, 0.375; b has left the cluster's apps: 0 running, shares 0."""
    changed = {"a": _Job((0.25, 0.5, 0.5, 0.125)), "b": _Job((0.5, 0.25, 0.25, 0.25))}
    apps = {"a": _State(3)}
    rows = []
    for log in (RunLog(DIMS, mode="sim", policy="tsf"), run_log(DIMS, core="native", mode="sim", policy="tsf")):
        log.share(1.0, "a", (0.1, 0.1, 0.1, 0.1), 1)        # a pending row of an earlier instant
        log.shares_of(2.5, changed, apps)
        rows.append(log.share_rows)
    assert rows[0] == rows[1] == [(1.0, "a", 0.1, 0.1, 0.1, 0.1, 1), (2.5, "a", 0.75, 1.5, 1.5, 0.375, 3),
                                  (2.5, "b", 0.0, 0.0, 0.0, 0.0, 0)]


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


def csv_lines(buffer):
    return native.native_module("_runlog").csv_lines(buffer.cols, csv_kinds(buffer.table))


def test_csv_lines_spell_cells_as_pyarrow_does():
    """Shares rows by hand: times and shares to 6 decimals (rint(v × 10^6) / 10^6), the
    shortest decimal without trailing zeros or exponent; the count whole; NaN empty."""
    shares = ColumnBuffer("shares")
    # 0.1234567 × 10^6 = 123456.7 → 123457 → 0.123457; 1/3 → 0.333333; 2.5e-6 → 2.5 → 2
    # (half to even) → 0.000002; 1e-7 → 0.1 → 0 with its sign kept: '-0' for −1e-7
    shares.append((12.5, "app1", 0.1234567, math.nan, -1e-7, 1 / 3, 3.0))
    shares.append((86400.0000004, "é", 2.5e-6, 0.0, 999_999_999.9999994, 1.0, 0.0))
    expected = ("12.5,app1,0.123457,,-0,0.333333,3\r\n"
                "86400,é,0.000002,0,999999999.999999,1,0\r\n").encode()
    assert bytes(csv_lines(shares)) == expected == csv_text(csv_table(shares))


def test_csv_lines_give_up_where_pyarrow_or_python_must_write():
    """None (the writer falls back) for a float pyarrow may write with an exponent (10^9 and
    up after rounding), a count that is not whole, and a text cell that needs quotes."""
    for row in [(1e9, "a", 0.0, 0.0, 0.0, 0.0, 1.0),                   # 10^9: 1e+09 is near
                (999_999_999.9999996, "a", 0.0, 0.0, 0.0, 0.0, 1.0),   # rounds up to 10^9
                (1.0, "a", 0.0, 0.0, 0.0, 0.0, 1.5),                   # a count of 1.5
                (1.0, "a,b", 0.0, 0.0, 0.0, 0.0, 1.0), (1.0, 'a"', 0.0, 0.0, 0.0, 0.0, 1.0)]:
        assert csv_lines(ColumnBuffer.of("shares", [row])) is None


def _random_cell(rng: random.Random, name: str, kind: str, text_column: bool):
    if kind == "str":
        pool = ["a", "", "app-1", "é-n1", "x y", "t\tz", None, 3, -7, 1.5, math.nan]
        return rng.choice(pool + [2 ** 70] if text_column else pool)   # Arrow's int64 cannot
    if kind == "int":
        return rng.choice([rng.randint(0, 1000), rng.randint(-2 ** 63, 2 ** 63 - 1)])
    if name == "running":
        return float(rng.choice([0, 1, rng.randint(0, 10 ** 9 - 1), -0.0]))
    special = [math.nan, 0.0, -0.0, 1.0, 5e-7, -5e-7, 1.5e-6, 2.5e-6, 123.0000005]
    if rng.random() < 0.2:
        return rng.choice(special)
    value = rng.choice([1, -1]) * 10 ** rng.uniform(-8, 8.99)
    return round(value, rng.randint(0, 7)) if rng.random() < 0.3 else value


@pytest.mark.parametrize("seed", range(4))
def test_csv_lines_are_pyarrow_bytes_on_random_batches(seed):
    """Random batches of each table, text in lists and in TextColumns, times over 17 orders
    of magnitude: the compiled lines are csv_text's bytes, batch for batch."""
    rng = random.Random(seed)
    text_column = native.native_module("_runlog").TextColumn
    for _ in range(300):
        table = rng.choice(list(TABLES))
        text = text_column if rng.random() < 0.5 else None
        buffer = ColumnBuffer(table, text)
        for _ in range(rng.randint(1, 30)):
            buffer.append([_random_cell(rng, name, kind, text is not None)
                           for name, kind in TABLES[table].items()])
        lines = csv_lines(buffer)
        assert lines is not None and bytes(lines) == csv_text(csv_table(buffer))


def test_csv_sink_falls_back_to_pyarrow_and_python(tmp_path):
    """A batch csv_lines gives up on is written by pyarrow (a 10^10 s time: '1e+10') or by
    Python (a comma: quoted, times by repr), as the Python log's sink writes it."""
    lines = native.native_module("_runlog").csv_lines
    rows = [[(1e10, "a", 0.5, 0.5, 0.5, 0.5, 1.0)], [(2.0, "a,b", 0.5, 0.5, 0.5, 0.5, 1.0)],
            [(3.0, "c", 0.25, 0.25, 0.25, 0.25, 2.0)]]
    written = {}
    for name, formatter in (("python", None), ("native", lines)):
        (tmp_path / name).mkdir()
        sink = TableSink(tmp_path / name, "shares", "csv", lines=formatter)
        for batch in rows:
            sink.write(batch)
        sink.close()
        written[name] = (tmp_path / name / "shares.csv").read_bytes()
    assert written["native"] == written["python"] == (
        "time,app,task_share,dominant_share,cpu_share,mem_share,running\r\n"
        '1e+10,a,0.5,0.5,0.5,0.5,1\r\n2.0,"a,b",0.5,0.5,0.5,0.5,1\r\n3,c,0.25,0.25,0.25,0.25,2\r\n').encode()
