"""Online scheduling decisions per second: 1,000 nodes, 500 pending apps.

A decision is one container placed by the offer rule.  The cluster is first filled
from empty (every node offered to every app), then runs in steady state: a random
running container finishes, its node is offered again, and so on — the simulator's
pattern.  Prints figures; asserts nothing.

    python benchmarks/bench_online.py [--nodes 1000] [--apps 500] [--policy tsf,...]
"""

from __future__ import annotations

import argparse
import random
import time

from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.core.policies import POLICY_NAMES
from rayrm.rm.core.scheduler import OnlineScheduler

TYPES = [(0.25, 0.25), (0.5, 0.25), (0.5, 0.5), (0.5, 0.75), (0.5, 1.0), (1.0, 1.0),
         (0.25, 0.5), (0.5, 0.125), (1.0, 0.5), (0.5, 0.0625)]


def instance(n_nodes: int, n_apps: int, seed: int):
    rng = random.Random(seed)
    nodes = []
    for i in range(n_nodes):
        cpu, mem = rng.choice(TYPES)
        attrs = {"class": rng.choice("abcd"), "kernel": rng.choice([2, 3, 4]),
                 "rack": f"r{rng.randrange(20)}", "ssd": rng.choice(["yes", "no"])}
        nodes.append(NodeSpec(f"n{i:04d}", Resources(cpu=cpu * 16, mem=mem * 64), attrs))
    choices = ["", "class == a", "class in (a, b)", "kernel >= 3", "ssd == yes",
               "class != d and kernel > 2", "rack in (r1, r2, r3, r4)", "kernel == 4 and ssd == yes"]
    apps = [AppSpec(f"app{k:04d}", Resources(cpu=rng.choice([0.5, 1, 2]), mem=rng.choice([1, 2, 4])),
                    10 ** 6, submit=float(k), constraint=Constraint.parse(rng.choice(choices)))
            for k in range(n_apps)]
    return nodes, apps


def run(policy: str, nodes, apps, steady: int, seed: int) -> tuple[float, float, int]:
    s = OnlineScheduler(policy, ("cpu", "mem"), nodes)
    for a in apps:
        s.submit(a)
    t0 = time.perf_counter()
    running = s.schedule()
    fill = time.perf_counter() - t0
    rng = random.Random(seed)
    placed = 0
    t0 = time.perf_counter()
    for _ in range(steady):
        i = rng.randrange(len(running))
        running[i], running[-1] = running[-1], running[i]
        s.release(running.pop().container_id)
        new = s.schedule()
        placed += len(new)
        running.extend(new)
    steady_s = time.perf_counter() - t0
    return len(s.cluster.containers) / fill, placed / steady_s, len(running)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--apps", type=int, default=500)
    ap.add_argument("--steady", type=int, default=20000, help="container completions to replay")
    ap.add_argument("--policy", default="tsf,drf,cdrf,cmmf-cpu,cmmf-mem,fifo,drfh-ff,slots",
                    help=f"comma-separated, from {', '.join(POLICY_NAMES)}")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    nodes, apps = instance(args.nodes, args.apps, args.seed)
    print(f"{args.nodes} nodes, {args.apps} pending apps")
    print(f"{'policy':10} {'fill decisions/s':>18} {'steady decisions/s':>20} {'running':>8}")
    for p in args.policy.split(","):
        steady = args.steady if p not in ("pm-drf", "drfh-bf") else args.steady // 10
        fill, rate, running = run(p, nodes, apps, steady, args.seed)
        print(f"{p:10} {fill:18,.0f} {rate:20,.0f} {running:8}")


if __name__ == "__main__":
    main()
