"""Where a simulation task's time goes on Ray, beyond the simulation (rayrm.rm.runtime.experiments).

On a local Ray of 2 CPUs, one task at a time, for the 200-node workload of
``bench_experiments.py`` (``rayrm trace generate google --nodes 200 --jobs 900 --tasks
36000 --max-duration 3600``), tsf, seed 1, the compact result a sweep brings back.  Each
piece is timed ``--runs`` times and printed as least and median milliseconds:

* an empty task's round trip (submit, lease a worker, run, reply): the floor of any task;
* an empty task given the config as a plain object reference, which Ray fetches and
  unpickles before each task runs;
* ``ray.get`` of the config inside a task: the unpickling alone;
* an empty task returning the compact result's bytes (summary, jobs.csv, tasks.csv);
* the simulation task as the runner sends it (the config a ``Shared`` reference the
  worker has decoded already): submit to start, the call itself, end to result in the
  driver (the wall clock of one machine, read in both processes);
* the same call in this process.

    flock /tmp/rayrm-heavy.lock timeout 900 python benchmarks/bench_experiment_task.py [--runs 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

from rayrm.rm.runtime.experiments import Runner, call, simulate_files, task
from rayrm.traces.generate import google_experiment


def _empty(*_args):
    return None


def _returning(size: int) -> bytes:
    return b"x" * size


def _decode(shared) -> float:
    import ray  # noqa: PLC0415
    started = time.perf_counter()
    ray.get(shared.ref)
    return time.perf_counter() - started


def _timed_task(fn, *args):
    started = time.time()
    outcome = task(fn, *args)
    return started, time.time(), outcome


def _row(name: str, seconds: list[float]) -> None:
    ms = [1000 * s for s in seconds]
    print(f"{name} | {min(ms):.1f} | {statistics.median(ms):.1f}")


def _round_trips(remote, args, runs: int) -> list[float]:
    import ray  # noqa: PLC0415
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        ray.get(remote.remote(*args))
        walls.append(time.perf_counter() - started)
    return walls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="times each piece is timed (default 10)")
    args = ap.parse_args()
    import ray  # noqa: PLC0415

    cfg = google_experiment(200, 900, 36000, 1, max_duration=3600)
    compact = simulate_files(cfg, "tsf", 1, "compact").files
    with Runner(workers=1) as runner:
        shared = runner.share(cfg)
        remote = {f.__name__: ray.remote(num_cpus=1)(f) for f in (_empty, _returning, _decode, _timed_task)}
        ray.get([remote["_empty"].remote() for _ in range(2)])              # workers up
        print("piece | least ms | median ms")
        _row("empty task, round trip", _round_trips(remote["_empty"], (), args.runs))
        _row("empty task given the config as a plain reference",
             _round_trips(remote["_empty"], (shared.ref,), args.runs))
        _row("unpickling the config in a task", [ray.get(remote["_decode"].remote(shared)) for _ in range(args.runs)])
        size = sum(len(b) for b in compact.values())
        _row(f"empty task returning {size / 1e6:.1f} MB", _round_trips(remote["_returning"], (size,), args.runs))
        ray.get([remote["_timed_task"].remote(simulate_files, shared, "tsf", 1, "none") for _ in range(2)])
        pieces: dict[str, list[float]] = {"submit to start": [], "the call": [], "end to result in the driver": []}
        for _ in range(args.runs):
            sent = time.time()
            started, ended, outcome = ray.get(remote["_timed_task"].remote(simulate_files, shared, "tsf", 1, "compact"))
            got = time.time()
            assert outcome.ok, outcome.error
            for name, s in zip(pieces, (started - sent, ended - started, got - ended)):
                pieces[name].append(s)
        for name, seconds in pieces.items():
            _row(f"simulation task: {name}", seconds)
    _row("the call in this process", [call(simulate_files, cfg, "tsf", 1, "compact").seconds for _ in range(args.runs)])


if __name__ == "__main__":
    main()
