"""Preemption in the simulator: the worked example of configs/queues-preemption.yaml, by hand,
under tsf on the tree, yarn-fair and yarn-capacity; a victim that finishes first is spared."""

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from rayrm.rm.core.config import parse_config
from rayrm.rm.runs.check import check_run
from rayrm.rm.sim.engine import simulate

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "queues-preemption.yaml"


def example(policy: str) -> dict:
    doc = yaml.safe_load(CONFIG.read_text())
    doc["policy"] = policy
    if policy == "yarn-capacity":       # alice's user limit would stop a at 9 of the 16 slots
        doc["queues"][0]["user_limit_factor"] = 2
    return doc


def run(doc: dict, out: Path) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    summary = simulate(parse_config(doc), out=out, progress=False)
    return summary, pd.read_csv(out / "tasks.csv"), pd.read_csv(out / "events.csv")


@pytest.mark.parametrize("policy", ["tsf", "yarn-fair", "yarn-capacity"])
def test_the_worked_example(policy, tmp_path):
    summary, tasks, events = run(example(policy), tmp_path / policy)
    pre = tasks[tasks.status == "preempted"]
    # t = 70 (10 + fair_share_timeout 60): k = ⌈(1/2 − 0) · 16⌉ = 8 of a's 16 containers,
    # warned, killed at 70 + 15 = 85 after running since 0
    assert len(pre) == 8
    assert set(pre.app) == {"a1"} and set(pre.start) == {0.0} and set(pre.finish) == {85.0}
    warned = events[events.kind == "preempt_warned"]
    assert list(warned.time) == [70.0] * 8
    assert sorted(warned.container) == list(range(9, 17))       # the 8 newest containers
    # the 8 tasks run again, new attempts asked for at the kill
    again = tasks.merge(pre[["app", "task"]], on=["app", "task"])
    assert set(again[again.attempt == 1].submit) == {85.0}
    # b takes the 8 freed slots at 85
    b = tasks[tasks.app == "b1"]
    assert (b.start == 85.0).sum() == 8
    p = summary["preemption"]
    # lost work: 8 attempts × 85 s = 680 task-seconds; starvation 10 → 85 = 75 s
    assert p["preempted"] == 8 and p["spared"] == 0 and p["warned"] == 8
    assert p["queues"]["root.a"] == {"preempted_containers": 8, "lost_task_seconds": 680.0}
    assert p["queues"]["root.b"]["starved"] == [{"start": 10.0, "restored": 85.0, "seconds": 75.0}]
    assert summary["tasks"]["preempted"] == 8 and summary["tasks"]["finished"] == 60
    result = check_run(tmp_path / policy)
    # a preempted attempt is neither lost nor a second finish: every task finished once
    assert result.ok and result.finished_twice == 0 and result.tasks_missing == 0
    assert result.attempts_by_status["preempted"] == 8


def test_a_victim_that_finishes_first_is_spared(tmp_path):
    doc = example("tsf")
    doc["workload"]["jobs"][0]["duration"] = 80
    summary, tasks, events = run(doc, tmp_path / "spared")
    # warned at 70 (deadline 85), but a's first 16 tasks finish at 80: none is killed, and
    # b takes its 8 slots at 80, when its starvation (10 → 80) ends
    assert (tasks.status == "preempted").sum() == 0
    assert list(events[events.kind == "preempt_warned"].time) == [70.0] * 8
    p = summary["preemption"]
    assert p["warned"] == 8 and p["preempted"] == 0 and p["spared"] == 8
    assert p["queues"]["root.b"]["starved"] == [{"start": 10.0, "restored": 80.0, "seconds": 70.0}]
    assert check_run(tmp_path / "spared").ok


def test_off_by_default_writes_nothing_of_preemption(tmp_path):
    doc = example("tsf")
    del doc["preemption"]
    summary, tasks, _ = run(doc, tmp_path / "off")
    assert "preemption" not in summary and "preempted" not in summary["tasks"]
    assert set(tasks.status) == {"finished"}
    # a keeps all 16 slots until its first wave ends at 1000: b waits
    assert tasks[tasks.app == "b1"].start.min() == 1000.0


def test_rest_apps_report_preemption_in_yarns_fields(tmp_path):
    from rayrm.rm.ui import yarn
    from rayrm.rm.ui.rundir import RunDirSource
    run(example("tsf"), tmp_path / "ui")
    view = RunDirSource(tmp_path / "ui").view()
    apps = {a["id"]: a for a in yarn.apps(view, {})[0]["apps"]["app"]}
    # a1: 8 containers of <1 CPU, 1024 MB> preempted: 8192 MB, 8 vcores; no AM container
    a1 = apps["a1"]
    assert (a1["preemptedResourceMB"], a1["preemptedResourceVCores"]) == (8192, 8)
    assert (a1["numNonAMContainerPreempted"], a1["numAMContainerPreempted"]) == (8, 0)
    assert apps["b1"]["numNonAMContainerPreempted"] == 0
