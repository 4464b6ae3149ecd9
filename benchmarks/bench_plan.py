"""What the replay's plan stage costs the driver: ``peak_containers`` over a config's nodes.

Before any actor starts, the driver bounds the containers each Ray node could ever run
(``rayrm.nodes.executors.peak_containers``: Σ over nodes of max over admitting apps of
floor(min_r C_mr / d_ir)) to choose the executor.  For the paper-scale trace (1,000 nodes,
4,500 jobs) that is 4.5 million (node, app) pairs, so it is the driver's largest cost.
This prints its CPU seconds on one Ray node holding every NM, the µs of one ``tasks_fit``,
and, with ``--reference``, the same bound by the plain double loop (every node, every app),
which must give the same figure::

    python benchmarks/bench_plan.py /work/bench/g/g.yaml --reference
"""

from __future__ import annotations

import argparse
import time
import timeit

from rayrm.nodes.executors import peak_containers
from rayrm.rm.core.config import load_config
from rayrm.rm.core.shares import tasks_fit


def reference(nodes, apps, dims) -> int:
    """The bound by its definition: every node, every app."""
    total = 0
    for n in nodes:
        cap = n.capacity.vector(dims)
        best = 0.0
        for a in apps:
            if a.constraint.matches(n.name, n.attributes):
                best = max(best, tasks_fit(cap, a.demand.vector(dims)))
        total += int(best)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--reference", action="store_true", help="also the plain double loop (slow), checked equal")
    args = ap.parse_args()
    cfg = load_config(args.config)
    nodes, apps, dims = list(cfg.nodes), list(cfg.apps), tuple(cfg.dims)
    t0 = time.process_time()
    peak = peak_containers(nodes, apps, dims)
    took = time.process_time() - t0
    print(f"{len(nodes)} nodes, {len(apps)} apps, {len({a.constraint for a in apps})} constraints: "
          f"peak {peak} containers in {took:.2f} CPU s")
    cap, demand = nodes[0].capacity.vector(dims), apps[0].demand.vector(dims)
    per = min(timeit.repeat(lambda: tasks_fit(cap, demand), number=100_000, repeat=3)) / 100_000
    print(f"tasks_fit: {per * 1e6:.2f} µs a call")
    if args.reference:
        t0 = time.process_time()
        ref = reference(nodes, apps, dims)
        print(f"the double loop: peak {ref} in {time.process_time() - t0:.2f} CPU s "
              f"({'the same' if ref == peak else 'DIFFERENT'})")


if __name__ == "__main__":
    main()
