"""Offline progressive filling at paper scale: 1,000 machines of ten types, 100 users.

Prints the solve time of every offline policy (goal for tsf: under 1 s) and, apart,
the time to build the instance (constraint matching over 100 x 1,000 pairs).
Figures only; nothing here asserts on time.

    python benchmarks/bench_offline.py [--machines 1000] [--types 10] [--users 100] [--seed 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.offline.filling import POLICIES, Problem, machine_types, progressive_filling


def instance(machines: int, types: int, users: int, seed: int) -> tuple[list[NodeSpec], list[AppSpec]]:
    """Machine types with random capacities and attributes; users with random demands.

    About 40% of users are unconstrained; the rest need one attribute value (a
    hardware class, a kernel version range or a GPU), as in tsf-paper §VI-B1.
    Job sizes (tasks) are heavy-tailed, so many users are capped by their own
    tasks at different levels and progressive filling takes many rounds.
    """
    rng = np.random.default_rng(seed)
    kinds = []
    for t in range(types):
        cap = Resources(cpu=float(rng.choice([4, 8, 16, 32])), memory_mb=float(rng.choice([8, 16, 32, 64, 128])) * 1024)
        attrs = {"class": f"c{t % 4}", "kernel": float(rng.choice([2.6, 3.1, 4.4])), "arch": "x86"}
        if rng.random() < 0.3:
            attrs["gpu"] = "yes"
        kinds.append((cap, attrs))
    nodes = []
    for m in range(machines):
        cap, attrs = kinds[m % types]
        nodes.append(NodeSpec(f"m{m:04d}", cap, attrs))
    apps = []
    for i in range(users):
        demand = Resources(cpu=float(rng.choice([0.5, 1, 2, 4])), memory_mb=float(rng.choice([512, 1024, 2048, 4096, 8192])))
        roll = rng.random()
        if roll < 0.4:
            text = ""
        elif roll < 0.6:
            text = f"class in (c{rng.integers(4)}, c{rng.integers(4)})"
        elif roll < 0.8:
            text = f"kernel >= {rng.choice([3, 4])}"
        else:
            text = "gpu == yes"
        tasks = int(min(20000, np.ceil(rng.pareto(1.2) * 150)))
        apps.append(AppSpec(f"u{i:03d}", demand, tasks, weight=float(rng.choice([1, 1, 2])),
                            constraint=Constraint.parse(text)))
    return nodes, apps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machines", type=int, default=1000)
    ap.add_argument("--types", type=int, default=10)
    ap.add_argument("--users", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="solves per policy; the best is shown")
    args = ap.parse_args()
    nodes, apps = instance(args.machines, args.types, args.users, args.seed)
    for limited in (False, True):
        started = time.perf_counter()
        problem = Problem.from_specs(nodes, apps, ("cpu", "memory_mb"), limit_tasks=limited)
        built = time.perf_counter() - started
        kinds, _ = machine_types(problem)
        print(f"\n{args.machines} machines ({kinds.max() + 1} types after coalescing), {args.users} users, "
              f"{'each with its own number of tasks' if limited else 'unlimited tasks'}; "
              f"building the instance took {built:.3f} s")
        print(f"{'policy':8} {'solve s':>8} {'rounds':>6} {'tasks':>12} {'min share':>10}")
        for policy in POLICIES:
            best, alloc = float("inf"), None
            for _ in range(args.repeat):
                started = time.perf_counter()
                alloc = progressive_filling(problem, policy, resource="cpu")
                best = min(best, time.perf_counter() - started)
            print(f"{policy:8} {best:8.3f} {alloc.rounds:6d} {alloc.tasks.sum():12.1f} {alloc.share.min():10.4f}")


if __name__ == "__main__":
    main()
