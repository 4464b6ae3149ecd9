"""benchmarks/bench_rm_throughput.py: its arithmetic, and one run on a tiny trace whose
table counts every task of the trace once, in the replay and in the simulator."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

from rayrm.traces.google_workload import write_google

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_rm_throughput.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_rm_throughput", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_derived_columns_are_rates_and_cpu_per_unit_of_work():
    bench = _bench()
    r = {"wall_s": 10.0, "allocations": 2000, "heartbeats": 500_000, "rm_cpu_s": 1.6,
         "sim_cpu_s": 0.09, "sim_tasks": 2000}
    got = bench.figures(r)
    # 2,000 allocations / 10 s = 200/s; 500,000 beats / 10 s = 50,000/s;
    # RM 1.6 s / 2,000 = 0.8 ms; sim 0.09 s / 2,000 = 45 µs; 800 µs / 45 µs = 17.78
    # RM cores: 1.6 s of CPU over 10 s of wall = 0.16
    assert got["alloc_per_s"] == 200.0 and got["heartbeats_per_s"] == 50_000.0 and got["rm_cores"] == 0.16
    assert math.isclose(got["rm_cpu_ms_per_alloc"], 0.8) and math.isclose(got["sim_cpu_us_per_task"], 45.0)
    assert math.isclose(got["ratio"], 800 / 45)
    row = {"nodes": 1000, "trace_tasks": 180_000, "time_scale": 0.02, "beat_wall_ms": 20.0, "until": 1800.0,
           "kept_pace": True, "behind_fraction": 0.031, **r, **got}
    assert bench.cells(row) == ("1000", "180000", "0.02", "20", "1800", "10", "2000", "200", "50000",
                                "True (3.1%)", "0.16", "0.800", "45.0", "17.8", "-", "-")
    # --paced: the simulator paced took 0.18 s / 2,000 = 90 µs a task; 800 µs / 90 µs = 8.89
    paced = bench.figures(r | {"sim_paced_cpu_s": 0.18})
    assert math.isclose(paced["sim_paced_us_per_task"], 90.0) and math.isclose(paced["ratio_to_paced"], 800 / 90)
    assert bench.cells(row | paced)[-2:] == ("90.0", "8.9")


def test_a_tiny_trace_counts_every_task_once_in_the_replay_and_the_simulator(tmp_path):
    config = tmp_path / "tiny.yaml"
    # 12 nodes, 8 jobs, 60 tasks arriving over 60 trace seconds, none longer than 20 s:
    # at time scale 0.05 the whole trace is a few wall seconds
    write_google(config, 12, 8, 60, 3, span=60, max_duration=20)
    out = tmp_path / "bench"
    done = subprocess.run([sys.executable, str(SCRIPT), "--config", str(config), "--time-scales", "0.05",
                           "--until", "0", "--paced", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = json.loads((out / "rows.json").read_text())
    # the whole trace ran: each of the 60 tasks was allocated and ran once, in both drivers
    assert (row["nodes"], row["trace_tasks"], row["allocations"], row["sim_tasks"]) == (12, 60, 60, 60)
    assert row["interrupted"] is False and row["tasks_finished_twice"] == 0
    # every NM registered and heartbeat at least once; the RM and the simulator both did work
    assert row["heartbeats"] >= 12 and row["rm_cpu_s"] > 0 and row["sim_cpu_s"] > 0
    assert math.isclose(row["alloc_per_s"] * row["wall_s"], 60)
    assert math.isclose(row["ratio"], 1000 * row["rm_cpu_ms_per_alloc"] / row["sim_cpu_us_per_task"])
    # --paced ran the simulator a second time, stopped and resumed, to its end: the same 60 tasks
    paced = json.loads((out / "sim-tiny-paced-0.05" / "summary.json").read_text())
    assert sum(paced["tasks"].values()) == 60 and row["sim_paced_cpu_s"] > 0
    assert math.isclose(row["ratio_to_paced"], 1000 * row["rm_cpu_ms_per_alloc"] / row["sim_paced_us_per_task"])
    assert isinstance(row["kept_pace"], bool)
    header, rule, line = done.stdout.strip().splitlines()[-5:-2]
    assert header.startswith("| NMs ") and line.startswith("| 12 ") and "| 60 " in line
