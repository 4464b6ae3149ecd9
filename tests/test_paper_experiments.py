"""The bundled paper configs, simulated: tsf-paper §VI-A (Fig. 5, 6, 7) and drfh-paper Fig. 4.

Each test runs the config as ``rayrm simulate`` would and checks the paper's numbers
(in the comments) on the run directory through ``rayrm.rm.runs.metrics``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rayrm.rm.runs import metrics
from rayrm.rm.core.config import load_config
from rayrm.rm.sim.engine import simulate

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """config name -> run directory (simulated once per module, under the config's policy)."""
    base = tmp_path_factory.mktemp("paper")
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = base / name
            simulate(load_config(CONFIGS / f"{name}.yaml"), out=cache[name], progress=False)
        return cache[name]
    return get


def test_micro_benchmark_reproduces_fig5(runs):
    run = runs("paper-micro")
    # t in [40, 70]: job2 on n01-n25, 2 tasks each: 2 x 25 / h2 = 50/100 = 1/2;
    # job1 on n26-n50, 2 tasks each: 2 x 25 / h1 = 50/75 = 2/3.
    early = metrics.time_averaged_shares(run, 40, 70)["task_share"]
    assert early["job2"] == pytest.approx(1 / 2, abs=0.06)
    assert early["job1"] == pytest.approx(2 / 3, abs=0.06)
    # t in [190, 240]: jobs 3 and 4 split the 20 whitelisted nodes, 20/100 = 15/75 = 1/5 each;
    # job1 keeps the other 30 nodes' worth, 2 x 30 / 100 = 3/5 (tsf-paper §VI-A2).
    late = metrics.time_averaged_shares(run, 190, 240)["task_share"]
    assert late["job3"] == pytest.approx(1 / 5, abs=0.06)
    assert late["job4"] == pytest.approx(1 / 5, abs=0.06)
    assert late["job1"] == pytest.approx(3 / 5, abs=0.06)
    # Every task finishes once: 1000 + 150 + 100 + 100 = 1350 attempts, none lost.
    tasks = pd.read_csv(run / "tasks.csv")
    assert len(tasks) == 1350 and set(tasks["status"]) == {"finished"}
    assert not tasks.duplicated(["app", "task"]).any()


def test_micro_benchmark_h_values_are_table_ii(runs):
    from rayrm.rm.core.scheduler import OnlineScheduler
    cfg = load_config(CONFIGS / "paper-micro.yaml")
    s = OnlineScheduler("tsf", cfg.dims, cfg.nodes)
    # Table II: h = 75, 100, 100, 75 (e.g. job1 <1 cpu, 512 MB>: 25 x 1 + 25 x 2 = 75).
    assert [s.submit(j.app)[0].h for j in cfg.jobs] == [75, 100, 100, 75]


def test_pools_no_job_finishes_later_under_tsf(runs):
    pool = metrics.job_completion_time(runs("paper-pools-dedicated"))
    tsf = metrics.job_completion_time(runs("paper-pools"))
    speedup = 1 - tsf / pool
    # Theorem 1: with w_i = k_i / h_i every job runs at least its pool's k_i tasks, so none
    # finishes later than in its pool (up to the float rounding of the run directory).
    assert (tsf <= pool + 1e-6).all(), speedup.to_dict()
    # Measured, seed 1 (paper: "up to 22%"): job4 uses the 1-CPU nodes job1 and job2 leave
    # (23.5%); job1, alone on n01-n25 once job2 is done after ~100 s, runs 25 tasks instead
    # of its pool's 10 (56.5%); job2 keeps exactly its pool's 30 tasks (0%); job3 3.2%.
    assert speedup["job4"] == pytest.approx(0.235, abs=0.05)
    assert speedup["job1"] == pytest.approx(0.565, abs=0.05)
    assert speedup["job2"] == pytest.approx(0.0, abs=0.02)
    assert speedup["job3"] == pytest.approx(0.032, abs=0.03)


def test_mice_are_held_at_their_fair_share_when_elephants_pile_in(runs):
    base = metrics.job_completion_time(runs("paper-mice"))
    crowd = metrics.job_completion_time(runs("paper-mice-congested"))
    change = crowd / base - 1
    # mice2 needs 10 tasks, a task share of 10/75 = 0.13, below the fair share in both runs:
    # its completion time does not move (paper Fig. 7: "not affected at all").
    assert abs(change["mice2"]) < 0.05
    # The elephants are slowed down a lot (paper: "significantly"): +126% and +139%.
    assert change["elephant1"] > 1.0 and change["elephant2"] > 1.0
    # mice1 could hold 22 tasks (task share 22/100 = 0.22).  With six elephants the equal
    # task share is at most 100 tasks / (sum of h = 75+100+75+100+100+75+100 = 625) = 0.16,
    # less where 1-CPU tasks fill 1-CPU nodes alone: measured 0.14.  TSF gives mice1 exactly
    # that — as much as any elephant — so it finishes later (+45%, not the paper's "not at
    # all"; see docs/results.md).
    shares = metrics.time_averaged_shares(runs("paper-mice-congested"), 60, 170)["task_share"]
    elephants = shares[[f"elephant{k}" for k in range(1, 7)]]
    assert shares["mice1"] == pytest.approx(elephants.mean(), abs=0.015)
    assert change["mice1"] == pytest.approx(0.45, abs=0.1)


def test_drfh_dynamic_allocation_reproduces_fig4(runs):
    run = runs("drfh-dynamic")
    # User 1 alone (paper: 40% of CPU, 62% of memory): floor-limited packing of <0.2, 0.3>.
    alone = metrics.time_averaged_shares(run, 100, 200).loc["user1"]
    assert alone["cpu_share"] == pytest.approx(0.40, abs=0.02)
    assert alone["mem_share"] == pytest.approx(0.62, abs=0.02)
    # Users 1 and 2 (paper: 44% global dominant share each): measured 45.6% and 46.0%.
    two = metrics.time_averaged_shares(run, 300, 500)["dominant_share"]
    assert two["user1"] == pytest.approx(two["user2"], abs=0.02)
    assert two["user1"] == pytest.approx(0.44, abs=0.03)
    # All three (paper: 26% each): equal within 0.02; measured 29-30% on this cluster draw.
    three = metrics.time_averaged_shares(run, 600, 1000)["dominant_share"]
    assert three.max() - three.min() < 0.02
    assert three.mean() == pytest.approx(0.26, abs=0.05)
    # User 1 departs near the paper's 1,080 s (its task count was chosen for that).
    jobs = metrics.job_times(run)
    assert jobs.loc["user1", "submit"] + jobs.loc["user1", "completion_time"] == pytest.approx(1080, abs=30)
