"""Where a whole ``rayrm simulate`` process spends its CPU, part by part: py-spy's samples of
one process (Python and native frames, ``--native``), each counted once, under the first
part below that one of its frames belongs to.

The parts, most specific first: imports; the config (``load_config``); setting the
simulation up; a job's arrival — the scheduler's ``submit`` (eligibility, the pending index,
unit and key), then the rest of ``_arrive`` (task durations, share units, the log's row);
the scheduling round (``schedule``: offers, fits, placements); releasing a finished task's
container (and rekeying its app); the run log's task and event rows (``start``/``end``) and
its share rows (``_record_shares``); the loop's own work besides (the heap, the running
attempts, the jobs' counts); writing the run directory (the main thread's ``write`` and the
writer thread's batches); the rest (interpreter start and exit, the summary).  Samples of a
thread waiting (the writer's queue, a lock) are left out, so the shares are of CPU.

It is the profile behind docs/design.md#native-core's "what is left": which part a change
must shrink.  Needs py-spy (``pip install py-spy``); prints figures, asserts nothing.

    python benchmarks/profile_sim.py [--config CONFIG] [--policy tsf] [--core native] [--rate 500]

Run it under the shared lock: ``flock /tmp/rayrm-heavy.lock timeout 600 python ...``.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench_sim import RAYRM, byte_compile, make_trace, trace_arguments, workdir

#: (part, frame-name prefixes): a sample goes to the first part one of whose prefixes begins
#: one of its frames (py-spy names a frame "function (file:line)"; a Cython function by its
#: C name, "_offer_schedule_in", or its Python name)
PARTS = (
    ("imports", ("_find_and_load",)),
    ("config", ("load_config",)),
    ("set-up", ("Simulation.__init__",)),
    ("arrival: submit", ("OnlineScheduler.submit", "TreeScheduler.submit")),
    ("arrival: the rest", ("Simulation._arrive",)),
    ("scheduling round", ("_offer_schedule_in", "_tree_tree_schedule", "OnlineScheduler.schedule",
                          "TreeScheduler.schedule")),
    ("release", ("_offer_release_in", "_tree_tree_release", "OnlineScheduler.release",
                 "TreeScheduler.release")),
    ("run log: task rows", ("start (", "end (", "RunLog.start", "RunLog.end", "NativeRunLog.start",
                            "NativeRunLog.end")),
    ("run log: share rows", ("Simulation._record_shares",)),
    ("the loop's own", ("_simloop_loop", "Simulation._loop")),
    ("run directory", ("RunLog.write", "NativeRunLog.write", "TableSink", "Background.", "csv_lines")),
)
#: a frame of a thread that waits, not works
IDLE = ("_queue_SimpleQueue_get", "PyThread_acquire_lock", "pthread_cond_wait", "pthread_cond_timedwait",
        "Thread.wait", "Condition.wait")


def part_of(frames: list[str]) -> str | None:
    """The part a sample's stack (outermost first) counts under; None for a waiting thread."""
    if any(f.startswith(IDLE) for f in frames[-3:]):
        return None
    for part, prefixes in PARTS:
        if any(f.startswith(prefixes) for f in frames):
            return part
    return "the rest"


def profile(config: Path, policy: str, core: str, rate: int, work: Path) -> collections.Counter:
    """py-spy's raw samples of one ``rayrm simulate`` process, counted by part."""
    raw = work / "samples.txt"
    env = dict(os.environ, RAYRM_CORE=core)
    cmd = ["py-spy", "record", "--native", "--rate", str(rate), "--format", "raw", "--output", str(raw), "--",
           *RAYRM, "simulate", str(config), "--policy", policy, "--out", str(work / "run"), "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0 or not raw.exists():
        sys.exit(f"profile_sim: py-spy failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    counts: collections.Counter = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        part = part_of(stack.split(";"))
        if part is not None:
            counts[part] += int(n)
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    trace_arguments(ap)
    ap.add_argument("--policy", default="tsf")
    ap.add_argument("--core", default="native", choices=("native", "python"))
    ap.add_argument("--rate", type=int, default=500, help="samples a second (py-spy's --rate)")
    ap.add_argument("--workdir", help="keep the trace, the run and py-spy's samples here")
    args = ap.parse_args()
    if shutil.which("py-spy") is None:
        sys.exit("profile_sim: needs py-spy on PATH (pip install py-spy)")
    byte_compile()
    with workdir(args.workdir, "rayrm-profile-") as work:
        config = Path(args.config) if args.config else make_trace(work, args.nodes, args.jobs, args.tasks, args.seed)
        counts = profile(config, args.policy, args.core, args.rate, work)
    total = sum(counts.values())
    print(f"rayrm simulate {config.name} --policy {args.policy} (RAYRM_CORE={args.core}): "
          f"{total:,} samples of CPU (py-spy --native, --rate {args.rate})")
    for part, _ in (*PARTS, ("the rest", ())):
        print(f"{part:<22} {counts[part] / total:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
