"""Simulator speed at paper scale (tsf-paper §VI-B: 1,000 nodes, 4,500 jobs, 180k tasks).

Prints, for every policy, the wall time of ``simulate`` (config loading and
scheduler start-up included, run directory not written unless --write) and
events per second, next to a bare heapq loop that pushes and pops two events per
task — the floor any Python discrete-event simulator of this trace pays.  The
issue's target: TSF within 15x of that floor.  Then, unless --no-compare, a
``rayrm compare`` of tsf, drf, cdrf, cmmf-cpu, cmmf-mem and fifo on the same trace.

The trace comes from ``rayrm trace generate google`` (traces/generate.py); should
that command be missing, from ``synthetic_trace`` below: Table I machines of drfh-paper (scaled to
16 cores / 64 GB for the largest), 21 attributes over 4 machine classes,
constraints giving about 38% average eligibility (tsf-paper Fig. 8a), heavy-tailed
job sizes (tsf-paper Fig. 8b), Pareto durations (alpha 1.9, choosy-paper §6.2),
arrivals over one hour.

    python benchmarks/bench_sim.py [--nodes 1000 --jobs 4500 --tasks 180000]
                                   [--policies tsf,drf,...] [--no-compare] [--write]
"""

from __future__ import annotations

import argparse
import csv
import heapq
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

# drfh-paper Table I: (servers, cpu, memory) normalised to the largest server.
TABLE_I = [(6732, 0.50, 0.50), (3863, 0.50, 0.25), (1001, 0.50, 0.75), (795, 1.00, 1.00),
           (126, 0.25, 0.25), (52, 0.50, 0.12), (5, 0.50, 0.03), (5, 0.50, 0.97),
           (3, 1.00, 0.50), (1, 0.50, 0.06)]
CPU_UNIT, MEM_UNIT = 16, 65536          # the largest server: 16 cores, 64 GB


def synthetic_trace(out_dir: Path, nodes: int, jobs: int, tasks: int, seed: int,
                    load: float = 1.3) -> Path:
    """Write a paper-scale config + job table into ``out_dir``; returns the config path."""
    rng = np.random.default_rng(seed)
    counts = np.array([c for c, _, _ in TABLE_I], dtype=float)
    kinds = rng.choice(len(TABLE_I), size=nodes, p=counts / counts.sum())
    prevalence = rng.uniform(0.15, 0.75, size=21)
    groups = []
    cap_cpu = 0.0
    for k in range(nodes):
        _, c, m = TABLE_I[kinds[k]]
        cls = int(rng.choice(4, p=[0.55, 0.25, 0.15, 0.05]))
        attrs = {"class": f"c{cls}"}
        attrs.update({f"a{j:02d}": int(rng.random() < prevalence[j]) for j in range(1, 21)})
        cpu, mem = c * CPU_UNIT, round(m * MEM_UNIT)
        cap_cpu += cpu
        groups.append({"name": f"m{k:04d}", "capacity": {"cpu": cpu, "memory_mb": mem},
                       "attributes": attrs})
    # Job sizes: 60% single-task, 26% 2-10, 14% heavy tail; the largest ~ tasks/9.
    sizes = np.ones(jobs, dtype=int)
    u = rng.random(jobs)
    small = (u >= 0.60) & (u < 0.86)
    sizes[small] = rng.integers(2, 11, small.sum())
    big = u >= 0.86
    tail = 11 + (rng.pareto(0.9, big.sum()) * 40).astype(int)
    sizes[big] = np.minimum(tail, 20000)
    rest = tasks - sizes[~big].sum()
    sizes[big] = np.maximum(11, np.round(sizes[big] * rest / sizes[big].sum())).astype(int)
    sizes[np.argmax(sizes)] += tasks - sizes.sum()
    cpu_d = rng.choice([0.25, 0.5, 1, 2, 4], size=jobs, p=[0.3, 0.3, 0.25, 0.1, 0.05])
    mem_d = rng.choice([256, 512, 1024, 2048, 4096, 8192], size=jobs, p=[0.2, 0.25, 0.25, 0.15, 0.1, 0.05])
    submit = np.sort(rng.uniform(0, 3600, jobs))
    work = float((sizes * cpu_d).sum())
    mean_dur = load * cap_cpu * 3600 / work
    rows = []
    for j in range(jobs):
        r = rng.random()
        if r < 0.18:
            cons = ""
        elif r < 0.45:
            cons = f"a{rng.integers(1, 21):02d} == 1"
        else:
            picks = rng.choice(np.arange(1, 21), size=int(rng.integers(2, 4)), replace=False)
            clauses = [f"a{p:02d} == 1" for p in picks]
            if rng.random() < 0.3:
                clauses.append(f"class in (c0, c{rng.integers(1, 4)})")
            cons = " and ".join(clauses)
        rows.append([f"j{j:05d}", f"{submit[j]:.3f}", sizes[j], cons, f"pareto:1.9:{mean_dur:.2f}",
                     f"{cpu_d[j]:g}", mem_d[j]])
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "jobs.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "submit", "tasks", "constraint", "duration", "demand.cpu", "demand.memory_mb"])
        w.writerows(rows)
    doc = {"name": "synthetic-google", "resources": ["cpu", "memory_mb"],
           "cluster": {"nodes": groups}, "workload": {"file": "jobs.csv"},
           "policy": "tsf", "run": {"seed": seed}}
    path = out_dir / "synthetic-google.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=200))
    return path


def make_trace(out_dir: Path, nodes: int, jobs: int, tasks: int, seed: int) -> Path:
    """``rayrm trace generate google`` when it is installed, else ``synthetic_trace``."""
    path = out_dir / "google.yaml"
    cmd = [sys.executable, "-m", "rm.cli", "trace", "generate", "google", "--nodes", str(nodes),
           "--jobs", str(jobs), "--tasks", str(tasks), "--seed", str(seed), "-o", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 0:
        print("trace: rayrm trace generate google " + " ".join(cmd[6:]))
        return path
    print(f"trace: generator unavailable ({(proc.stderr.strip().splitlines() or ['?'])[-1]}); "
          f"using benchmarks/bench_sim.py's synthetic trace")
    path = synthetic_trace(out_dir, nodes, jobs, tasks, seed)
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
    from rm.config import load_config
    from rm.sim import simulate

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
        cmd = [sys.executable, "-m", "rm.cli", "compare", str(path),
               "--policies", "tsf,drf,cdrf,cmmf-cpu,cmmf-mem,fifo", "--out", str(work / "compare")]
        print("$ rayrm compare " + " ".join(cmd[4:]), flush=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=False)
        print(f"compare took {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
