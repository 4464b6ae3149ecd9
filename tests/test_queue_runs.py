"""Queues in run directories: the simulator and the replay run the tree, ``rayrm check``
verifies its caps from the directory alone, and the per-queue metrics, worked by hand."""

from __future__ import annotations

import json
import math

import pytest

from rayrm.rm.core.config import parse_config
from rayrm.rm.runs.check import check_run
from rayrm.rm.runs.queues import queue_metrics
from rayrm.rm.runs.reader import RunDir
from rayrm.rm.sim.engine import Simulation

# 10 nodes <cpu:1>; a: max 30% (3 cpus), 20 tasks of 10 s; b: max_apps 2 and min 4 cpus,
# b1..b3 at t=0 and b4 at t=5, 3 tasks of 10 s each.
CAPS = {
    "name": "caps",
    "cluster": {"nodes": [{"name": "n{i:02d}", "count": 10, "capacity": {"cpu": 1, "memory_mb": 1024}}]},
    "queues": [{"name": "a", "max": {"cpu": "30%"}}, {"name": "b", "max_apps": 2, "min": {"cpu": 4}}],
    "workload": {"jobs": [{"id": "a1", "tasks": 20, "demand": {"cpu": 1}, "duration": 10, "queue": "a"}]
                 + [{"id": f"b{k}", "submit": 0 if k < 4 else 5, "tasks": 3, "demand": {"cpu": 1},
                     "duration": 10, "queue": "b", "user": "bob"} for k in range(1, 5)]
                 + [{"id": "x", "tasks": 1, "demand": {"cpu": 1}, "duration": 1, "queue": "nope"}]},
}


@pytest.fixture(scope="module")
def caps_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("caps")
    log = Simulation(parse_config(CAPS)).run()
    log.write(out)
    return out


def test_the_simulator_keeps_the_caps_and_check_verifies_them(caps_run):
    """b: b1, b2 run 0-10 s (max_apps 2), b3 and b4 10-20 s; a: 3 at a time, 20 tasks in
    seven rounds of 10 s (6 × 3 + 2): finished at 70 s."""
    run = RunDir(caps_run)
    jobs = run.jobs.set_index("app")
    assert jobs.loc[["b1", "b2", "b3", "b4"], "first_start"].tolist() == [0, 0, 10, 10]
    assert jobs.at["a1", "finish"] == 70
    assert (jobs.at["x", "status"], jobs.at["x", "reason"]) == ("rejected", "queue root.nope does not exist")
    assert (jobs.at["b1", "queue"], jobs.at["b1", "user"], jobs.at["a1", "user"]) == ("root.b", "bob", "default")
    assert json.loads((caps_run / "queues.json").read_text())[0]["max"] == {"cpu": "30%"}
    result = check_run(caps_run)
    assert result.ok and result.queues_checked == 2, result.report()
    assert "queues above max       0 starts, 0 apps above max_apps (2 queues)" in result.report()


def test_check_finds_a_queue_above_its_caps(caps_run, tmp_path):
    """The same run against tighter caps: a's max 20% = 2 cpus is broken by the third start
    of each of its six rounds of three (releases come before starts at equal times): 6;
    b's max_apps 1 by b2 at 0 s and by b4 at 10 s (b1 and b2 end at 10): 2."""
    for f in caps_run.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    tree = json.loads((caps_run / "queues.json").read_text())
    tree[0]["max"] = {"cpu": "20%"}
    tree[1]["max_apps"] = 1
    (tmp_path / "queues.json").write_text(json.dumps(tree))
    result = check_run(tmp_path)
    assert (result.queue_over_max, result.queue_over_max_apps) == (6, 2) and not result.ok
    assert result.examples["queue_over_max"][0] == "root.a at t=0: cpu 3 in use, max 2"
    # b's user bob, limited to 0.5 of the cluster's 10 cpus: at most 5; he runs 6 at 0 s and
    # 6 at 10 s (b1, b2 then b3, b4): the sixth start of each wave breaks it, 2 more
    del tree[0]["max"]
    tree[1]["user_limit"] = 0.5
    (tmp_path / "queues.json").write_text(json.dumps(tree))
    result = check_run(tmp_path)
    assert result.queue_over_max == 2
    assert result.examples["queue_over_max"] == ["user bob in root.b at t=0: cpu 6 in use, max 5",
                                                 "user bob in root.b at t=10: cpu 6 in use, max 5"]


def test_queue_metrics_worked_by_hand(caps_run):
    """Over [0, 70]: a holds 3 of h = 10 for 60 s and 2 for 10 s: (60·0.3 + 10·0.2)/70 = 2/7;
    b runs two apps of 3 tasks at a time, 6 cpus for 20 s: 20·0.6/70 = 12/70.
    Steady fair shares: equal weights water-filled between each queue's min and max as
    fractions of the 10 cpus, a in [0, 0.3] (max 30%), b in [0.4, 1] (min 4): a clamped at
    0.3 leaves R = 0.7 for b, so 0.3 and 0.7; a's ratio (2/7) / 0.3 = 20/21.  b's min of
    4 cpus: first demand at 0, 6 running at 0 s: reached at once (0 s); a has no min."""
    m = queue_metrics(RunDir(caps_run)).set_index("queue")
    assert m.at["root.a", "avg_share"] == pytest.approx(2 / 7)
    assert m.at["root.b", "avg_share"] == pytest.approx(12 / 70)
    assert (m.at["root.a", "fair_share"], m.at["root.b", "fair_share"]) == pytest.approx((0.3, 0.7))
    assert m.at["root.a", "share_ratio"] == pytest.approx(20 / 21)
    assert m.at["root.b", "min_delay"] == 0 and math.isnan(m.at["root.a", "min_delay"])


def test_a_run_without_queues_reads_as_root_default(tmp_path):
    """A config without queues writes jobs.csv without the queue and user columns, as
    before queues existed, and its readers see every job in root.default as user default."""
    doc = {k: v for k, v in CAPS.items() if k != "queues"}
    doc["workload"] = {"jobs": [dict(CAPS["workload"]["jobs"][0], queue=None)]}
    Simulation(parse_config(doc)).run().write(tmp_path)
    lines = (tmp_path / "jobs.csv").read_text().splitlines()
    assert lines[0].endswith(",reason") and "queue" not in lines[0].split(",")
    jobs = RunDir(tmp_path).jobs
    assert jobs["queue"].tolist() == ["root.default"] and check_run(tmp_path).ok
    assert not (tmp_path / "queues.json").exists()


def test_the_replay_runs_the_same_tree(local_ray, tmp_path):
    """4 nodes <cpu:1>; a (max 50%: 2 cpus) asks 6 tasks of 1 s, b 2 tasks of 1 s, and a
    job for a parent-less name is rejected: the RM actor keeps a to 2 at once (check), and
    rejects the job with the scheduler's reason."""
    pytest.importorskip("ray")
    from rayrm.rm.runtime.driver import replay   # noqa: PLC0415

    doc = {"name": "two-queues",
           "cluster": {"nodes": [{"name": "n{i}", "count": 4, "capacity": {"cpu": 1, "memory_mb": 1024}}]},
           "queues": [{"name": "a", "max": {"cpu": "50%"}}, {"name": "b"}],
           "run": {"time_scale": 0.2},
           "workload": {"jobs": [{"id": "a1", "tasks": 6, "demand": {"cpu": 1}, "duration": 1, "queue": "a"},
                                 {"id": "b1", "tasks": 2, "demand": {"cpu": 1}, "duration": 1, "queue": "b"},
                                 {"id": "c1", "tasks": 1, "demand": {"cpu": 1}, "duration": 1, "queue": "c"}]}}
    summary = replay(parse_config(doc), out=tmp_path, progress=False)
    assert summary["jobs"] == {"finished": 2, "rejected": 1}
    result = check_run(tmp_path)
    assert result.ok and result.queues_checked == 2, result.report()
    jobs = RunDir(tmp_path).jobs.set_index("app")
    assert jobs.at["c1", "reason"] == "queue root.c does not exist"
    assert jobs.at["a1", "queue"] == "root.a"


def first_wave(config: str, tmp_path):
    """Tasks started at t = 0 per queue, per user and per job, and the per-queue metrics
    over the first wave [0, 100] (every task runs 100 s)."""
    from rayrm.rm.core.config import load_config   # noqa: PLC0415

    Simulation(load_config(config)).run().write(tmp_path)
    run = RunDir(tmp_path)
    jobs = run.jobs.set_index("app")
    wave = run.tasks[run.tasks["start"] == 0]
    count = lambda col: wave.groupby(wave["app"].map(jobs[col])).size().to_dict()  # noqa: E731
    return count("queue"), count("user"), wave["app"].value_counts().to_dict(), queue_metrics(run, 0, 100)


def test_bundled_queues_weights_gives_the_shares_in_its_comments(tmp_path):
    """configs/queues-weights.yaml, worked in its comments: λ = 1/3; research 32 (8 per
    job), batch 16, adhoc 48 (24 per job); task shares eng 2/3 and research 1/3, each
    queue at its steady fair share."""
    queues, _, per_job, metrics = first_wave("configs/queues-weights.yaml", tmp_path)
    assert queues == {"root.eng.adhoc": 48, "root.eng.batch": 16, "root.research": 32}
    assert per_job == {"adhoc1": 24, "adhoc2": 24, "batch1": 16, "res1": 8, "res2": 8, "res3": 8, "res4": 8}
    m = metrics.set_index("queue")
    assert m["avg_share"].to_dict() == pytest.approx(
        {"root.eng": 2 / 3, "root.eng.batch": 1 / 6, "root.eng.adhoc": 1 / 2, "root.research": 1 / 3}, rel=1e-5)
    assert m["share_ratio"].to_numpy() == pytest.approx([1, 1, 1, 1], rel=1e-5)


def test_bundled_queues_caps_gives_the_shares_in_its_comments(tmp_path):
    """configs/queues-caps.yaml, worked in its comments: batch at its max (24), adhoc at
    max_apps 20 × 2 tasks (40), research the other 32, alice at her user limit (19 of
    0.2 × 96 = 19.2), bob 13; adhoc reached its min at once (0 s)."""
    queues, users, _, metrics = first_wave("configs/queues-caps.yaml", tmp_path)
    assert queues == {"root.eng.adhoc": 40, "root.eng.batch": 24, "root.research": 32}
    assert users == {"alice": 19, "bob": 13, "carol": 24, "dave": 40}
    assert metrics.set_index("queue").at["root.eng.adhoc", "min_delay"] == 0
    assert check_run(tmp_path).ok
