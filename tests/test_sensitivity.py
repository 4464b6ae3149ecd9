"""Launch jitter in the simulator and ``rayrm sensitivity`` (rayrm.rm.sim.sensitivity)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from rayrm.rm.cli.main import main
from rayrm.rm.core.config import load_config, parse_config
from rayrm.rm.core.errors import InputError
from rayrm.rm.sim.sensitivity import completion_spread, completion_times
from rayrm.rm.sim.engine import Simulation, simulate

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

# One <1 CPU> node and one job of three 1-CPU tasks of 10 s each: they run one after another.
SERIAL = {
    "name": "serial",
    "cluster": {"nodes": [{"name": "n1", "capacity": {"cpu": 1, "memory_mb": 1024}}]},
    "workload": {"jobs": [{"id": "a", "submit": 0, "tasks": 3, "demand": {"cpu": 1, "memory_mb": 512},
                           "duration": 10}]},
    "run": {"seed": 3},
}


def _tasks(doc, tmp_path, **jitter):
    out = tmp_path / "run"
    simulate(parse_config(doc), out=out, progress=False, **jitter)
    return pd.read_csv(out / "tasks.csv").sort_values("start").reset_index(drop=True)


def test_without_jitter_the_serial_job_takes_exactly_three_durations(tmp_path):
    tasks = _tasks(SERIAL, tmp_path)
    # Starts 0, 10, 20; the job completes at 3 x 10 = 30 s.
    assert list(tasks["start"]) == [0, 10, 20]
    assert completion_times(parse_config(SERIAL)) == {"a": 30.0}


def test_jitter_delays_each_start_by_at_most_its_bound_and_keeps_durations(tmp_path):
    tasks = _tasks(SERIAL, tmp_path, launch_jitter=2.0, jitter_seed=5)
    # Each task runs its full 10 s from its (late) start...
    assert (tasks["finish"] - tasks["start"]).tolist() == pytest.approx([10, 10, 10])
    # ...which comes 0..2 s after its allocation: 0 for the first, the previous finish after.
    allocated = [0.0] + tasks["finish"].tolist()[:-1]
    delays = tasks["start"] - allocated
    assert ((delays >= 0) & (delays <= 2.0)).all()
    assert delays.sum() > 0                        # three U(0, 2) draws are not all zero
    # So the completion lies in [30, 30 + 3 x 2 = 36].
    assert 30 < tasks["finish"].max() <= 36


def test_jitter_draws_are_fixed_by_their_seed_and_leave_durations_alone():
    cfg = load_config(CONFIGS / "paper-micro.yaml")
    one = completion_times(cfg, "tsf", 1, jitter=0.5, jitter_seed=1)
    assert completion_times(cfg, "tsf", 1, jitter=0.5, jitter_seed=1) == one
    assert completion_times(cfg, "tsf", 1, jitter=0.5, jitter_seed=2) != one
    # The durations are the seed's, whatever the jitter.
    plain = Simulation(cfg, "tsf", 1)
    shaken = Simulation(cfg, "tsf", 1, launch_jitter=0.5, jitter_seed=9)
    plain.run(progress=False)
    shaken.run(progress=False)
    assert shaken.jobs["job3"].durations == plain.jobs["job3"].durations


def test_negative_jitter_is_refused():
    with pytest.raises(InputError, match="launch jitter"):
        Simulation(parse_config(SERIAL), launch_jitter=-1)


def test_micro_benchmark_job3_hangs_on_the_order_of_events():
    """tsf-paper Table II: job3's completion time swings by over 10% under 0.01 s of jitter.

    Jobs 3 and 4 share 20 nodes at nearly equal task shares, so whether a freed 1-CPU
    node goes to job3 (two 0.5-CPU tasks) or job4 (one 1-CPU task, half the memory
    idle) turns on which job1 task ends first; job3 gets 18 to 21 slots for its 100
    tasks.  job2 runs alone on nodes 1-25 and does not move.
    """
    cfg = load_config(CONFIGS / "paper-micro.yaml")
    table = completion_spread(cfg, "tsf", 1, jitter=0.01, runs=20)
    assert list(table.index) == ["job1", "job2", "job3", "job4"]
    assert table.at["job3", "exact"] == pytest.approx(120.9, abs=0.1)   # docs/results-replay.md's figure
    job2 = table.loc["job2"]
    assert job2["max"] / job2["min"] - 1 < 0.01
    job3 = table.loc["job3"]
    assert job3["max"] / job3["min"] - 1 > 0.10


def test_sensitivity_command_prints_the_table_and_writes_csv(tmp_path, capsys):
    config = tmp_path / "serial.yaml"
    config.write_text(yaml.safe_dump(SERIAL))
    out = tmp_path / "spread.csv"
    assert main(["sensitivity", str(config), "--jitter", "1", "--runs", "3", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "over 3 runs with launch jitter U(0, 1 s)" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("a "))
    assert row.split()[1] == "30.0"                 # the exact run: 3 x 10 s
    table = pd.read_csv(out, index_col="app")
    assert table.at["a", "exact"] == 30.0
    assert 30.0 < table.at["a", "min"] <= table.at["a", "max"] <= 33.0    # 3 draws of U(0, 1)


def test_sensitivity_command_refuses_a_bad_jitter(tmp_path, capsys):
    assert main(["sensitivity", str(CONFIGS / "paper-micro.yaml"), "--jitter", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["rayrm sensitivity: error: field '--jitter': must be positive, got 0.0"]
