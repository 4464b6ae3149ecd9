"""A job's arrival at paper scale: the time ``Simulation._arrive`` takes inside a whole run.

The arrival path — submit (the app's eligibility over every node and h^c, its place in the
pending index, its unit and key) and the job's task durations — runs once per job.  This
simulates the paper-scale trace (tsf-paper §VI-B: ``rayrm trace generate google``, 1,000
nodes, 4,500 jobs, 180k tasks, or ``--config``) under each scheduling core in turn, in this
process, timing each ``_arrive`` call with ``perf_counter``, and prints the least of
``--runs`` per core: the arrivals' total, per job, and their part of the run.  Prints
figures; asserts nothing.

    python benchmarks/bench_arrive.py [--config CONFIG] [--runs 3] [--cores python,native]

Run it under the shared lock: ``flock /tmp/rayrm-heavy.lock python benchmarks/bench_arrive.py``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sim import make_trace  # noqa: E402

from rayrm.rm.core.config import load_config  # noqa: E402
from rayrm.rm.sim import engine  # noqa: E402


def least_of(config, runs: int) -> tuple[float, float]:
    """(arrivals' seconds, the run's seconds), each the least of ``runs`` simulations."""
    spent = [0.0]
    arrive = engine.Simulation._arrive

    def timed(sim, jobspec, t):
        started = time.perf_counter()
        arrive(sim, jobspec, t)
        spent[0] += time.perf_counter() - started

    best_arrive = best_run = float("inf")
    engine.Simulation._arrive = timed
    try:
        for _ in range(runs):
            spent[0] = 0.0
            started = time.perf_counter()
            engine.Simulation(config).run(progress=False)
            best_run = min(best_run, time.perf_counter() - started)
            best_arrive = min(best_arrive, spent[0])
            gc.collect()
    finally:
        engine.Simulation._arrive = arrive
    return best_arrive, best_run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="a config to simulate (default: the paper-scale trace, generated)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cores", default="python,native")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-arrive-") as work:
        path = Path(args.config) if args.config else make_trace(Path(work), 1000, 4500, 180000, 7)
        config = load_config(path)
        print(f"{path}: {len(config.nodes)} nodes, {len(config.jobs)} jobs; the least of {args.runs} runs per core")
        print(f"{'core':8s} {'arrivals ms':>12s} {'us / job':>9s} {'run s':>7s} {'share':>6s}")
        was = os.environ.get("RAYRM_CORE")
        try:
            for core in args.cores.split(","):
                os.environ["RAYRM_CORE"] = core
                arrivals, run = least_of(config, args.runs)
                print(f"{core:8s} {arrivals * 1e3:12.0f} {arrivals / len(config.jobs) * 1e6:9.1f} "
                      f"{run:7.2f} {arrivals / run:6.1%}")
        finally:
            if was is None:
                os.environ.pop("RAYRM_CORE", None)
            else:
                os.environ["RAYRM_CORE"] = was
    return 0


if __name__ == "__main__":
    sys.exit(main())
