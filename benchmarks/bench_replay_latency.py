"""Allocation-to-running latency of a Ray replay (default: the TSF micro-benchmark).

Replays CONFIG (default configs/paper-micro.yaml) under ``--policy`` at
``--time-scale`` (default 0.05) and prints, in wall milliseconds:

* allocation -> running: the RM placing a container -> its payload starting
  (the RM's ``rayrm_allocation_to_running_seconds`` histogram, here as percentiles);
* allocation -> launch: the RM placing it -> its NM launching it (the AM's long
  poll, its ``start_containers`` call);
* node idle gap: on each node, a container ending -> the next one starting there
  while tasks wait (the whole loop: NM out-of-band heartbeat, NODE_UPDATE,
  allocate, start_containers), also in trace seconds;
* and each job's completion time against the simulator's (``--twin``).

    python benchmarks/bench_replay_latency.py [CONFIG] [--time-scale 0.05] [--executor auto]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from rayrm.rm.runtime.driver import replay

ROOT = Path(__file__).resolve().parents[1]


def idle_gaps(run_dir: Path, until: float) -> np.ndarray:
    """Per node: start of each attempt - the latest finish before it (trace s), while busy."""
    tasks = pd.read_csv(run_dir / "tasks.csv")
    gaps = []
    for _, g in tasks.groupby("node"):
        finishes = np.sort(g.finish.to_numpy())
        for s in g.start.to_numpy():
            before = finishes[finishes <= s + 1e-9]
            if len(before) and 1.0 < s < until:
                gaps.append(s - before[-1])
    return np.array(gaps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", default=str(ROOT / "configs" / "paper-micro.yaml"))
    ap.add_argument("--policy", default="tsf")
    ap.add_argument("--time-scale", type=float, default=0.05)
    ap.add_argument("--executor", default="auto")
    ap.add_argument("--address")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    for k in range(args.repeat):
        out = Path(tempfile.mkdtemp(prefix="rayrm-latency-"))
        s = replay(args.config, policy=args.policy, out=out, time_scale=args.time_scale,
                   address=args.address, executor=args.executor, twin=True, progress=False)
        lat = s["scheduling_latency"]
        a2r, a2l = lat["allocation_to_running_ms"], lat["allocation_to_launch_ms"]
        # the busy period: until the first job leaves the cluster with work still waiting
        gaps = idle_gaps(out, until=0.9 * s["makespan"])
        print(f"run {k + 1}: {s['name']} / {s['policy']} at time scale {s['time_scale']}, executor "
              f"{s['executor']}, {a2r['n']} containers, wall {s['wall_seconds']}s")
        print(f"  allocation -> running   p50 {a2r['p50']:7.2f} ms   p99 {a2r['p99']:7.2f} ms   "
              f"max {a2r['max']:7.2f} ms")
        print(f"  allocation -> launch    p50 {a2l['p50']:7.2f} ms   p99 {a2l['p99']:7.2f} ms")
        if len(gaps):
            ms = gaps * s["time_scale"] * 1000
            print(f"  node idle gap           p50 {np.percentile(ms, 50):7.2f} ms   p99 "
                  f"{np.percentile(ms, 99):7.2f} ms   (mean {gaps.mean():.3f} trace s per container)")
        ratios = s["twin"]["completion_time_ratio"]
        print("  completion vs simulator " + "  ".join(f"{a} x{r:.3f}" for a, r in ratios.items())
              + f"   (max deviation {s['twin']['max_deviation']:.3f})")


if __name__ == "__main__":
    main()
