"""The streamed run directory and its two formats.

MIXED (tests/samples.py) has nodes leaving and joining, so its runs hold lost attempts,
rejected jobs and re-runs: every kind of row the readers see.
"""

from __future__ import annotations

import io

import pandas as pd
import pytest

from rayrm.rm.core.config import parse_config
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.native import native_module
from rayrm.rm.runs import log as runlog
from rayrm.rm.runs import writer
from rayrm.rm.runs import metrics as M
from rayrm.rm.runs.check import check_run
from rayrm.rm.runs.reader import RunDir, read_parquet
from rayrm.rm.runs.schema import EVENTS
from rayrm.rm.runs.report import _plain, build_report
from rayrm.rm.sim import engine
from rayrm.rm.sim.engine import Simulation, simulate
from tests.samples import MIXED


def _runs(tmp_path, fmt):
    """tsf and drf runs of MIXED in ``fmt``: policy -> run directory."""
    cfg = parse_config(MIXED)
    runs = {}
    for policy in ("tsf", "drf"):
        runs[policy] = tmp_path / fmt / policy
        assert simulate(cfg, policy=policy, out=runs[policy], progress=False, fmt=fmt)["format"] == fmt
    return runs


def test_parquet_and_csv_give_the_same_check_report_and_compare(tmp_path):
    csv, parquet = _runs(tmp_path, "csv"), _runs(tmp_path, "parquet")
    assert (csv["tsf"] / "tasks.csv").exists() and not (csv["tsf"] / "tasks.parquet").exists()
    assert (parquet["tsf"] / "tasks.parquet").exists() and not (parquet["tsf"] / "tasks.csv").exists()
    for p in csv:
        a, b = RunDir(csv[p]), RunDir(parquet[p])
        for table in ("tasks", "shares", "events"):
            pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), check_dtype=True)
        # what rayrm check reads instead, fresh (a filtered read, categoricals), is the same
        # rows from either format and from the tables already read
        loss = ("node_lost", "node_join")
        fresh = [RunDir(csv[p]), RunDir(parquet[p])]
        lost = [r.events_of(loss).reset_index(drop=True) for r in fresh + [a]]
        assert len(lost[0]) > 0 and set(lost[0]["kind"]) <= set(loss)
        for other in lost[1:]:
            pd.testing.assert_frame_equal(lost[0], other)
        coded = [r.coded_tasks for r in fresh + [a]]
        assert list(coded[0]["status"].cat.categories) == sorted(set(a.tasks["status"]))
        for other in coded[1:]:
            pd.testing.assert_frame_equal(coded[0], other)
        assert (coded[0]["app"].astype(str) == a.tasks["app"]).all()
        x, y = check_run(csv[p]).as_dict(), check_run(parquet[p]).as_dict()
        assert x.pop("run") != y.pop("run") and x == y and x["ok"]
        assert x["attempts_by_status"]["lost"] > 0       # MIXED loses b2's and c2's attempts
    ra, rb = (_plain(build_report([runs["tsf"], runs["drf"]]).tables) for runs in (csv, parquet))
    for row in ra["runs"] + rb["runs"]:
        row.pop("path")
    assert ra == rb and "job_speedup_by_size" in ra
    pd.testing.assert_frame_equal(M.comparison_table(csv), M.comparison_table(parquet))


@pytest.mark.parametrize("core", ["python", "native"])
def test_batches_write_the_rows_the_whole_run_holds(tmp_path, monkeypatch, core):
    """Streamed in batches of 7 rows, the run directory holds the rows of the in-memory log
    (tasks in the order attempts end rather than start: the same rows, sorted), and the
    summary accumulated batch by batch is the one-shot summary — under either core's log."""
    if core == "native" and native_module() is None:
        pytest.skip("the compiled core is not built")
    monkeypatch.setenv("RAYRM_CORE", core)
    cfg = parse_config(MIXED)
    whole = simulate(cfg, out=None, progress=False)
    memory = Simulation(cfg)
    memory.run(progress=False)
    memory.log.write(tmp_path / "memory", fmt="csv")
    monkeypatch.setattr(runlog, "BATCH", 7)
    streamed = Simulation(cfg, out=tmp_path / "streamed", fmt="csv")
    held = []                   # (rows the log holds, attempts running) after each start
    cls = type(streamed.log)
    assert cls.__name__ == ("NativeRunLog" if core == "native" else "RunLog")
    start = cls.start

    def watched(log, *args, **kw):
        start(log, *args, **kw)
        held.append((len(log.tasks) + len(log._ended) + len(log.events) + len(log.share_rows),
                     len(streamed.running) + 1))
    monkeypatch.setattr(cls, "start", watched)
    streamed.run(progress=False)
    assert streamed.log.tasks == {}                      # an ended attempt is no longer held
    # the log holds the running attempts and at most a batch (7) of each table beside them
    # MIXED runs 220 tasks (its 2-task job "huge" is rejected), some of them twice
    assert len(held) >= 220 and all(rows <= running + 3 * 7 for rows, running in held)
    summary = streamed.log.write(tmp_path / "streamed")
    for key in ("makespan", "jobs", "tasks", "task_queueing_delay", "utilization", "job_completion_time"):
        assert summary[key] == whole[key], key
    for table in ("shares", "events"):
        memory_rows, streamed_rows = ((tmp_path / d / f"{table}.csv").read_text() for d in ("memory", "streamed"))
        assert memory_rows == streamed_rows
    mem, st = ((tmp_path / d / "tasks.csv").read_text().splitlines() for d in ("memory", "streamed"))
    assert mem[0] == st[0] and sorted(mem[1:]) == sorted(st[1:]) and mem != st


def test_the_format_is_chosen_by_the_number_of_tasks(tmp_path, monkeypatch):
    # MIXED asks for 40+60+12+50+8+30+20+2 = 222 tasks
    assert writer.choose_format(None, 1_000_001) == "parquet" and writer.choose_format("auto", 10 ** 6) == "csv"
    monkeypatch.setattr(writer, "PARQUET_FROM", 221)
    summary = simulate(parse_config(MIXED), out=tmp_path / "big", progress=False)
    assert summary["format"] == "parquet" and (tmp_path / "big" / "events.parquet").exists()
    monkeypatch.setattr(writer, "PARQUET_FROM", 222)
    assert simulate(parse_config(MIXED), out=tmp_path / "small", progress=False)["format"] == "csv"


def test_a_parquet_table_without_a_column_is_one_clear_error(tmp_path):
    out = _runs(tmp_path, "parquet")["tsf"]
    import pyarrow.parquet as pq

    table = pq.read_table(out / "tasks.parquet").drop_columns(["start"])
    pq.write_table(table, out / "tasks.parquet")
    with pytest.raises(InputError, match=r"tasks.parquet: has no 'start' column"):
        check_run(out)


def test_plain_progress_lines_when_stderr_is_not_a_terminal(monkeypatch):
    """Every update prints once PLAIN_EVERY has passed; with 0 s the first update does."""
    monkeypatch.setattr(engine, "PLAIN_EVERY", 0.0)
    stream = io.StringIO()
    progress = engine._Progress(20_000, None, stream)
    progress.update(5_000, 1234.4)
    progress.update(5_000, 2000.0)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("rayrm simulate: 5,000 of 20,000 tasks started (25%), trace time 1,234 s")
    assert lines[1].startswith("rayrm simulate: 10,000 of 20,000 tasks started (50%), trace time 2,000 s")
    assert len(lines) == 2


def test_cli_simulate_parquet_then_check(tmp_path, capsys):
    import yaml

    from rayrm.rm.cli.main import main

    config = tmp_path / "mixed.yaml"
    config.write_text(yaml.safe_dump(MIXED))
    out = tmp_path / "run"
    assert main(["simulate", str(config), "--format", "parquet", "--out", str(out), "--no-progress"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["events.parquet", "jobs.csv", "nodes.csv",
                                                     "shares.parquet", "summary.json", "tasks.parquet"]
    capsys.readouterr()
    assert main(["check", str(out)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("OK")


def test_csv_batches_are_formatted_by_pyarrow_with_csv_writers_cells(tmp_path):
    # A batch without a cell that needs quoting goes through pyarrow: ints and text as
    # csv.writer writes them, None and NaN empty, times rounded to 6 decimals, floats in
    # their shortest spelling (1.0 -> '1', 9.8e-05 -> '0.000098'), CRLF line ends.
    sink = writer.TableSink(tmp_path, "shares", "csv")
    sink.write([(0.34, "j1", 0.0000981234, 1.0, float("nan"), 2.5, 3)])
    # a comma in a text cell: this batch is formatted in Python, quoted as csv.writer does
    sink.write([(1.0, "j,2", 0.5, None, 0.25, 0.125, 1)])
    sink.close()
    assert (tmp_path / "shares.csv").read_bytes() == (
        b"time,app,task_share,dominant_share,cpu_share,mem_share,running\r\n"
        b"0.34,j1,0.000098,1,,2.5,3\r\n"
        b'1.0,"j,2",0.5,,0.25,0.125,1\r\n')
    events = writer.TableSink(tmp_path, "events", "csv")
    events.write([(2.0, None, "start", "j1", 3, 17, "m1", ""), (2.0, None, "submit", "j2", "", "", "", "")])
    events.close()
    assert (tmp_path / "events.csv").read_bytes().splitlines()[1:] == [
        b"2,,start,j1,3,17,m1,", b"2,,submit,j2,,,,"]


def test_the_writer_thread_writes_batches_in_order_and_raises_its_errors(tmp_path):
    # Five one-row batches through the writer thread (at most MAX_QUEUED = 3 wait), the
    # third with a comma, so it is formatted in Python on that thread: the file holds them
    # in the order they were handed over, the quoted one as csv.writer quotes it.
    background = writer.Background()
    sink = writer.TableSink(tmp_path, "events", "csv", background)
    for k in range(5):
        sink.write([(float(k), None, "start", "j,1" if k == 2 else "j1", k, 10 + k, "m1", "")])
    background.drain()
    sink.close()
    assert (tmp_path / "events.csv").read_bytes().splitlines()[1:] == [
        b"0,,start,j1,0,10,m1,", b"1,,start,j1,1,11,m1,", b'2.0,,start,"j,1",2,12,m1,',
        b"3,,start,j1,3,13,m1,", b"4,,start,j1,4,14,m1,"]
    # an error on the thread reaches the caller at drain, not lost with the thread
    failing = writer.Background()

    def disk_full():
        raise OSError(28, "No space left on device")
    failing.submit(disk_full)
    with pytest.raises(OSError, match="No space left"):
        failing.drain()


def test_events_of_reads_only_the_row_groups_holding_those_kinds(tmp_path):
    # 7 events in row groups of 2: node_lost in groups 0 and 2, none of them in group 1 or 3;
    # the filtered read gives the same rows as filtering the whole table, and none when no
    # event has the kind (an empty table of the schema's columns)
    import pyarrow as pa
    import pyarrow.parquet as pq

    kinds = ["task_start", "node_lost", "task_end", "task_end", "node_lost", "node_join", "task_end"]
    table = pa.table({"time": [float(i) for i in range(7)], "wall_time": [None] * 7, "kind": kinds,
                      "app": ["a"] * 7, "task": [str(i) for i in range(7)], "container": [""] * 7,
                      "node": ["n1", "n2", "n1", "n1", "n3", "n2", "n1"], "detail": [""] * 7})
    pq.write_table(table, tmp_path / "events.parquet", row_group_size=2)
    assert pq.ParquetFile(tmp_path / "events.parquet").metadata.num_row_groups == 4
    read = read_parquet(tmp_path / "events.parquet", EVENTS, ("node_lost", "node_join"))
    whole = read_parquet(tmp_path / "events.parquet", EVENTS)
    expected = whole[whole["kind"].isin(["node_lost", "node_join"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(read, expected)
    assert list(read["time"]) == [1.0, 4.0, 5.0]
    none = read_parquet(tmp_path / "events.parquet", EVENTS, ("am_lost",))
    assert len(none) == 0 and list(none.columns) == list(EVENTS)
    pd.testing.assert_frame_equal(none, whole.iloc[:0].reset_index(drop=True), check_index_type=False)
