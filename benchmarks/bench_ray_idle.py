"""What a Ray actor's process costs doing nothing: the CPU of each of its threads, idle.

The RM is an async Ray actor, and its CPU (``summary.json``'s ``rm.cpu_seconds``) counts
every thread of its process, Ray's own among them.  Ray's worker wakes its main thread on
a timer to check for signals (a ``PeriodicalRunner`` on the task-execution loop, every
10 ms in Ray 2.x, each time taking the GIL), and its gRPC and IO threads poll besides.
None of that depends on what the actor does, so it is a floor under any Ray actor's CPU
over a run's wall time, and part of what ``bench_call_floor.py``'s served calls (no Ray)
leave out.

This starts a local Ray, one async actor like the RM (``num_cpus=0``, many concurrent
calls) that does nothing after answering once, and after ``--settle`` seconds reads the
CPU of each of the process's threads (``/proc/<pid>/task``) over ``--seconds``.  It prints
them grouped by thread name, in ms of CPU per wall second.  Run it alone: another heavy
process on the machine changes the figure.

    flock /tmp/rayrm-heavy.lock python benchmarks/bench_ray_idle.py [--seconds 60] [--settle 5]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import ray


@ray.remote(num_cpus=0, max_concurrency=1000)
class Idle:
    """An async actor that answers once, then waits."""

    async def pid(self) -> int:
        return os.getpid()


def thread_cpu(pid: int) -> dict[str, tuple[str, float]]:
    """Thread id -> (name, CPU seconds so far) of each thread of process ``pid``."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue                                   # the thread ended meanwhile
        out[task.name] = (name, (int(fields[11]) + int(fields[12])) / tick)   # utime + stime
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="wall seconds measured")
    ap.add_argument("--settle", type=float, default=5.0, help="wall seconds waited first (start-up)")
    args = ap.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    actor = Idle.remote()
    pid = ray.get(actor.pid.remote())
    time.sleep(args.settle)
    before = thread_cpu(pid)
    time.sleep(args.seconds)
    after = thread_cpu(pid)
    by_name: dict[str, float] = {}
    for tid, (name, cpu) in after.items():
        by_name[name] = by_name.get(name, 0.0) + cpu - before.get(tid, (name, 0.0))[1]
    total = sum(by_name.values())
    print(f"an idle async Ray actor ({ray.__version__}), {args.seconds:g} s: "
          f"{1000 * total / args.seconds:.1f} ms of CPU per wall second\n")
    print("| thread | CPU s | ms per wall second |")
    print("|---|---|---|")
    for name, cpu in sorted(by_name.items(), key=lambda kv: -kv[1]):
        if cpu > 0:
            print(f"| {name} | {cpu:.2f} | {1000 * cpu / args.seconds:.1f} |")
    ray.shutdown()


if __name__ == "__main__":
    main()
