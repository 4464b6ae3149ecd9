"""What the queue tree costs ``rayrm simulate`` at paper scale (issue 39, item 7).

The paper-scale trace (tsf-paper §VI-B: 1,000 nodes, 4,500 jobs, 180k tasks, from
``rayrm trace generate google`` as in bench_sim.py) is simulated under TSF three ways, each
the whole ``rayrm simulate`` process timed from outside, ``--runs`` rounds (3), each
round every variant once, one after another.  Each variant's least and median wall are
printed; a ratio's goal is judged on the median over the rounds of the round's own ratio
(its two processes a few seconds apart), as ``farm-bench``'s median A/B: this machine's
speed drifts by up to 30% over minutes, and the least of each variant, taken in different
rounds, can pair a fast minute with a slow one (the ratio of the least walls is printed
beside it, and the median ratio of the processes' CPU seconds):

* ``flat``: the config as generated (no ``queues:``), this tree's code;
* ``tree``: the same jobs over a 2-level tree of 10 leaves — prod (weight 3) and dev
  (weight 1), five leaves each, prod's leaves weighted 1..5 — each job in leaf
  crc32(id) mod 10; goal: tree / flat <= 1.3;
* ``yarn-fair``, ``yarn-capacity``: the tree under YARN's Fair and Capacity schedulers
  (docs/yarn-schedulers.md; jobs' users u0..u6, so the Capacity Scheduler's user limits
  apply); reported against ``tree`` (TSF on the same tree), no goal;
* ``preempt``: the tree with YARN's preemption on (``preemption: {enabled: true,
  min_share_timeout: 30, fair_share_timeout: 60, fair_share_threshold: 0.5, grace: 15}``,
  docs/preemption.md) under TSF; goal: preempt / flat <= 1.5;
* ``main``: with ``--main``, the flat config under the rayrm the interpreter imports
  without PYTHONPATH (the venv's install of main), or with ``--main DIR`` under
  PYTHONPATH=DIR (a checkout of main at DIR/rayrm, e.g. ``git archive main``: imported the
  way this tree is); goal: flat / main <= 1.03 (a config without queues costs what it did).

    flock /work/heavy.lock python benchmarks/bench_queues.py [--main [DIR]] [--no-yarn] [--no-preempt] [--runs 3] [--config google.yaml]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import zlib
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sim import byte_compile, check_ok, make_trace, run_process, trace_arguments, workdir  # noqa: E402

RAYRM = [sys.executable, "-m", "rayrm.rm.cli.main"]
LEAVES = [f"prod.p{k}" for k in range(5)] + [f"dev.d{k}" for k in range(5)]


def tree_config(flat: Path, out: Path) -> Path:
    """The flat config with a 2-level tree of 10 leaves and every job put in one of them."""
    doc = yaml.load(flat.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    doc["name"] = doc.get("name", "trace") + "-tree"
    doc["queues"] = [
        {"name": "prod", "weight": 3, "children": [{"name": f"p{k}", "weight": k + 1} for k in range(5)]},
        {"name": "dev", "weight": 1, "children": [{"name": f"d{k}"} for k in range(5)]}]
    table = flat.parent / doc["workload"]["file"]
    lines = table.read_text().splitlines()
    head = lines[0].split(",")
    at = head.index("id")
    rows = [lines[0] + ",queue,user"]
    for line in lines[1:]:
        job = next(iter(_cells(line, at)))
        rows.append(f"{line},{LEAVES[zlib.crc32(job.encode()) % 10]},u{zlib.crc32(job.encode()) % 7}")
    (out / "tree.jobs.csv").write_text("\n".join(rows) + "\n")
    doc["workload"] = {"file": "tree.jobs.csv"}
    path = out / "tree.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def preempt_config(tree: Path, out: Path) -> Path:
    """The tree config with preemption on (module docstring)."""
    doc = yaml.load(tree.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    doc["name"] = doc["name"] + "-preempt"
    doc["preemption"] = {"enabled": True, "min_share_timeout": 30, "fair_share_timeout": 60,
                         "fair_share_threshold": 0.5, "grace": 15}
    path = out / "preempt.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _cells(line: str, at: int):
    import csv
    yield next(csv.reader([line]))[at]


def timed(config: Path, out: Path, pythonpath: str | None, policy: str = "tsf") -> tuple[float, float]:
    """(wall, user + system CPU) seconds of one ``rayrm simulate`` process importing rayrm
    from ``pythonpath`` (None: without PYTHONPATH)."""
    env_path = os.environ.pop("PYTHONPATH", None)
    if pythonpath is not None:
        os.environ["PYTHONPATH"] = pythonpath
    try:
        wall, cpu, _, proc = run_process(RAYRM + ["simulate", str(config), "--policy", policy, "--out", str(out),
                                                  "--no-progress"])
    finally:
        os.environ.pop("PYTHONPATH", None)
        if env_path is not None:
            os.environ["PYTHONPATH"] = env_path
    check_ok(proc, f"simulate {config.name} ({pythonpath})")
    return wall, cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    trace_arguments(ap)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--main", nargs="?", const="", default=None, metavar="DIR",
                    help="time the flat config under main too: the installed rayrm, or PYTHONPATH=DIR")
    ap.add_argument("--workdir", help="where the trace and runs go, kept (default: a temporary directory, removed)")
    ap.add_argument("--no-yarn", action="store_true", help="leave out the yarn-fair and yarn-capacity rows")
    ap.add_argument("--no-preempt", action="store_true", help="leave out the preemption row")
    args = ap.parse_args(argv)
    byte_compile()
    with workdir(args.workdir, "bench-queues-") as work:
        return run(args, work)


def run(args, work: Path) -> int:
    flat = Path(args.config) if args.config else make_trace(work, args.nodes, args.jobs, args.tasks, args.seed)
    tree = tree_config(flat, flat.parent)
    here = str(Path(__file__).resolve().parents[2])
    variants = {"flat": (flat, here, "tsf"), "tree": (tree, here, "tsf")}
    if not args.no_yarn:
        variants.update({"yarn-fair": (tree, here, "yarn-fair"), "yarn-capacity": (tree, here, "yarn-capacity")})
    if not args.no_preempt:
        variants["preempt"] = (preempt_config(tree, flat.parent), here, "tsf")
    if args.main is not None:
        variants["main"] = (flat, args.main or None, "tsf")
    rounds: list[dict[str, float]] = []
    cpus: list[dict[str, float]] = []
    for _ in range(args.runs):
        times = {name: timed(config, work / "runs" / name, pythonpath, policy)
                 for name, (config, pythonpath, policy) in variants.items()}
        rounds.append({name: wall for name, (wall, _) in times.items()})
        cpus.append({name: cpu for name, (_, cpu) in times.items()})
    print(f"{args.runs} rounds of `rayrm simulate CONFIG --policy P`, each variant once a round "
          "(P: tsf but for the yarn-* rows)")
    print(f"{'variant':<13} {'least s':>8} {'median s':>9}   every round's")
    for name in variants:
        walls = [r[name] for r in rounds]
        print(f"{name:<13} {min(walls):8.2f} {statistics.median(walls):9.2f}   "
              + " ".join(f"{w:.2f}" for w in walls))

    def ratio(a: str, b: str, goal: float | None = None) -> bool:
        paired = statistics.median(r[a] / r[b] for r in rounds)
        least = min(r[a] for r in rounds) / min(r[b] for r in rounds)
        cpu = statistics.median(c[a] / c[b] for c in cpus)
        print(f"{a} / {b} = {paired:.3f} median of the rounds' ratios; {least:.3f} the least walls'; "
              f"{cpu:.3f} in CPU seconds" + (f" (goal <= {goal}, on the median)" if goal else ""))
        return goal is None or paired <= goal

    ok = ratio("tree", "flat", 1.3)
    for name in ("yarn-fair", "yarn-capacity"):
        if name in variants:
            ratio(name, "tree")
    if "preempt" in variants:
        ok &= ratio("preempt", "flat", 1.5)
    if "main" in variants:
        ok &= ratio("flat", "main", 1.03)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
