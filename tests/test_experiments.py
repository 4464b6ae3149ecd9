"""Simulations as Ray tasks (rayrm.rm.runtime.experiments) and ``rayrm sweep`` on Ray:
a cell's run is ``rayrm simulate``'s, a failure stays one outcome, a killed sweep resumes
to the same sweep.csv as an uninterrupted one.  One local Ray session for the module;
the ``rayrm sweep`` subprocesses join it with ``--address``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rayrm.rm.cli.main import main
from rayrm.rm.core.config import load_config
from rayrm.rm.runtime import experiments
from rayrm.rm.runtime.experiments import Runner, Shared, resolve, simulate_files
from rayrm.rm.runtime.sweep import read_manifest, run_sweep
from rayrm.rm.runtime.sweep_spec import load_spec

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.usefixtures("local_ray")


def _quiet(_line):
    pass


def _same_run_directory(a: Path, b: Path) -> None:
    """Every file byte for byte, summary.json up to its wall time."""
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        if name == "summary.json":
            sa, sb = (json.loads((d / name).read_text()) for d in (a, b))
            assert {k: v for k, v in sa.items() if k != "wall_seconds"} == \
                   {k: v for k, v in sb.items() if k != "wall_seconds"}
        else:
            assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_a_cells_run_is_what_rayrm_simulate_gives(tmp_path):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({
        "workload": {"generate": "google", "nodes": 20, "jobs": 40, "tasks": 400, "max_duration": 600},
        "grid": {"heterogeneity": [0.5]}, "policies": ["tsf", "cmmf-mem"], "seeds": [3]}))
    out = tmp_path / "sweep"
    result = run_sweep(load_spec(spec_path), out, Runner(workers=2), keep_runs=True, log=_quiet)
    assert (result.ran, result.failed) == (2, [])
    (cell,) = (out / "cells").iterdir()
    for rec in read_manifest(out).values():
        mine = tmp_path / f"simulate-{rec['policy']}"
        assert main(["simulate", str(cell / "cell.yaml"), "--policy", rec["policy"], "--seed", "3",
                     "--out", str(mine)]) == 0
        _same_run_directory(out / "runs" / rec["key"], mine)


def test_a_failing_call_is_one_outcome_and_the_others_finish():
    cfg = load_config(ROOT / "configs" / "paper-micro.yaml")
    with Runner(workers=2) as runner:
        ref = runner.share(cfg)
        calls = [("good", simulate_files, (ref, "tsf", 1, "none")),
                 ("bad", simulate_files, (ref, "tsf", 1, "sometimes")),
                 ("good too", simulate_files, (ref, "drf", 1, "none"))]
        outcomes = {o.key: o for o in runner.map(calls)}
    assert outcomes["bad"].error.startswith("ValueError: keep must be all, compact or none, got 'sometimes'")
    # paper-micro: four jobs, every one finished under both policies
    assert [outcomes[k].value.summary["jobs"] for k in ("good", "good too")] == [{"finished": 4}] * 2
    assert outcomes["good"].node != ""


def test_a_shared_object_is_decoded_once_per_process_and_the_last_few_kept():
    import ray

    first = Shared(ray.put({"jobs": [1, 2, 3]}))
    # ray.get decodes afresh each time; resolve keeps what it decoded
    assert ray.get(first.ref) is not ray.get(first.ref)
    kept = resolve(first)
    assert kept == {"jobs": [1, 2, 3]} and resolve(first) is kept
    assert resolve("tsf") == "tsf"
    for k in range(experiments.KEEP_SHARED):        # KEEP_SHARED newer ones push the first out
        resolve(Shared(ray.put({"jobs": [k]})))
    assert resolve(first) is not kept and resolve(first) == kept


def test_runs_on_a_config_a_worker_kept_are_the_runs_on_a_fresh_one():
    cfg = load_config(ROOT / "configs" / "paper-micro.yaml")
    policies = ["tsf", "drf", "tsf", "drf"]
    with Runner(workers=1) as runner:
        ref = runner.share(cfg)
        calls = [(k, simulate_files, (ref, p, 2, "all")) for k, p in enumerate(policies)]
        kept = {o.key: o.value for o in runner.map(calls)}
    for k, p in enumerate(policies):
        fresh = simulate_files(load_config(ROOT / "configs" / "paper-micro.yaml"), p, 2, "all")
        assert {n: b for n, b in kept[k].files.items() if n != "summary.json"} == \
               {n: b for n, b in fresh.files.items() if n != "summary.json"}, (k, p)


def _manifest_lines(out: Path) -> int:
    path = out / "manifest.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_killed_sweep_resumes_to_the_same_sweep_csv(tmp_path):
    import ray

    spec = {"workload": {"generate": "google", "nodes": 30, "jobs": 60, "tasks": 1500, "max_duration": 600},
            "grid": {"load": [0.5, 1.0, 2.0]}, "policies": ["tsf", "drf"], "seeds": "1-4"}
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "rayrm.rm.cli.main", "sweep", str(spec_path), "--out", str(out),
           "--workers", "1", "--address", ray.get_runtime_context().gcs_address]
    driver = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    deadline = time.monotonic() + 240
    while _manifest_lines(out) < 6 and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)          # polling the manifest: the event is a line being appended
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=60)
    done = _manifest_lines(out)
    # 3 loads x 4 seeds x 2 policies = 24 simulations; killed with at least 6 and not all done
    assert 6 <= done < 24
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"{done} already finished" in again.stdout
    # an uninterrupted sweep (in this process) writes the same table
    whole = tmp_path / "whole"
    run_sweep(load_spec(spec_path), whole, Runner(inline=True), log=_quiet)
    assert (out / "sweep.csv").read_text() == (whole / "sweep.csv").read_text()
    last = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert last.returncode == 0 and "nothing to run" in last.stdout


def test_spread_puts_each_task_on_the_node_with_the_most_free_cpus():
    def node(name, cpus, alive=True):
        return {"NodeID": name, "Alive": alive, "Resources": {"CPU": cpus} if cpus else {}}

    spread = experiments.Spread([node("a", 2), node("b", 1), node("c", 0), node("d", 4, alive=False)])
    # free CPUs (a, b) before each place: (2, 1) -> a; (1, 1), a given one more -> b;
    # (1, 0) -> a; (0, 0), a given 2 and b 1 -> b.  c has no CPU and d is dead: never.
    assert [spread.place() for _ in range(4)] == ["a", "b", "a", "b"]
    spread.release("a")
    assert spread.place() == "a"          # free (1, -1)
    spread.refresh([node("b", 1)])
    assert spread.place() is None         # one node left: Ray places the task itself
