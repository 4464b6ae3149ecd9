"""Simulator speed at paper scale (tsf-paper §VI-B: 1,000 nodes, 4,500 jobs, 180k tasks).

Prints, for every policy, the wall time of ``simulate`` (config loading and
scheduler start-up included, run directory not written unless --write) and
events per second, next to a bare heapq loop that pushes and pops two events per
task — the floor any Python discrete-event simulator of this trace pays.  The
issue's target: TSF within 15x of that floor.  Then, unless --no-compare, a
``rayrm compare`` of tsf, drf, cdrf, cmmf-cpu, cmmf-mem and fifo on the same trace.

The trace comes from ``rayrm trace generate google`` (traces/generate.py).

    python benchmarks/bench_sim.py [--nodes 1000 --jobs 4500 --tasks 180000]
                                   [--policies tsf,drf,...] [--no-compare] [--write]
"""

from __future__ import annotations

import argparse
import heapq
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_trace(out_dir: Path, nodes: int, jobs: int, tasks: int, seed: int) -> Path:
    """The paper-scale trace, from ``rayrm trace generate google``."""
    path = out_dir / "google.yaml"
    cmd = [sys.executable, "-m", "rayrm.rm.cli.main", "trace", "generate", "google", "--nodes", str(nodes),
           "--jobs", str(jobs), "--tasks", str(tasks), "--seed", str(seed), "-o", str(path)]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    print("trace: rayrm trace generate google " + " ".join(cmd[6:]))
    return path


def heapq_baseline(config) -> float:
    """Seconds for a bare heapq loop pushing and popping two events per task of the trace:
    each task's arrival (at its job's submit time) and, when that pops, its completion."""
    t0 = time.perf_counter()
    heap: list = []
    push, pop = heapq.heappush, heapq.heappop
    seq = 0
    for job in config.jobs:
        for k in range(job.app.num_tasks):
            seq += 1
            push(heap, (job.app.submit, 1, seq, k))
    rnd = random.Random(1).random
    while heap:
        t, kind, _, k = pop(heap)
        if kind == 1:
            seq += 1
            push(heap, (t + rnd() * 100, 0, seq, k))
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=4500)
    ap.add_argument("--tasks", type=int, default=180000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policies", default="tsf,drf,cdrf,cmmf-cpu,cmmf-mem,fifo,drfh-ff,drfh-bf,pm-drf,slots")
    ap.add_argument("--config", help="use this config instead of generating one")
    ap.add_argument("--write", action="store_true", help="also write each run directory (timed)")
    ap.add_argument("--no-compare", action="store_true")
    ap.add_argument("--workdir", help="where traces and runs go (default: a temporary directory)")
    args = ap.parse_args(argv)
    from rayrm.rm.core.config import load_config
    from rayrm.rm.sim.engine import simulate

    work = Path(args.workdir or tempfile.mkdtemp(prefix="rayrm-bench-"))
    path = Path(args.config) if args.config else make_trace(work, args.nodes, args.jobs, args.tasks, args.seed)
    config = load_config(path)
    total = sum(j.app.num_tasks for j in config.jobs)
    print(f"{len(config.nodes)} nodes, {len(config.jobs)} jobs, {total} tasks; "
          f"timed: load_config + simulate{' + run directory' if args.write else ''}")
    print(f"{'policy':<10} {'wall s':>8} {'cpu s':>8} {'events/s':>12} {'x heapq':>8} {'makespan':>10} "
          f"{'task delay p50':>15}")
    for policy in args.policies.split(","):
        base = heapq_baseline(config)      # next to each run: the machine is shared
        t0, c0 = time.perf_counter(), time.process_time()
        cfg = load_config(path)
        summary = simulate(cfg, policy=policy, out=(work / "runs" / policy) if args.write else None,
                           progress=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        # events: two per task attempt (start, completion) and one per job arrival
        events = 2 * sum(summary["tasks"].values()) + len(cfg.jobs)
        print(f"{policy:<10} {wall:8.2f} {cpu:8.2f} {events / wall:12,.0f} {wall / base:8.1f} "
              f"{summary['makespan']:10.0f} {summary['task_queueing_delay'].get('p50', 0):15.1f}"
              f"   (heapq {base:.2f} s)", flush=True)
    if not args.no_compare:
        cmd = [sys.executable, "-m", "rayrm.rm.cli.main", "compare", str(path),
               "--policies", "tsf,drf,cdrf,cmmf-cpu,cmmf-mem,fifo", "--out", str(work / "compare")]
        print("$ rayrm compare " + " ".join(cmd[4:]), flush=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=False)
        print(f"compare took {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
