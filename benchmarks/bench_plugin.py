"""What a policy plugin costs: the built-in TSF against TSF written as an outside plugin.

The paper-scale trace of bench_sim.py (tsf-paper §VI-B: 1,000 nodes, 4,500 jobs, 180k
tasks, from ``rayrm trace generate google``); each policy simulated by whole
``rayrm simulate`` processes (start-up, config, plugin loading, simulation, run
directory), the two alternating so that the shared machine's drift falls on both, and
the least of ``--runs`` (3) counted for each.  The plugin is ``benchmarks/tsf_plugin.py``,
the same key through the public API only (``--policy benchmarks/tsf_plugin.py:PluginTSF``).
The goal: plugin / built-in <= 1.05.  The two run directories must be the same but for
the summary's policy name, source and wall time (checked here too).

    python benchmarks/bench_plugin.py [--nodes 1000 --jobs 4500 --tasks 180000 --seed 7] [--runs 3]

Run it under the shared lock: ``flock /tmp/rayrm-heavy.lock timeout 1800 python ...``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from bench_sim import RAYRM, byte_compile, check_ok, make_trace, run_process, trace_arguments, workdir

PLUGIN = Path(__file__).resolve().parent / "tsf_plugin.py"
GOAL = 1.05
SAME = ("tasks.csv", "jobs.csv", "events.csv", "shares.csv", "nodes.csv")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    trace_arguments(ap)
    ap.add_argument("--runs", type=int, default=3, help="processes per policy; the least wall time counts")
    ap.add_argument("--workdir", help="where the trace and runs go, kept (default: a temporary directory, removed)")
    args = ap.parse_args(argv)
    byte_compile()
    with workdir(args.workdir, "rayrm-bench-plugin-") as work:
        return run(args, work)


def run(args, work: Path) -> int:
    path = Path(args.config) if args.config else make_trace(work, args.nodes, args.jobs, args.tasks, args.seed)
    policies = {"built-in": "tsf", "plugin": f"{PLUGIN}:PluginTSF"}
    walls: dict[str, list[tuple[float, float]]] = {name: [] for name in policies}
    for _ in range(args.runs):
        for name, spec in policies.items():
            out = work / "runs" / name
            shutil.rmtree(out, ignore_errors=True)
            wall, cpu, _, proc = run_process(RAYRM + ["simulate", str(path), "--policy", spec, "--out", str(out),
                                                      "--no-progress"])
            check_ok(proc, f"simulate {name}")
            walls[name].append((wall, cpu))
    print(f"timed: the whole `rayrm simulate CONFIG --policy P --out DIR --no-progress` process, "
          f"alternating, the least of {args.runs}")
    print(f"{'policy':<9} {'--policy':<34} {'wall s':>7} {'cpu s':>7}  every wall s")
    for name, spec in policies.items():
        wall, cpu = min(walls[name])
        shown = spec if len(spec) <= 34 else "benchmarks/tsf_plugin.py:PluginTSF"
        print(f"{name:<9} {shown:<34} {wall:7.2f} {cpu:7.2f}  " + " ".join(f"{w:.2f}" for w, _ in walls[name]))
    ratio = min(walls["plugin"])[0] / min(walls["built-in"])[0]
    same = all((work / "runs" / "built-in" / f).read_bytes() == (work / "runs" / "plugin" / f).read_bytes()
               for f in SAME)
    a, b = (json.loads((work / "runs" / n / "summary.json").read_text()) for n in policies)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    print(f"plugin / built-in: {ratio:.3f} (goal <= {GOAL}); run directories the same: {same} "
          f"(summary differs in: {', '.join(differ)})")
    return 0 if ratio <= GOAL and same else 1


if __name__ == "__main__":
    sys.exit(main())
