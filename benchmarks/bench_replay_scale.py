"""The Ray replay at the paper's scale, at several time scales.

Generates the paper-scale Google-like trace (1,000 nodes, 4,500 jobs, 180,000 tasks,
seed 7, task durations truncated at ``--max-duration`` 7,200 s) unless ``--config``
names one, replays it under TSF with ``--twin`` at each ``--time-scales`` (default
0.05, 0.02, 0.01, 0.005: the last two show the edge on a small machine) and prints,
per time scale:

* wall seconds of the replay;
* the pace verdict (``kept_pace``) and the lag p99 (wall seconds, and trace seconds);
* the twin's makespan ratio (replay / simulator);
* the fraction of jobs within max(5%, 2 heartbeats) of the jittered simulator's median;
* the RM actor's CPU seconds per 1,000 allocations and its peak RSS;
* tasks finished (of the trace's) and apps failed.

Each replay runs under ``flock /tmp/rayrm-heavy.lock`` when started so::

    flock /tmp/rayrm-heavy.lock timeout 7200 python benchmarks/bench_replay_scale.py [--out DIR]
    python benchmarks/bench_replay_scale.py --run-dir RUN_DIR...     # rows of existing replays
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rayrm.rm.core.config import load_config
from rayrm.rm.runtime.driver import replay

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sim import workdir  # noqa: E402

COLUMNS = ("time scale", "wall s", "kept pace", "lag p99 s (trace s)", "makespan / twin",
           "jobs within", "RM CPU s / 1k alloc", "RM RSS MB", "tasks finished", "apps failed")


def trace(out: Path, max_duration: float) -> Path:
    """The paper-scale trace (``rayrm trace generate google ... --seed 7``) in ``out``."""
    from rayrm.traces.generate import write_google  # noqa: PLC0415
    path = out / "g.yaml"
    if not path.exists():
        write_google(path, 1000, 4500, 180_000, 7, max_duration=max_duration)
    return path


def row(scale: float, summary: dict, wall: float) -> tuple:
    pace, rm, twin = summary.get("pace", {}), summary.get("rm", {}), summary.get("twin", {})
    lag = pace.get("lag_wall_s", {}).get("p99", float("nan"))
    within = (twin.get("within_median") or {}).get("fraction")
    ratio = twin.get("makespan_ratio")
    jobs = summary.get("jobs", {})
    return (f"{scale:g}", f"{wall:.0f}", str(pace.get("kept_pace")), f"{lag:.3f} ({lag / scale:.1f})",
            "-" if ratio is None else f"{ratio:.4f}",
            "-" if within is None else f"{within:.1%}", f"{rm.get('cpu_seconds_per_1000_allocations', 0):.2f}",
            f"{rm.get('peak_rss_mb', 0):.0f}", f"{summary.get('tasks', {}).get('finished', 0)}",
            f"{jobs.get('failed', 0)}")


def table(rows: list[tuple]) -> str:
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(COLUMNS), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="a trace to replay instead of the generated paper-scale one")
    ap.add_argument("--time-scales", default="0.05,0.02,0.01,0.005")
    ap.add_argument("--max-duration", type=float, default=7200.0)
    ap.add_argument("--policy", default="tsf")
    ap.add_argument("--no-twin", action="store_true", help="skip the simulator twin (faster)")
    ap.add_argument("--out", help="keep the trace and run directories here (default: a temporary "
                    "directory, removed)")
    ap.add_argument("--run-dir", nargs="+", help="only print the rows of these existing replay run directories")
    args = ap.parse_args()
    if args.run_dir:
        rows = []
        for d in args.run_dir:
            summary = json.loads((Path(d) / "summary.json").read_text())
            rows.append(row(summary["time_scale"], summary, summary.get("wall_seconds") or 0.0))
        print(table(rows))
        return
    with workdir(args.out, "rayrm-scale-") as out:
        run(args, out)


def run(args, out: Path) -> None:
    """Replay at each time scale into ``out``, printing each row as it comes, then all."""
    cfg = load_config(args.config or trace(out, args.max_duration))
    rows = []
    for scale in (float(x) for x in args.time_scales.split(",")):
        run_dir = out / f"tsf-{scale:g}"
        t0 = time.time()
        summary = replay(cfg, policy=args.policy, out=run_dir, time_scale=scale, twin=not args.no_twin)
        rows.append(row(scale, summary, summary.get("wall_seconds") or time.time() - t0))
        print(table(rows[-1:]), flush=True)
        (run_dir / "bench_row.json").write_text(json.dumps(dict(zip(COLUMNS, rows[-1]))) + "\n")
    print()
    print(table(rows))


if __name__ == "__main__":
    main()
