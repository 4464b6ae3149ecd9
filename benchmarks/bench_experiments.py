"""Batches of simulations on Ray (rayrm.rm.runtime.experiments): throughput, overhead, memory.

For a batch of ``--batch`` identical simulations (tsf, seed 1, the compact result a
sweep brings back: summary, jobs and tasks tables as bytes) of two workloads —
``micro`` (configs/paper-micro.yaml) and ``200`` (``rayrm trace generate google --nodes
200 --jobs 900 --tasks 36000 --max-duration 3600``) — it prints:

* in-process: seconds per simulation of the same calls (``simulate_files``) run one
  after another in this process: wall of the batch / batch, the least of ``--runs``;
* throughput with 1 and with 2 workers (simulations per minute: batch / wall of the
  batch, the best of ``--runs`` batches on one local Ray of 2 CPUs whose workers have
  started and imported rayrm) and their ratio (goal ≥ 1.8 on 2 cores);
* Ray's overhead per task: (wall of the 1-worker batch / batch) − in-process seconds,
  and that over the in-process seconds (goal ≤ 5% at 200 nodes); split in two: the
  time outside the calls ((wall − the calls' own seconds in the worker) / batch: submit,
  fetch, result, the config decoded once a batch) and the call itself, in the worker
  against in this process (the same code, another process: their difference is the
  machine's, not Ray's, unless it repeats).  Each batch puts its
  config in the object store afresh, as a sweep does for each cell, so every worker
  fetches and decodes it once per batch: the batch pays what a cell's simulations pay;
* peak RSS of a worker (the largest any task reported, ru_maxrss);
* the machine's own ratio: the same batch in a plain pool of 1 and of 2 forked
  processes (no Ray), the most any runner can get from the cores the machine has
  free (it is shared: other processes take their part).

    flock /tmp/rayrm-heavy.lock timeout 1800 python benchmarks/bench_experiments.py [--batch 8] [--runs 3]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from rayrm.rm.core.config import load_config
from rayrm.rm.runtime.experiments import Runner, call, simulate_files
from rayrm.traces.generate import google_experiment

ROOT = Path(__file__).resolve().parents[1]


def workloads() -> dict:
    return {"micro": load_config(ROOT / "configs" / "paper-micro.yaml"),
            "200": google_experiment(200, 900, 36000, 1, max_duration=3600)}


def in_process(cfg, n: int, runs: int) -> float:
    """Seconds per simulation of n calls in a row in this process (the calls the tasks
    make), wall / n, the least of ``runs``."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        for _k in range(n):
            outcome = call(simulate_files, cfg, "tsf", 1, "compact")
            assert outcome.ok, outcome.error
        best = min(best, (time.perf_counter() - started) / n)
    return best


def batch(runner: Runner, cfg, n: int, workers: int) -> tuple[float, float, float]:
    """(wall seconds of n simulations with at most ``workers`` at once, largest worker peak
    RSS MB, the calls' own seconds in the workers summed); the config goes to the object
    store within the batch."""
    runner.workers = workers
    started = time.perf_counter()
    peak, calls = 0.0, 0.0
    ref = runner.share(cfg)
    for outcome in runner.map((k, simulate_files, (ref, "tsf", 1, "compact")) for k in range(n)):
        assert outcome.ok, outcome.error
        peak = max(peak, outcome.peak_rss_mb)
        calls += outcome.seconds
    return time.perf_counter() - started, peak, calls


_POOL_CFG = None


def _pool_one(_k: int) -> float:
    outcome = call(simulate_files, _POOL_CFG, "tsf", 1, "compact")
    assert outcome.ok, outcome.error
    return outcome.seconds


def pool_ratio(cfg, n: int, runs: int) -> float:
    """Wall of n simulations in 1 forked process over that in 2 (best of ``runs`` each)."""
    global _POOL_CFG
    _POOL_CFG = cfg
    ctx = multiprocessing.get_context("fork")
    walls = {}
    for procs in (1, 2):
        with ProcessPoolExecutor(procs, mp_context=ctx) as pool:
            list(pool.map(_pool_one, range(procs)))                  # warm
            best = float("inf")
            for _ in range(runs):
                t0 = time.perf_counter()
                list(pool.map(_pool_one, range(n)))
                best = min(best, time.perf_counter() - t0)
        walls[procs] = best
    return walls[1] / walls[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=8, help="simulations per batch (default 8)")
    ap.add_argument("--micro-batch", type=int, default=40, help="simulations per micro batch (default 40)")
    ap.add_argument("--runs", type=int, default=3, help="repeats; the best is reported (default 3)")
    args = ap.parse_args()
    cfgs = workloads()
    started = time.perf_counter()
    with Runner(workers=2) as runner:
        print(f"local Ray of 2 CPUs started in {time.perf_counter() - started:.1f}s")
        rows = []
        for name, cfg in cfgs.items():
            n = args.micro_batch if name == "micro" else args.batch
            batch(runner, cfg, 2, 2)                       # warm: both workers up, modules imported
            inproc = in_process(cfg, n, args.runs)
            one = min((batch(runner, cfg, n, 1) for _ in range(args.runs)), key=lambda r: r[0])
            two = min((batch(runner, cfg, n, 2) for _ in range(args.runs)), key=lambda r: r[0])
            per_task = one[0] / n
            rows.append((name, n, inproc, 60 * n / one[0], 60 * n / two[0], one[0] / two[0],
                         per_task - inproc, (per_task - inproc) / inproc, (one[0] - one[2]) / n,
                         one[2] / n - inproc, max(one[1], two[1])))
    for k, (name, cfg) in enumerate(cfgs.items()):
        rows[k] += (pool_ratio(cfg, rows[k][1], args.runs),)
    head = ("workload", "batch", "in-proc s", "sims/min 1w", "sims/min 2w", "2w/1w",
            "overhead s/task", "overhead %", "outside the call", "call: worker - in-proc",
            "peak RSS MB/worker", "plain 2p/1p")
    print(" | ".join(head))
    for name, n, inproc, t1, t2, ratio, over, frac, outside, slower, rss, plain in rows:
        print(f"{name} | {n} | {inproc:.3f} | {t1:.1f} | {t2:.1f} | {ratio:.2f} | {over * 1000:+.1f} ms | "
              f"{100 * frac:+.1f}% | {outside * 1000:+.1f} ms | {slower * 1000:+.1f} ms | {rss:.0f} | {plain:.2f}")
    print("goals: 2w/1w >= 1.8; overhead <= 5% at 200 nodes")


if __name__ == "__main__":
    main()
