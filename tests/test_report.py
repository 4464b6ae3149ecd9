"""``rayrm report`` on two hand-built runs of one trace (TSF and DRF), numbers worked by hand.

One node n1 = <cpu 32, memory_mb 32768>.  Jobs (all submitted at 0 except c at 5)::

    a   2 tasks  <cpu 1, mem 1024>   h_a = 32
    c   1 task   <cpu 1, mem 1024>
    b  11 tasks  <cpu 2, mem 1024>   h_b = 16

    TSF  a/0 a/1 [0, 10]   c/0 [5, 8]   b/0..b/9 [0, 40]   b/10 [3, 40]
    DRF  a/0 [0, 10] a/1 [10, 20]   c/0 [6, 8]   b/0..b/9 [0, 40]   b/10 [2, 44]
         and b/3's first attempt [0, 5] is lost; attempt 1 (asked at 5) runs [7, 40]

Completion times  TSF: a 10, c 3, b 40      DRF: a 20, c 3 (8 − 5), b 44
Task queueing delays (first attempt start − submit)
                  TSF: all 0 but b/10 = 3   DRF: a/1 = 10, c/0 = 1, b/10 = 2, others 0
"""

from __future__ import annotations

import json

import pytest

from rayrm.rm.cli.main import main
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.runs import metrics as M
from rayrm.rm.runs.report import build_report, write_report
from rayrm.rm.runs.log import RunLog

NODE = NodeSpec("n1", Resources(cpu=32, memory_mb=32768), {})
APPS = {"a": AppSpec("a", Resources(cpu=1, memory_mb=1024), 2),
        "c": AppSpec("c", Resources(cpu=1, memory_mb=1024), 1, submit=5.0),
        "b": AppSpec("b", Resources(cpu=2, memory_mb=1024), 11)}
H = {"a": 32, "c": 32, "b": 16}

# (app, task, attempt, submit, start, finish, status)
TSF = ([("a", 0, 0, 0, 0, 10, "finished"), ("a", 1, 0, 0, 0, 10, "finished"),
        ("c", 0, 0, 5, 5, 8, "finished")]
       + [("b", k, 0, 0, 0, 40, "finished") for k in range(10)] + [("b", 10, 0, 0, 3, 40, "finished")])
DRF = ([("a", 0, 0, 0, 0, 10, "finished"), ("a", 1, 0, 0, 10, 20, "finished"),
        ("c", 0, 0, 5, 6, 8, "finished")]
       + [("b", k, 0, 0, 0, 40, "finished") for k in range(10) if k != 3]
       + [("b", 3, 0, 0, 0, 5, "lost"), ("b", 3, 1, 5, 7, 40, "finished"),
          ("b", 10, 0, 0, 2, 44, "finished")])


def write_run(path, policy, attempts, apps=APPS, mode="sim", **extra):
    """A run directory as a driver would log it, share rows included (n_i changes);
    ``extra`` goes to summary.json (a replay's scheduling_latency, a launch_jitter)."""
    log = RunLog(("cpu", "memory_mb"), mode=mode, policy=policy, name="hand")
    log.add_node(NODE, 0.0)
    events = []
    for app, task, attempt, submit, start, finish, status in attempts:
        events += [(start, 1, app, task, attempt, submit, status), (finish, 0, app, task, attempt, submit, status)]
    running = {a: 0 for a in apps}
    left = {a: apps[a].num_tasks for a in apps}
    for a in sorted(apps, key=lambda a: apps[a].submit):
        log.submit(apps[a], apps[a].submit)
    for t, is_start, app, task, attempt, submit, status in sorted(events, key=lambda e: (e[0], e[1])):
        if is_start:
            log.start(app, task, attempt, "n1", submit, t)
            running[app] += 1
        else:
            log.end(app, task, attempt, status, t)
            running[app] -= 1
            if status == "finished":
                left[app] -= 1
                if left[app] == 0:
                    log.app_done(app, t)
        n, d = running[app], apps[app].demand
        log.share(t, app, (n / H[app], n * max(d["cpu"] / 32, d["memory_mb"] / 32768),
                           n * d["cpu"] / 32, n * d["memory_mb"] / 32768), n)
    log.write(path, **extra)
    return path


def latency(p99: float) -> dict:
    """summary.json's scheduling_latency of a replay whose p99 allocation-to-running is ``p99`` trace s."""
    return {"scheduling_latency": {"allocation_to_running_trace_s": {"p50": p99 / 4, "p99": p99}}}


@pytest.fixture
def runs(tmp_path):
    return write_run(tmp_path / "tsf", "tsf", TSF), write_run(tmp_path / "drf", "drf", DRF)


def test_run_table(runs):
    rep = build_report(runs)
    tsf, drf = rep.tables["runs"]
    assert (tsf["run"], drf["run"]) == ("tsf", "drf")
    assert (tsf["jobs"], tsf["finished"], tsf["tasks"], tsf["attempts"]) == (3, 3, 14, 14)
    assert drf["attempts"] == 15                                     # b/3 ran twice
    assert (tsf["makespan"], drf["makespan"]) == (40, 44)
    # Job completion: TSF (10 + 3 + 40)/3 = 17.667; DRF (20 + 3 + 44)/3 = 22.333.
    assert tsf["job_completion_time"]["mean"] == pytest.approx(53 / 3)
    assert drf["job_completion_time"]["mean"] == pytest.approx(67 / 3)
    # Job queueing delay: DRF's c waits 1 s -> mean 1/3; TSF none.
    assert (tsf["job_queueing_delay"]["mean"], drf["job_queueing_delay"]["mean"]) == (0, pytest.approx(1 / 3))
    # Task queueing delay over 14 tasks: TSF 3/14; DRF (10 + 1 + 2)/14 (b/3's first attempt
    # started at 0, so its retry asked at 5 and started at 7 does not count).
    assert tsf["task_queueing_delay"]["mean"] == pytest.approx(3 / 14)
    assert drf["task_queueing_delay"]["mean"] == pytest.approx(13 / 14)
    assert drf["task_queueing_delay"]["max"] == 10
    # TSF CPU utilization over [0, 40]: a 2·10·1 + c 3·1 + b (10·40 + 37)·2 = 897 cpu·s of 32·40.
    assert tsf["utilization"]["cpu"] == pytest.approx(897 / 1280)


def test_time_averaged_shares(runs):
    shares = build_report(runs).tables["time_averaged_shares"]["tsf"]
    assert shares["window"] == [0, 40] and shares["apps_total"] == 3
    apps = shares["apps"]
    # a: 2/32 over [0, 10] -> 0.0625 · 10/40 = 0.015625
    assert apps["a"]["task_share"] == pytest.approx(0.015625)
    # b: 10/16 over [0, 3], 11/16 over [3, 40] -> (0.625·3 + 0.6875·37)/40 = 0.6828125
    assert apps["b"]["task_share"] == pytest.approx(0.6828125)
    # b's memory share: n·1024/32768 = n/32 -> (10·3 + 11·37)/32/40 = 0.341406
    assert apps["b"]["mem_share"] == pytest.approx((10 * 3 + 11 * 37) / 32 / 40, abs=1e-6)
    # c: 1/32 over [5, 8] -> 0.03125 · 3/40 = 0.00234375
    assert apps["c"]["cpu_share"] == pytest.approx(0.00234375)
    # Window [5, 8]: c holds 1/32 throughout; a holds 2/32.
    windowed = build_report(runs, window=(5, 8)).tables["time_averaged_shares"]["tsf"]["apps"]
    assert windowed["c"]["task_share"] == pytest.approx(1 / 32)
    assert windowed["a"]["task_share"] == pytest.approx(2 / 32)


def test_speedup_tables(runs):
    t = build_report(runs).tables
    assert t["baseline"] == "tsf"
    bins = {b["bin"]: b for b in t["job_speedup_by_size"]["drf"]}
    # <= 10: a (20 − 10)/20 = 0.5 and c (3 − 3)/3 = 0 -> mean 0.25, std 0.25; seconds 10, 0 -> 5 ± 5.
    assert bins["<=10"]["jobs"] == 2
    assert bins["<=10"]["mean_speedup"] == pytest.approx(0.25)
    assert bins["<=10"]["std_speedup"] == pytest.approx(0.25)
    assert (bins["<=10"]["mean_speedup_s"], bins["<=10"]["std_speedup_s"]) == (5, 5)
    # 11-100: b (44 − 40)/44 = 0.090909, alone -> std 0.
    assert bins["11-100"]["jobs"] == 1
    assert bins["11-100"]["mean_speedup"] == pytest.approx(4 / 44, abs=1e-6)
    assert bins["11-100"]["std_speedup"] == 0
    assert bins["101-500"]["jobs"] == bins[">500"]["jobs"] == 0
    # Per task D_DRF − D_TSF: a/1 +10, c/0 +1, b/10 2 − 3 = −1, 11 tasks 0.
    per_task = t["task_speedup"]["drf"]
    assert per_task["tasks"] == 14
    assert per_task["shortened"] == pytest.approx(2 / 14)
    assert per_task["equal"] == pytest.approx(11 / 14)
    assert per_task["lengthened"] == pytest.approx(1 / 14)
    assert per_task["median_s"] == 0


def test_files_written_to_first_run_report_dir(runs, capsys):
    assert main(["report", str(runs[0]), str(runs[1])]) == 0
    out = runs[0] / "report"
    names = {p.name for p in out.iterdir()}
    assert {"index.html", "tables.json", "shares_tsf.png", "shares_drf.png", "utilization.png",
            "cdf_job_queueing_delay.png", "cdf_job_completion_time.png", "cdf_task_queueing_delay.png",
            "speedup_by_job_size.png", "task_speedup_cdf.png"} <= names
    for name in names - {"index.html", "tables.json"}:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "index.html").read_text()
    assert "Fig. 10" in page and "<img src='speedup_by_job_size.png'>" in page
    assert "<td>0.1429</td>" in page                      # 2/14 of tasks shortened
    tables = json.loads((out / "tables.json").read_text())
    assert tables["task_speedup"]["drf"]["lengthened"] == pytest.approx(1 / 14)
    assert tables["job_speedup_by_size"]["drf"][2]["mean_speedup"] is None     # empty bin
    printed = capsys.readouterr().out
    assert "TSF vs drf: shortens the queueing delay of 14.3% of tasks, lengthens 7.1%" in printed


def test_no_comparison_without_tsf_or_other_trace(tmp_path):
    drf = write_run(tmp_path / "drf", "drf", DRF)
    out, rep = write_report([drf], tmp_path / "out")
    assert "job_speedup_by_size" not in rep.tables
    assert not (out / "speedup_by_job_size.png").exists() and (out / "shares_drf.png").exists()
    # A TSF run of another trace (b has 10 tasks there) is not compared either.
    other = dict(APPS, b=AppSpec("b", Resources(cpu=2, memory_mb=1024), 10))
    tsf = write_run(tmp_path / "tsf", "tsf", [a for a in TSF if a[:2] != ("b", 10)], other)
    assert "job_speedup_by_size" not in build_report([tsf, drf]).tables


def test_duplicate_policies_get_directory_labels(tmp_path):
    one = write_run(tmp_path / "sim", "tsf", TSF)
    two = write_run(tmp_path / "ray", "tsf", TSF)
    assert build_report([one, two]).labels == ["tsf (sim)", "tsf (ray)"]


def test_bad_input_is_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert main(["report", str(tmp_path), "--window", "9,3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert "missing: is not a run directory" in err[0]
    assert "field '--window': needs T1 > T0" in err[1]


# ----- the noise floor ------------------------------------------------------------------
# Per task D_DRF − D_TSF: a/1 +10, c/0 +1, b/10 −1, the other 11 tasks 0.
# Per job C_DRF − C_TSF: a +10 (20 − 10), c 0, b +4 (44 − 40).

def test_exact_simulations_have_tolerance_zero(runs):
    rep = build_report(runs)
    assert rep.tables["tolerance"] == {"seconds": 0.0, "source": "exact simulation"}
    bins = {b["bin"]: b for b in rep.tables["job_speedup_by_size"]["drf"]}
    # <= 10: a faster (+10), c equal (0); 11-100: b faster (+4).
    assert (bins["<=10"]["faster"], bins["<=10"]["equal"], bins["<=10"]["slower"]) == (1, 1, 0)
    assert (bins["11-100"]["faster"], bins["11-100"]["equal"]) == (1, 0)


def test_a_replay_counts_its_p99_latency_as_equal(tmp_path):
    tsf = write_run(tmp_path / "tsf", "tsf", TSF, mode="ray", **latency(1.5))
    drf = write_run(tmp_path / "drf", "drf", DRF, mode="ray", **latency(1.2))
    rep = build_report([tsf, drf])
    # The larger p99, 1.5 s, beats one default heartbeat (1 s).
    assert rep.tables["tolerance"] == {"seconds": 1.5, "source": "replay p99 allocation-to-running latency"}
    # c/0 (+1) and b/10 (−1) are within ±1.5 s: equal.  Shortened a/1 only: 1/14; equal 13/14.
    v = rep.tables["task_speedup"]["drf"]
    assert (v["shortened"], v["equal"], v["lengthened"]) == (pytest.approx(1 / 14), pytest.approx(13 / 14), 0)
    # Jobs differ by 10 and 4 s, beyond 1.5: the Fig. 10 means stay 0.25 and 4/44.
    bins = {b["bin"]: b for b in rep.tables["job_speedup_by_size"]["drf"]}
    assert bins["<=10"]["mean_speedup"] == pytest.approx(0.25)
    assert bins["11-100"]["mean_speedup"] == pytest.approx(4 / 44)


def test_one_heartbeat_is_the_floor_of_a_replay(tmp_path):
    tsf = write_run(tmp_path / "tsf", "tsf", TSF, mode="ray", **latency(0.4))
    drf = write_run(tmp_path / "drf", "drf", DRF, mode="ray", **latency(0.3))
    rep = build_report([tsf, drf])
    # p99 0.4 s < the default heartbeat 1 s: tolerance 1 s, and |±1| <= 1 is equal.
    assert rep.tables["tolerance"] == {"seconds": 1.0, "source": "one default heartbeat interval"}
    assert rep.tables["task_speedup"]["drf"]["equal"] == pytest.approx(13 / 14)
    # A heartbeat the caller knows (the config's) wins over the default.
    assert M.noise_tolerance([tsf, drf], heartbeat=2.0) == M.Tolerance(2.0, "one heartbeat interval")


def test_a_jittered_simulation_uses_its_jitter(tmp_path):
    tsf = write_run(tmp_path / "tsf", "tsf", TSF, launch_jitter=0.5)
    drf = write_run(tmp_path / "drf", "drf", DRF)
    rep = build_report([tsf, drf])
    assert rep.tables["tolerance"] == {"seconds": 0.5, "source": "launch jitter 0.5 s"}
    # ±1 s is beyond 0.5: the exact counts 2/14, 11/14, 1/14 stand.
    v = rep.tables["task_speedup"]["drf"]
    assert (v["shortened"], v["equal"], v["lengthened"]) == tuple(pytest.approx(x) for x in (2 / 14, 11 / 14, 1 / 14))


def test_tolerance_override_reaches_jobs_tasks_and_the_page(runs, capsys):
    assert main(["report", str(runs[0]), str(runs[1]), "--tolerance", "5"]) == 0
    tables = json.loads((runs[0] / "report" / "tables.json").read_text())
    assert tables["tolerance"] == {"seconds": 5.0, "source": "--tolerance"}
    # Tasks: only a/1 (+10) is beyond 5 s -> 1/14 shortened, 13/14 equal.
    assert tables["task_speedup"]["drf"]["equal"] == pytest.approx(13 / 14)
    # Jobs: b's +4 s is within 5 -> speedup 0, counted equal; a's +10 stays (0.5).
    bins = {b["bin"]: b for b in tables["job_speedup_by_size"]["drf"]}
    assert (bins["11-100"]["mean_speedup"], bins["11-100"]["equal"], bins["11-100"]["faster"]) == (0, 1, 0)
    assert bins["<=10"]["mean_speedup"] == pytest.approx(0.25)
    page = (runs[0] / "report" / "index.html").read_text()
    assert "tolerance ±5 s (--tolerance)" in page
    assert "comparisons against TSF: tolerance ±5 s (--tolerance)" in capsys.readouterr().out
    assert main(["report", str(runs[0]), "--tolerance", "-1"]) == 2


# DRF replayed on Ray, worse for c and better for b than the simulated DRF:
#   c/0 starts at 8 (delay 3) and ends at 10 (C_c = 5); b's tasks end at 38 (C_b = 38).
DRF_RAY = ([("a", 0, 0, 0, 0, 10, "finished"), ("a", 1, 0, 0, 10, 20, "finished"),
            ("c", 0, 0, 5, 8, 10, "finished")]
           + [("b", k, 0, 0, 0, 38, "finished") for k in range(10) if k != 3]
           + [("b", 3, 0, 0, 0, 5, "lost"), ("b", 3, 1, 5, 7, 38, "finished"),
              ("b", 10, 0, 0, 2, 38, "finished")])


@pytest.fixture
def both_modes(tmp_path):
    return [write_run(tmp_path / "sim" / "tsf", "tsf", TSF), write_run(tmp_path / "sim" / "drf", "drf", DRF),
            write_run(tmp_path / "ray" / "tsf", "tsf", TSF, mode="ray", **latency(1.5)),
            write_run(tmp_path / "ray" / "drf", "drf", DRF_RAY, mode="ray", **latency(1.2))]


def test_simulator_against_ray_flags_what_differs(both_modes, tmp_path, capsys):
    assert main(["report", *map(str, both_modes), "--out", str(tmp_path / "page")]) == 0
    rep = build_report(both_modes)
    assert rep.labels == ["tsf (sim)", "drf (sim)", "tsf (ray)", "drf (ray)"]
    # Each DRF run is compared with the TSF run of its own mode.
    assert rep.tables["task_speedup"]["drf (sim)"]["baseline"] == "tsf (sim)"
    assert rep.tables["task_speedup"]["drf (ray)"]["baseline"] == "tsf (ray)"
    rows = {r["label"]: r for r in rep.sim_vs_ray["drf"]}
    # One tolerance, 1.5 s, for both.  Simulator: shortened a/1 -> 1/14, equal 13/14.
    # Ray: a/1 (+10) and c/0 (3 − 0 = +3) -> 2/14, equal 12/14: 7.1 points apart.
    assert rows["tsf shortens"]["sim"] == pytest.approx(1 / 14)
    assert rows["tsf shortens"]["ray"] == pytest.approx(2 / 14)
    assert rows["tsf shortens"]["differs"] == "moves +7.1 pts"
    assert rows["equal"]["differs"] == "moves -7.1 pts"
    assert rows["lengthens"]["differs"] == ""
    # <= 10: sim (a 0.5 + c 0)/2 = 0.25; Ray (a 0.5 + c (5 − 3)/5 = 0.4)/2 = 0.45: same sign.
    assert (rows["job speedup <=10"]["sim"], rows["job speedup <=10"]["ray"]) == (
        pytest.approx(0.25), pytest.approx(0.45))
    assert rows["job speedup <=10"]["differs"] == ""
    # 11-100: sim (44 − 40)/44 > 0; Ray (38 − 40)/38 = −0.0526 < 0: the sign differs.
    assert rows["job speedup 11-100"]["ray"] == pytest.approx(-2 / 38)
    assert rows["job speedup 11-100"]["differs"] == "sign differs"
    page = (tmp_path / "page" / "index.html").read_text()
    assert "Simulator against Ray" in page and "<img src='sim_vs_ray.png'>" in page
    assert "<td>sign differs</td>" in page
    assert (tmp_path / "page" / "sim_vs_ray.png").read_bytes()[:4] == b"\x89PNG"
    out = capsys.readouterr().out
    assert "TSF vs drf, simulator against Ray: differs on tsf shortens (moves +7.1 pts)" in out


def test_replay_noise_is_tsf_against_itself(tmp_path):
    from rayrm.rm.runs.compare import replay_noise
    # A second replay of TSF where a/1 starts at 4 (delay 4, not 0) and b/10 at 5 (5, not 3).
    again = [("a", 1, 0, 0, 4, 14, "finished") if a[:2] == ("a", 1) else
             ("b", 10, 0, 0, 5, 40, "finished") if a[:2] == ("b", 10) else a for a in TSF]
    reps = [(tmp_path / f"r{k}", {"tsf": write_run(tmp_path / f"r{k}" / "tsf", "tsf", attempts, mode="ray",
                                                  **latency(1.5))})
            for k, attempts in ((1, TSF), (2, again))]
    noise = replay_noise(reps, M.noise_tolerance([d["tsf"] for _, d in reps]))
    # Tolerance 1.5 s: a/1 +4 and b/10 +2 are beyond it -> 2/14 'shortened', 12/14 equal.
    assert len(noise) == 1
    assert (noise.loc[0, "shortened"], noise.loc[0, "equal"], noise.loc[0, "lengthened"]) == (
        pytest.approx(2 / 14), pytest.approx(12 / 14), 0)
    # One replica per seed: nothing to compare.
    assert replay_noise(reps[:1], M.Tolerance(0.0, "")).empty
