"""What this machine charges for working in bursts: the same CPU work, done back to back and
done paced, as a replay's RM does it.

``bench_rm_throughput.py`` sets the RM's CPU per allocation against the simulator's CPU per
task.  The two do not work alike.  The simulator runs flat out from start to end.  The RM
follows the trace's clock: at time scale 0.02 it is busy about a tenth of the time (summary
``pace.rm_cpu_utilisation``), in bursts of a few hundred microseconds (one call each, some
200 a second), idle in between while the hosts and everything else on the machine run.  A
CPU that comes back from idle has lost what made the work fast (its caches, its branch
predictors, on a virtual machine perhaps the physical core), so the same Python work can
cost more CPU when it is done in bursts.  This script measures by how much, on this machine,
for the work the goal compares:

* **the simulator** — ``rayrm simulate`` of the paper-scale trace (as ``bench_rm_throughput``
  runs it, in a subprocess; its whole-process CPU per task), once back to back and once
  paced: this process lets it run for ``--burst-ms`` of wall time, stops it (SIGSTOP) for as
  long as keeps it busy ``--duty`` of the time, lets it run again (SIGCONT), and so on to
  its end.  A stopped process is off the CPU as an idle RM is; nothing else changes.
* **the RM's state work** (with ``--run DIR``, a replay run directory with its RM state kept:
  ``rayrm replay --keep-rm-state``) — the kept journal applied to the state of the first
  kept snapshot, as ``bench_call_floor.py``'s "state's work, replayed warm" (here with the
  loading of the snapshot and the journals, in a child process), back to back and paced the
  same way.

Each row: CPU back to back, CPU paced, and their ratio (the burst factor).  The defaults,
0.5 ms bursts at a duty of 0.1, are the RM's at 0.02 on the paper-scale trace (28 s of CPU
over 56,000 journal records and 310 s: some 0.5 ms a call, 10% busy).  The burst factor is
the machine's, not rayrm's: it is what any work done at the RM's pace pays here over the
same work done flat out.

    flock /tmp/rayrm-heavy.lock timeout 1800 python benchmarks/bench_paced.py \\
        [--nodes 1000] [--burst-ms 0.5] [--duty 0.1] [--run DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rm_throughput import child_cpu, sim_command, task_attempts, trace  # noqa: E402

#: the state's replay (``bench_call_floor.state_work``), run in a child process (``python -c``)
STATE_REPLAY = """
import sys
from pathlib import Path
sys.path.insert(0, {bench!r})
from bench_call_floor import journals, state_work
d = Path({state_dir!r})
state_work(d, journals(d))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000, help="the generated trace's node count")
    ap.add_argument("--burst-ms", type=float, default=0.5, help="wall milliseconds the paced work runs at a time")
    ap.add_argument("--duty", type=float, default=0.1, help="the share of wall time the paced work runs")
    ap.add_argument("--policy", default="tsf")
    ap.add_argument("--run", help="a replay run directory with rm-state kept: measure its state's work too")
    ap.add_argument("--out", help="the trace and the simulator's run directory (default: a temporary one)")
    args = ap.parse_args()
    if not args.burst_ms > 0:
        ap.error(f"--burst-ms must be positive, got {args.burst_ms:g}")
    if not 0 < args.duty < 1:
        ap.error(f"--duty must be between 0 and 1, got {args.duty:g}")
    burst = args.burst_ms / 1000.0
    state_dir = Path(args.run) / "rm-state" if args.run else None
    if state_dir is not None and not any(state_dir.glob("journal-*.log")):
        sys.exit(f"{state_dir}: no kept journal (replay with --keep-rm-state)")
    out = Path(args.out or tempfile.mkdtemp(prefix="rayrm-paced-"))
    out.mkdir(parents=True, exist_ok=True)
    config = trace(out, args.nodes, 7200.0)
    work = [("the simulator, whole process", sim_command(config, args.policy, None, out / "sim"))]
    if state_dir is not None:
        code = STATE_REPLAY.format(bench=str(Path(__file__).resolve().parent), state_dir=str(state_dir))
        work.append(("the RM's state work (kept journal, from the first snapshot)", [sys.executable, "-c", code]))
    print(f"paced: {1000 * burst:g} ms bursts, busy {args.duty:.0%} of the time\n")
    print("| work | CPU s back to back | CPU s paced | burst factor |")
    print("|---|---|---|---|")
    rows = []
    for what, cmd in work:
        flat = child_cpu(cmd)
        paced = child_cpu(cmd, burst, args.duty)
        rows.append({"work": what, "flat_cpu_s": flat, "paced_cpu_s": paced, "factor": paced / flat})
        print(f"| {what} | {flat:.2f} | {paced:.2f} | {paced / flat:.2f} |", flush=True)
    tasks = task_attempts(json.loads((out / "sim" / "summary.json").read_text()))
    print(f"\nsimulator: {tasks} tasks, {1e6 * rows[0]['flat_cpu_s'] / tasks:.1f} us CPU per task back to back, "
          f"{1e6 * rows[0]['paced_cpu_s'] / tasks:.1f} paced")
    (out / "paced.json").write_text(json.dumps({"burst_s": burst, "duty": args.duty, "tasks": tasks,
                                                "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
