"""``rayrm sweep``: the spec, the generator's knobs, resuming, failures and sweep.csv.

The sweeps here run in this process (``Runner(inline=True)``: the same calls, no Ray);
tests/test_experiments.py runs them on Ray.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from rayrm.rm.cli.main import main
from rayrm.rm.core.errors import InputError
from rayrm.rm.runs.compare import comparison, interval
from rayrm.rm.runtime.experiments import Progress, Runner
from rayrm.rm.runtime.sweep import read_manifest, run_sweep
from rayrm.rm.runtime.sweep_spec import cell_identity, load_spec, run_key, version
from rayrm.traces.generate import generate_google, write_google

ROOT = Path(__file__).resolve().parents[1]

TINY = {"workload": {"generate": "google", "nodes": 20, "jobs": 40, "tasks": 400, "max_duration": 600},
        "grid": {"load": [0.5, 2.0]}, "policies": ["tsf", "cdrf"], "baseline": "tsf", "seeds": "1-2"}


def _spec(tmp_path, doc, name="spec.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return load_spec(path)


def _sweep(spec, out, lines=None):
    return run_sweep(spec, out, Runner(inline=True), log=(lines.append if lines is not None else lambda s: None))


# ----- the spec ----------------------------------------------------------------

def test_the_example_spec_names_six_cells_of_thirty_simulations_each():
    spec = load_spec(ROOT / "examples" / "sweeps" / "load-nodes.yaml")
    # 3 loads x 2 cluster sizes, the first axis slowest; 10 seeds x 3 policies per cell.
    assert [c.label for c in spec.cells()] == ["load=0.5,nodes=100", "load=0.5,nodes=200", "load=1.0,nodes=100",
                                               "load=1.0,nodes=200", "load=2.0,nodes=100", "load=2.0,nodes=200"]
    assert spec.seeds == tuple(range(1, 11)) and spec.policies == ("tsf", "drf", "cdrf")
    assert spec.baseline == "tsf"


@pytest.mark.parametrize("change, field", [
    ({"grid": {"color": [1, 2]}}, "grid.color"),
    ({"baseline": "fifo"}, "baseline"),
    ({"seeds": "3-x"}, "seeds"),
    ({"grid": {"load": []}}, "grid.load"),
    ({"grid": {"heartbeat_interval": [0]}}, "grid.heartbeat_interval"),
    ({"workload": {"generate": "google", "nodez": 3}}, "workload.nodez"),
    ({"workload": {"config": "missing.yaml"}}, "workload.config"),
    ({"policies": "tsf,tsf"}, "policies"),
])
def test_a_bad_spec_names_its_file_and_field(tmp_path, change, field):
    with pytest.raises(InputError) as e:
        _spec(tmp_path, {**TINY, **change})
    assert e.value.field == field and e.value.file == str(tmp_path / "spec.yaml")


def test_a_bad_spec_is_one_line_and_exit_status_2(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**TINY, "policies": ["tsf", "nosuch"]}))
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"rayrm sweep: error: {path}: field 'policies': unknown policy 'nosuch'")


def test_a_run_key_changes_with_the_cell_seed_policy_and_version(tmp_path):
    spec = _spec(tmp_path, TINY)
    low, high = spec.cells()
    ident = cell_identity(spec, low)
    # the cell's options are complete: the spec's, the grid's, the generator's defaults
    assert ident["options"]["load"] == 0.5 and ident["options"]["nodes"] == 20
    assert ident["options"]["rarity"] == 1.0 and ident["options"]["seed"] == 1
    keys = {run_key(ident, 1, "tsf", "1"), run_key(cell_identity(spec, high), 1, "tsf", "1"),
            run_key(ident, 2, "tsf", "1"), run_key(ident, 1, "cdrf", "1"), run_key(ident, 1, "tsf", "2")}
    assert len(keys) == 5


# ----- the generator's knobs ---------------------------------------------------

def test_the_default_knobs_give_the_calibrated_workload_byte_for_byte(tmp_path):
    write_google(tmp_path / "g.yaml", 60, 120, 2000, 7, load=1.5, max_duration=900)
    digest = hashlib.sha256((tmp_path / "g.yaml").read_bytes() + (tmp_path / "g.jobs.csv").read_bytes())
    # sha256 of the same two files written by the generator before it had knobs
    assert digest.hexdigest() == "1f840ca68d36ca9ed620b27d487da7c2a7c910f1d5887b38ecd886aeec02e86d"
    defaults = dict(unconstrained=0.16, rarity=1.0, task_scale=1.0, heterogeneity=1.0)
    write_google(tmp_path / "k.yaml", 60, 120, 2000, 7, load=1.5, max_duration=900, **defaults)
    assert (tmp_path / "k.jobs.csv").read_bytes() == (tmp_path / "g.jobs.csv").read_bytes()


def test_each_knob_moves_the_workload_the_way_it_says():
    def stats(**kw):
        return generate_google(100, 200, 2000, 3, **kw)

    # every job unconstrained: all run anywhere; none: only those whose constraints all machines meet
    assert stats(unconstrained=1.0)[2]["jobs_all_machines"] == 1.0
    assert stats(unconstrained=0.0)[2]["jobs_all_machines"] < stats()[2]["jobs_all_machines"]
    # rarer attributes, every job constrained: fewer eligible machines, more jobs on <= 20% of them
    # (here 0.26 -> 0.18 and 64% -> 72%)
    tight, loose = stats(unconstrained=0.0, rarity=2.0)[2], stats(unconstrained=0.0)[2]
    assert tight["mean_eligible"] < loose["mean_eligible"]
    assert tight["jobs_le_20pct"] > loose["jobs_le_20pct"]
    # tasks twice as large: CPU choices 0.5, 1, 2, 4, 8; the offered load is kept at 1
    _, jobs, st = stats(task_scale=2.0)
    assert {j.app.demand["cpu"] for j in jobs} <= {0.5, 1.0, 2.0, 4.0, 8.0}
    assert st["cpu_load"] == pytest.approx(1.0, rel=0.05)
    # no heterogeneity: every machine the class-A server, 0.5 x 16 cores, 0.5 x 65536 MB
    doc = stats(heterogeneity=0.0)[0]
    assert {(g["capacity"]["cpu"], g["capacity"]["memory_mb"]) for g in doc["cluster"]["nodes"]} == {(8, 32768)}


def test_a_knob_outside_its_range_is_an_input_error():
    with pytest.raises(InputError, match="must be a number in \\[0, 1\\]") as e:
        generate_google(10, 10, 10, 1, unconstrained=1.5)
    assert e.value.field == "--unconstrained"


# ----- running, resuming, failing ----------------------------------------------

def test_sweep_csv_holds_compares_statistics_over_the_seeds(tmp_path):
    spec = _spec(tmp_path, TINY)
    assert _sweep(spec, tmp_path / "out").failed == []
    table = pd.read_csv(tmp_path / "out" / "sweep.csv")
    # one row per cell x compared policy: 2 loads x cdrf
    assert list(zip(table["load"], table["policy"])) == [(0.5, "cdrf"), (2.0, "cdrf")]
    assert list(table["seeds"]) == [2, 2]
    # the row of load 2 is interval() of the two seeds' comparison tables, as compare --seeds gives
    records = read_manifest(tmp_path / "out")
    ident = cell_identity(spec, spec.cells()[1])
    shares = []
    for seed in (1, 2):
        dirs = {p: tmp_path / "out" / "runs" / run_key(ident, seed, p, version()) for p in ("tsf", "cdrf")}
        assert all(records[d.name]["status"] == "ok" for d in dirs.values())
        shares.append(comparison(dirs)[0].loc["cdrf", "tasks_tsf_shortened"])
    want = interval(shares)
    row = table.iloc[1]
    assert row["tasks_tsf_shortened_mean"] == pytest.approx(want["mean"], abs=1e-6)
    assert row["tasks_tsf_shortened_min"] == pytest.approx(min(shares), abs=1e-6)
    # shares of tasks add up to one
    total = row[["tasks_tsf_shortened_mean", "tasks_tsf_equal_mean", "tasks_tsf_lengthened_mean"]].sum()
    assert total == pytest.approx(1.0)
    # the net share is shortened - lengthened per seed; its mean is the difference of the means
    assert row["tasks_tsf_net_mean"] == pytest.approx(row["tasks_tsf_shortened_mean"]
                                                      - row["tasks_tsf_lengthened_mean"], abs=1e-6)
    assert (tmp_path / "out" / "report" / "index.html").exists()
    assert (tmp_path / "out" / "report" / "tasks_tsf_shortened.png").exists()


def test_a_second_run_does_nothing_and_says_so(tmp_path):
    spec = _spec(tmp_path, TINY)
    _sweep(spec, tmp_path / "out")
    before = (tmp_path / "out" / "manifest.jsonl").read_text()
    lines = []
    result = _sweep(spec, tmp_path / "out", lines)
    # 2 cells x 2 seeds x 2 policies = 8, all finished
    assert (result.total, result.skipped, result.ran) == (8, 8, 0)
    assert "8 already finished" in lines[0] and lines[1].startswith("nothing to run")
    assert (tmp_path / "out" / "manifest.jsonl").read_text() == before


def test_a_grown_grid_reuses_the_cells_it_still_contains(tmp_path):
    _sweep(_spec(tmp_path, TINY), tmp_path / "out")
    grown = _spec(tmp_path, {**TINY, "grid": {"load": [0.5, 1.0, 2.0]}}, "grown.yaml")
    result = _sweep(grown, tmp_path / "out")
    # 3 cells x 4 simulations; the 8 of loads 0.5 and 2.0 are reused, load 1.0's 4 run
    assert (result.total, result.skipped, result.ran) == (12, 8, 4)
    assert list(pd.read_csv(tmp_path / "out" / "sweep.csv")["load"]) == [0.5, 1.0, 2.0]


def test_a_failing_cell_is_recorded_and_the_others_go_on(tmp_path, capsys):
    # 30 tasks are fewer than the 40 jobs: that cell's workload cannot be generated
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**TINY, "grid": {"tasks": [30, 400]}}))
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--workers", "1"]) == 1
    records = list(read_manifest(tmp_path / "out").values())
    failed = [r for r in records if r["status"] == "failed"]
    assert len(records) == 8 and len(failed) == 4
    assert {r["cell"]["tasks"] for r in failed} == {30}
    assert "must be at least 40, got 30" in failed[0]["error"]
    table = pd.read_csv(tmp_path / "out" / "sweep.csv")
    assert list(table["seeds"]) == [0, 2] and list(table["failed_runs"]) == [4, 0]
    assert np.isnan(table["tasks_tsf_shortened_mean"].iloc[0])
    assert "4 simulation(s) failed" in capsys.readouterr().out


def test_the_manifest_ignores_a_line_cut_short(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.jsonl").write_text(json.dumps({"key": "a", "status": "ok"}) + '\n{"key": "b", "sta')
    assert list(read_manifest(out)) == ["a"]


def test_progress_lines_say_done_failures_rate_and_time_left():
    import io
    stream, now = io.StringIO(), [0.0]
    progress = Progress(3, "sweep", every=5.0, stream=stream, clock=lambda: now[0])
    now[0] = 30.0
    assert progress.step(True)          # 30 s since the start: a line
    now[0] = 32.0
    assert not progress.step(False)     # 2 s since the last line: none
    now[0] = 40.0
    progress.tick()                     # nothing finished, but 10 s passed: a line
    now[0] = 41.0
    assert progress.step(True)          # the last one always prints
    # 1 done in 30 s: 2.0/min, 2 left at 30 s each; 2 in 40 s: 3.0/min, 1 x 20 s left; 3 in 41 s
    assert stream.getvalue().splitlines() == ["sweep: 1/3 done, 0 failed, 2.0/min, 1m00s left",
                                              "sweep: 2/3 done, 1 failed, 3.0/min, 20s left",
                                              "sweep: 3/3 done, 1 failed, 4.4/min, done"]


def test_a_config_workload_varies_its_run_settings(tmp_path):
    micro = ROOT / "configs" / "paper-micro.yaml"
    spec = _spec(tmp_path, {"workload": {"config": str(micro)}, "grid": {"max_attempts": [1, 3]},
                            "policies": ["tsf", "drf"], "seeds": [1]})
    # a run setting is an axis named run.<setting>; the cell's identity is the file's digest and it
    assert spec.axes == ["run.max_attempts"]
    one, three = (cell_identity(spec, c) for c in spec.cells())
    assert one["config"] == three["config"] and (one["run"], three["run"]) == ({"max_attempts": 1},
                                                                                 {"max_attempts": 3})
    result = _sweep(spec, tmp_path / "out")
    # 2 cells x 1 seed x 2 policies
    assert (result.total, result.ran, result.failed) == (4, 4, [])
    assert list(pd.read_csv(tmp_path / "out" / "sweep.csv")["run.max_attempts"]) == [1, 3]


def test_a_sweep_without_a_grid_is_one_cell_with_its_report(tmp_path):
    spec = _spec(tmp_path, {**TINY, "grid": {}})
    assert [c.label for c in spec.cells()] == ["(no grid)"]
    # 1 cell x 2 seeds x 2 policies
    assert _sweep(spec, tmp_path / "out").ran == 4
    assert list(pd.read_csv(tmp_path / "out" / "sweep.csv")["policy"]) == ["cdrf"]
    assert (tmp_path / "out" / "report" / "tasks_tsf_net.png").exists()
