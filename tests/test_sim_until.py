"""``rayrm simulate --until T``: a partial run, written as an interrupted replay writes one,
so a replay stopped by ``--until`` (or a signal) has a simulated twin.

The instance: one node a <1 cpu, 1 GB>; job j submits at 0 with 3 tasks of <1 cpu,
512 MB> lasting exactly 10 s, so they run one after another: t0 0–10, t1 10–20, t2 20–30;
job k submits at 25.
"""

from __future__ import annotations

import json

import pytest
import yaml

from rayrm.rm.cli.main import main
from rayrm.rm.core.config import parse_config
from rayrm.rm.core.errors import InputError
from rayrm.rm.runs.check import check_run
from rayrm.rm.runs.reader import RunDir
from rayrm.rm.sim.engine import simulate

DOC = {
    "name": "until",
    "cluster": {"nodes": [{"name": "a", "capacity": {"cpu": 1, "memory_mb": 1024}}]},
    "workload": {"jobs": [
        {"id": "j", "submit": 0, "tasks": 3, "demand": {"cpu": 1, "memory_mb": 512}, "duration": 10},
        {"id": "k", "submit": 25, "tasks": 1, "demand": {"cpu": 1, "memory_mb": 512}, "duration": 10}]},
    "run": {"seed": 1},
}


def test_until_stops_at_t_and_writes_what_ran(tmp_path, capsys):
    path = tmp_path / "until.yaml"
    path.write_text(yaml.safe_dump(DOC))
    assert main(["simulate", str(path), "--until", "15", "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    run = RunDir(tmp_path / "run")
    # by 15: t0 finished at 10, t1 started at 10 and is still running, t2 never started
    rows = sorted((r.task, r.start, r.status) for r in run.tasks.itertuples(index=False))
    assert rows == [(0, 0.0, "finished"), (1, 10.0, "running")]
    jobs = run.jobs.set_index("app")
    assert list(jobs.index) == ["j"]            # k arrives at 25, after the cut
    assert jobs.at["j", "status"] == "unfinished"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["interrupt_reason"] == "--until 15"
    result = check_run(tmp_path / "run")
    assert result.ok and result.interrupted == "--until 15" and result.jobs_unfinished == 1


def test_until_after_the_last_event_is_a_whole_run(tmp_path):
    # k arrives at 25 while t2 holds a, starts when t2 ends at 30 and ends at 40: the last
    # event, so a cut at 40 stops nothing
    summary = simulate(parse_config(DOC), out=tmp_path / "run", progress=False, until=40)
    assert "interrupted" not in summary
    assert summary["makespan"] == pytest.approx(40.0)
    assert check_run(tmp_path / "run").ok


def test_until_must_not_be_negative():
    with pytest.raises(InputError, match="--until"):
        simulate(parse_config(DOC), progress=False, until=-1)
