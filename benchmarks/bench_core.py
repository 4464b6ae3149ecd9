"""The least per-task Python work a simulator of a run must do, timed against the heapq floor.

``bench_sim.py`` compares the whole ``rayrm simulate`` process with the *floor*: a bare
heapq loop that pushes and pops two events per task.  This script asks how much of the
gap is irreducible: it replays a finished run directory's own placements (so every
scheduling *decision* comes for free — which app, which node, when) and does only the
work a correct Python simulator must still do for each task attempt:

* pop its arrival or completion event (heapq), as the floor does;
* release: the node's free vector gets the demand back, the app's running count drops,
  its key (running × unit) is recomputed and the policy order updated (one heappush
  into a lazily-cleaned priority heap, the cheapest ordered structure there is);
* place: the node's free vector loses the demand, the app's running count and key grow
  (one heappop + heappush for the order), and the completion is pushed;
* record: its task row, a start and an end event row, and a share row at each start and
  end (what ``RunLog`` writes; docs/design.md), formatted to CSV by rayrm's own batch
  writer (``rayrm.rm.runs.log``: Arrow buffers, pyarrow's CSV writer in C++).

Nothing else: no constraint checks, no fit search, no node choice, no start-up, no config
load (all timed in ``bench_sim.py``).  So its time is a strict lower bound of a simulator
in Python that writes the run directory, and its ratio to the floor a bound on how close
``rayrm simulate`` can get.

    python benchmarks/bench_core.py CONFIG RUN_DIR      # RUN_DIR: rayrm simulate CONFIG --out RUN_DIR

Run it under the shared lock: ``flock /tmp/rayrm-heavy.lock timeout 600 python ...``.
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from pathlib import Path



def load(config: Path, run: Path):
    """(jobs: app -> (submit, demand, unit), node names, placements sorted by start)."""
    from rayrm.rm.core.config import load_config  # noqa: PLC0415
    from rayrm.rm.runs.reader import RunDir  # noqa: PLC0415

    cfg = load_config(config)
    dims = cfg.dims
    jobs = {j.app.app_id: (j.app.submit, j.app.demand.vector(dims), 1.0 / j.app.num_tasks) for j in cfg.jobs}
    tasks = RunDir(run).tasks
    nodes = sorted(set(tasks["node"]))
    index = {n: i for i, n in enumerate(nodes)}
    placements = list(zip(tasks["app"], tasks["task"].tolist(), tasks["attempt"].tolist(),
                          [index[n] for n in tasks["node"]], tasks["submit"].tolist(), tasks["start"].tolist(),
                          tasks["finish"].tolist()))
    return jobs, nodes, placements, len(dims)


def core_loop(jobs: dict, nodes: list, placements: list, width: int) -> tuple[float, float, int]:
    """The irreducible per-task work (module docstring): (loop s, CSV formatting s, rows)."""
    from rayrm.rm.runs.log import _csv_bytes  # noqa: PLC0415  (rayrm's own batch formatter)

    t0 = time.perf_counter()
    free = [[1e18] * width for _ in nodes]
    running = dict.fromkeys(jobs, 0)
    order: list = []
    heap: list = []
    push, pop = heapq.heappush, heapq.heappop
    seq = 0
    for p in placements:                  # each attempt becomes due at its recorded start
        seq += 1
        push(heap, (p[5], 1, seq, p))
    task_rows, event_rows, share_rows = [], [], []
    while heap:
        t, kind, _, p = pop(heap)
        app, task, attempt, m, submit, start, finish = p
        sub, demand, unit = jobs[app]
        f = free[m]
        n = running[app]
        if kind == 1:                     # place
            for r in range(width):
                f[r] -= demand[r]
            n += 1
            if order:
                pop(order)
            push(order, (n * unit, sub, app))
            seq += 1
            push(heap, (finish, 0, seq, p))
            event_rows.append((t, None, "start", app, task, seq, nodes[m], ""))
        else:                             # complete
            for r in range(width):
                f[r] += demand[r]
            n -= 1
            push(order, (n * unit, sub, app))
            task_rows.append((app, task, attempt, nodes[m], submit, start, t, "finished"))
            event_rows.append((t, None, "finished", app, task, seq, nodes[m], ""))
        running[app] = n
        share_rows.append((t, app, n * unit, n * unit, n * unit, n * unit, n))
    t1 = time.perf_counter()
    for table, rows in (("tasks", task_rows), ("events", event_rows), ("shares", share_rows)):
        _csv_bytes(table, rows)
    return t1 - t0, time.perf_counter() - t1, len(task_rows) + len(event_rows) + len(share_rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("run", help="a run directory of CONFIG (rayrm simulate CONFIG --out RUN)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    from bench_sim import heapq_floor  # noqa: PLC0415  (same directory)

    jobs, nodes, placements, width = load(Path(args.config), Path(args.run))
    print(f"{len(placements):,} attempts on {len(nodes):,} nodes")
    print(f"{'floor s':>8} {'loop s':>7} {'CSV s':>6} {'core s':>7} {'loop x floor':>13} {'core x floor':>13} "
          f"{'rows':>9}")
    for _ in range(args.repeat):
        floor = heapq_floor(Path(args.config))
        loop, text, rows = core_loop(jobs, nodes, placements, width)
        print(f"{floor:8.2f} {loop:7.2f} {text:6.2f} {loop + text:7.2f} {loop / floor:13.1f} "
              f"{(loop + text) / floor:13.1f} {rows:9,}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
