"""The Google-like generator reaches the papers' workload statistics (tsf-paper §VI-B).

Sizes are fixed (seeded), so every number here is deterministic; the tolerances say
how far the *model* may sit from the paper, sized from the spread over seeds 1..10 at
this size (500 nodes, 2,000 jobs, 80,000 tasks — the paper's 1,000/4,500/180,000 at
about half scale): the standard deviation across seeds is 0.009 for the all-machines
fraction, 0.022 for the <= 20% fraction, 0.011 for the mean eligible fraction, 0.028
for constraints per job and 0.043 for the Hill estimate of alpha.  A tolerance of
about 3 sd around the target keeps any seed in, while a model off by a real amount
(say half the jobs unconstrained) fails.
"""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from rayrm.rm.core.config import load_config, node_group, read_job_table
from rayrm.rm.core.errors import InputError
from rayrm.traces import generate
from rayrm.traces.generate import generate_google, google_experiment, write_google
from rayrm.traces.google_model import MACHINE_MIX, job_sizes

NODES, JOBS, TASKS = 500, 2000, 80_000


@pytest.fixture(scope="module")
def moderate():
    return generate_google(NODES, JOBS, TASKS, seed=7)


def test_job_sizes_follow_fig_8b(moderate):
    _, jobs, stats = moderate
    sizes = np.array([j.app.num_tasks for j in jobs])
    # round(0.62 * 2000) = 1240 single-task jobs; round(0.86 * 2000) = 1720 with <= 10 tasks.
    assert (sizes == 1).sum() == 1240
    assert (sizes <= 10).sum() == 1720
    # Exactly T tasks; the largest job is round(80000 / 9) = 8889 (20k of 180k in the paper).
    assert sizes.sum() == TASKS and stats["tasks"] == TASKS
    assert sizes.max() == 8889
    # The paper: small jobs (86%) hold under 8k of 180k tasks; scaled: 8000 * 80/180 = 3556.
    # Here 1240 + 480 jobs of 2..10 tasks (mean ~4) ≈ 3200.
    assert stats["tasks_in_le_10_jobs"] < 3556
    # Every Fig. 10 bin is populated, and big jobs are all >= 11 tasks.
    bins = stats["size_bins"]
    assert all(bins[b] > 0 for b in ("11-100", "101-500", ">500"))
    assert sum(bins.values()) == JOBS
    assert sizes[sizes > 10].min() >= 11


def test_eligibility_follows_fig_8a_and_choosy(moderate):
    _, _, stats = moderate
    # tsf Fig. 8a: "less than 20% of jobs can run on all machines".
    assert 0.10 < stats["jobs_all_machines"] < 0.20
    # tsf Fig. 8a: "50% can run on 200" of 1000 -> 0.50 +- 0.07 (3 sd = 0.066).
    assert stats["jobs_le_20pct"] == pytest.approx(0.50, abs=0.07)
    # choosy §7.1: "30% of them could use less than 10%" -> 0.30 +- 0.07 (sd 0.018, mean 0.32).
    assert stats["jobs_lt_10pct"] == pytest.approx(0.30, abs=0.07)
    # choosy §7.1: "the average job could use 38% of the machines" -> +- 0.04 (3 sd = 0.033).
    assert stats["mean_eligible"] == pytest.approx(0.38, abs=0.04)
    # choosy §7.1: "1.8 constraints on average" -> +- 0.1 (3 sd = 0.085).
    assert stats["constraints_per_job"] == pytest.approx(1.8, abs=0.1)


def test_machines_durations_load_and_arrivals(moderate):
    doc, jobs, stats = moderate
    # Machine mix: total-variation distance to drfh Table I below 0.08 (sd over seeds 0.014,
    # mean 0.031; a uniform draw over the 10 configurations would be 0.69 away).
    assert stats["config_share_error"] < 0.08
    assert sum(g["count"] for g in doc["cluster"]["nodes"]) == NODES
    # Largest server is 1.0/1.0 of Table I = 16 cores / 65536 MB; a 0.5/0.25 server = 8 / 16384.
    caps = {(g["capacity"]["cpu"], g["capacity"]["memory_mb"]) for g in doc["cluster"]["nodes"]}
    assert caps <= {(c * 16, round(m * 65536)) for _, c, m, _ in MACHINE_MIX}
    assert (16, 65536) in caps and (8, 32768) in caps
    # Pareto alpha = 1.9 in every job, and the Hill estimate on drawn durations agrees
    # within 0.15 (3 sd = 0.13).
    assert {(j.durations.dist, j.durations.alpha) for j in jobs} == {("pareto", 1.9)}
    assert stats["pareto_alpha_hill"] == pytest.approx(1.9, abs=0.15)
    # Offered CPU work = load x cores x 3600 s; means are rounded to 0.1 s, so within 0.5%.
    assert stats["cpu_load"] == pytest.approx(1.0, rel=0.005)
    submits = [j.app.submit for j in jobs]
    assert submits == sorted(submits) and 0 <= submits[0] and submits[-1] < 3600
    assert stats["arrival_span"] > 3500      # 2000 uniform arrivals leave gaps of ~1.8 s


def test_big_jobs_are_not_pinned_to_a_few_machines():
    # Each job's eligible machines hold at least ceil(n / 100) of its tasks at once
    # (MAX_WAVES = 100): a 2667-task job needs 27 concurrent slots, a 101-task job 2.
    # Without that rule this workload (seed 2) has 2 jobs of > 100 tasks that break it.
    doc, jobs, _ = generate_google(200, 600, 24_000, seed=2)
    nodes = [n for k, g in enumerate(doc["cluster"]["nodes"]) for n in node_group(g, f"g{k}")]
    big = [j for j in jobs if j.app.num_tasks > 100]
    assert len(big) > 20
    for j in big:
        d = j.app.demand
        slots = sum(min(n.capacity["cpu"] // d["cpu"], n.capacity["memory_mb"] // d["memory_mb"])
                    for n in nodes if j.app.constraint.matches(n.name, n.attributes))
        assert slots >= -(-j.app.num_tasks // 100), j.job_id


def test_written_config_loads_and_constraints_mean_what_stats_say(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    generate.add_arguments(parser)
    out = tmp_path / "small.yaml"
    args = parser.parse_args(["google", "--nodes", "100", "--jobs", "300", "--tasks", "3000",
                              "--seed", "3", "-o", str(out)])
    assert generate.run(args) == 0
    printed = capsys.readouterr().out
    assert "achieved" in printed and "1.8 constraints per job" in printed
    assert (tmp_path / "small.jobs.csv").exists()
    cfg = load_config(out)
    assert len(cfg.nodes) == 100 and len(cfg.jobs) == 300
    assert sum(j.app.num_tasks for j in cfg.jobs) == 3000
    assert cfg.dims == ("cpu", "memory_mb") and cfg.seed == 3
    # The constraints as the RM reads them (parsed from CSV, matched against YAML attributes)
    # select exactly the machines the generator's bit model counted.
    _, _, stats = generate_google(100, 300, 3000, 3)
    frac = np.array([sum(j.app.constraint.matches(n.name, n.attributes) for n in cfg.nodes) / 100
                     for j in cfg.jobs])
    assert frac.mean() == pytest.approx(stats["mean_eligible"], abs=1e-12)
    assert np.mean(frac <= 0.2) == pytest.approx(stats["jobs_le_20pct"], abs=1e-12)
    # Every job fits on at least one node it may use (none is rejected at submission).
    for j in cfg.jobs:
        assert any(j.app.constraint.matches(n.name, n.attributes)
                   and all(n.capacity[d] >= j.app.demand[d] for d in cfg.dims) for n in cfg.nodes)
    # The job table round-trips: what was generated is what is read back.
    gen_jobs = generate_google(100, 300, 3000, 3, name="small")[1]
    assert read_job_table(tmp_path / "small.jobs.csv") == gen_jobs


def test_same_seed_same_workload_other_seed_not():
    a = generate_google(50, 100, 1000, seed=1)
    b = generate_google(50, 100, 1000, seed=1)
    c = generate_google(50, 100, 1000, seed=2)
    assert a[0] == b[0] and a[1] == b[1]
    assert a[1] != c[1]


def test_experiment_object_matches_the_files(tmp_path):
    write_google(tmp_path / "g.yaml", 40, 60, 900, seed=5)
    from_files = load_config(tmp_path / "g.yaml")
    direct = google_experiment(40, 60, 900, seed=5)
    assert direct.nodes == from_files.nodes and direct.jobs == from_files.jobs
    assert direct.seed == 5 and direct.dims == from_files.dims


@pytest.mark.parametrize("nodes,jobs,tasks,field", [
    (0, 10, 100, "--nodes"),
    (10, 0, 100, "--jobs"),
    (10, 100, 50, "--tasks"),     # fewer tasks than jobs
    (10, 100, 150, "--tasks"),    # 62 + 24*~4 + 14*11 ≈ 312 needed for the size mix
])
def test_impossible_sizes_are_input_errors(nodes, jobs, tasks, field):
    with pytest.raises(InputError) as e:
        generate_google(nodes, jobs, tasks, seed=1)
    assert e.value.field == field


def test_size_extremes():
    rng = np.random.default_rng(0)
    # One job takes every task; as many tasks as jobs gives single-task jobs only.
    assert job_sizes(1, 500, rng).tolist() == [500]
    assert job_sizes(7, 7, rng).tolist() == [1] * 7
