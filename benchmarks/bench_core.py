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
  end (what ``RunLog`` writes; docs/design.md), appended to typed columns as ``RunLog``
  holds them, then formatted to CSV by rayrm's own batch writer (``rayrm.rm.runs.log``:
  Arrow buffers, pyarrow's CSV writer in C++).

Share rows are coalesced per instant (one per app whose running count changed), as
``RunLog`` does.  Nothing else: no constraint checks, no fit search, no node choice.

It prints, each × the floor:

* *loop*: the per-attempt work above;
* *arrive*: what each job's arrival needs before a task of it can be placed — the nodes
  its constraint and demand admit (rayrm's cached ``ClusterState.add_app``) and its task
  durations from the seed (``JobSpec.task_durations``);
* *write*: pyarrow's C++ CSV writer alone over the three tables already built as Arrow
  columns — the least any writer of those rows pays (a writer thread could hide it, so the
  bound below counts it separately);
* *convert*: rayrm's own conversion of those columns to Arrow arrays (``RunLog`` holds
  rows as typed columns, as this loop does);
* *start-up*: a process that imports the simulator and loads the config, timed whole;
* *bound*: start-up + loop, what a Python ``rayrm simulate`` pays before its first
  scheduling decision and before writing a byte; then + arrive, and + arrive + write.

So *bound* is a strict lower bound of a simulator in Python that writes the run directory,
and its ratio to the floor a bound on how close ``rayrm simulate`` can get; *+arrive* adds
work every constrained trace needs, done as rayrm does it (cached, but not the least
conceivable).

    python benchmarks/bench_core.py CONFIG RUN_DIR      # RUN_DIR: rayrm simulate CONFIG --out RUN_DIR

Run it under the shared lock: ``flock /tmp/rayrm-heavy.lock timeout 600 python ...``.
"""

from __future__ import annotations

import argparse
import heapq
import subprocess
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


def core_loop(jobs: dict, nodes: list, placements: list, width: int) -> tuple[float, dict]:
    """The irreducible per-task work (module docstring): (loop s, {table: its rows}), the rows
    held as ``RunLog`` holds them, typed columns (``rayrm.rm.runs.columns.ColumnBuffer``)."""
    from rayrm.rm.runs.columns import ColumnBuffer  # noqa: PLC0415

    tables = {t: ColumnBuffer(t) for t in ("tasks", "events", "shares")}
    t_app, t_task, t_attempt, t_node, t_submit, t_start, t_finish, t_status = (
        c.append for c in tables["tasks"].cols)
    e_time, e_wall, e_kind, e_app, e_task, e_container, e_node, e_detail = (c.append for c in tables["events"].cols)
    nan = float("nan")
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
    changed: dict = {}                    # app -> its share row at this instant
    shares = tables["shares"]
    now = None
    while heap:
        t, kind, _, p = pop(heap)
        if t != now:                      # a new instant: the last one's share rows
            for row in changed.values():
                shares.append(row)
            changed.clear()
            now = t
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
            status = "start"
        else:                             # complete
            for r in range(width):
                f[r] += demand[r]
            n -= 1
            push(order, (n * unit, sub, app))
            status = "finished"
            t_app(app)
            t_task(task)
            t_attempt(attempt)
            t_node(nodes[m])
            t_submit(submit)
            t_start(start)
            t_finish(t)
            t_status(status)
        e_time(t)
        e_wall(nan)
        e_kind(status)
        e_app(app)
        e_task(task)
        e_container(seq)
        e_node(nodes[m])
        e_detail("")
        running[app] = n
        changed[app] = (t, app, n * unit, n * unit, n * unit, n * unit, n)
    for row in changed.values():
        shares.append(row)
    return time.perf_counter() - t0, tables


def write_times(tables: dict) -> tuple[float, float]:
    """(rayrm's conversion s, C++ CSV write s) for the columns of ``core_loop``: Arrow
    columns built from them as ``RunLog`` builds a batch, then pyarrow's writer alone."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.csv as pacsv  # noqa: PLC0415

    from rayrm.rm.runs.encoding import csv_table  # noqa: PLC0415  (rayrm's own batch writer)

    t0 = time.perf_counter()
    built = [csv_table(buffer) for buffer in tables.values()]
    convert = time.perf_counter() - t0
    options = pacsv.WriteOptions(include_header=False, quoting_style="none", eol="\r\n")
    t0 = time.perf_counter()
    for batch in built:
        pacsv.write_csv(batch, pa.BufferOutputStream(), options)
    return convert, time.perf_counter() - t0


def arrival_time(config: Path) -> float:
    """Wall s of what every job's arrival needs before any of its tasks can be placed: the
    nodes its constraint and demand admit (rayrm's ``ClusterState.add_app``, which caches
    clause matches and repeated shapes) and its task durations from the seed
    (``JobSpec.task_durations``).  No policy key, no pending index, no run log."""
    from rayrm.rm.core.cluster import ClusterState  # noqa: PLC0415
    from rayrm.rm.core.config import load_config  # noqa: PLC0415

    cfg = load_config(config)
    t0 = time.perf_counter()
    cluster = ClusterState(cfg.dims)
    cluster.add_nodes(list(cfg.nodes))
    for job in cfg.jobs:
        cluster.add_app(job.app)
        job.task_durations(cfg.seed)
    return time.perf_counter() - t0


def startup_time(config: Path) -> float:
    """Wall s of a whole process that imports the simulator and loads ``config``: what
    ``rayrm simulate`` pays before its first event."""
    code = ("import sys; from rayrm.rm.core.config import load_config; import rayrm.rm.sim.engine; "
            "import rayrm.rm.cli.main; load_config(sys.argv[1])")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(config)], check=True)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("run", help="a run directory of CONFIG (rayrm simulate CONFIG --out RUN)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    from bench_sim import FLOOR_RUNS, byte_compile, heapq_floor  # noqa: PLC0415  (same directory)

    byte_compile()                        # start-up as a pip-installed user's (bench_sim.py)
    jobs, nodes, placements, width = load(Path(args.config), Path(args.run))
    print(f"{len(placements):,} attempts on {len(nodes):,} nodes; times in s, then x floor")
    print(f"{'floor':>6} {'start-up':>9} {'loop':>6} {'arrive':>7} {'write':>6} {'convert':>8} {'rows':>9} | "
          f"{'start-up':>9} {'loop':>6} {'arrive':>7} {'write':>6} {'convert':>8} {'bound':>6} {'+arrive':>8} "
          f"{'+write':>7}")
    for _ in range(args.repeat):
        floor = min(heapq_floor(Path(args.config)) for _ in range(FLOOR_RUNS))
        start = startup_time(Path(args.config))
        loop, tables = core_loop(jobs, nodes, placements, width)
        arrive = arrival_time(Path(args.config))
        convert, write = write_times(tables)
        rows = sum(map(len, tables.values()))
        bound = start + loop
        x = [v / floor for v in (start, loop, arrive, write, convert, bound, bound + arrive, bound + arrive + write)]
        print(f"{floor:6.2f} {start:9.2f} {loop:6.2f} {arrive:7.2f} {write:6.2f} {convert:8.2f} {rows:9,} | "
              f"{x[0]:9.1f} {x[1]:6.1f} {x[2]:7.1f} {x[3]:6.1f} {x[4]:8.1f} {x[5]:6.1f} {x[6]:8.1f} "
              f"{x[7]:7.1f}", flush=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
