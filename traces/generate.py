"""A paper-scale synthetic Google-like workload (tsf-paper §VI-B).

``rayrm trace generate google --nodes N --jobs J --tasks T --seed S -o CONFIG`` writes
CONFIG (YAML) and its job table ``<stem>.jobs.csv`` beside it, and prints the
statistics it achieved next to the papers' targets.  From Python (benchmarks)::

    from rayrm.traces.generate import generate_google, google_experiment
    doc, jobs, stats = generate_google(1000, 4500, 180_000, seed=1)   # nothing written
    cfg = google_experiment(1000, 4500, 180_000, seed=1)               # an ExperimentConfig

``--unconstrained``, ``--rarity``, ``--task-scale`` and ``--heterogeneity`` move the
workload towards the regimes where policies part (``rayrm.traces.google_model``, "Knobs").

The model (machine mix of drfh-paper Table I, 21 attributes over 4 classes,
constraints after tsf-paper Fig. 8a and choosy-paper §7.1, job sizes after tsf-paper
Fig. 8b, Pareto α = 1.9 durations after choosy-paper §6.2) is documented in
``rayrm.traces.google_model``; building and measuring the workload is ``rayrm.traces.google_workload``.
"""

from __future__ import annotations

from pathlib import Path

from rayrm.traces.google_model import P_NONE
from rayrm.traces.google_workload import TARGETS, format_stats, generate_google, google_experiment, write_google

__all__ = ["generate_google", "google_experiment", "write_google", "format_stats", "TARGETS",
           "add_arguments", "run"]


# ----- command line (called by rm/cli/trace.py) ------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("kind", choices=["google"], help="workload family (google: tsf-paper §VI-B)")
    parser.add_argument("--nodes", type=int, default=1000, help="machines (default 1000)")
    parser.add_argument("--jobs", type=int, default=4500, help="jobs (default 4500)")
    parser.add_argument("--tasks", type=int, default=180_000, help="total tasks (default 180000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--load", type=float, default=1.0,
                        help="offered CPU work / (cluster cores x span) (default 1.0)")
    parser.add_argument("--span", type=float, default=3600.0, help="arrival window in seconds (default 3600)")
    parser.add_argument("--max-duration", type=float, metavar="S",
                        help="truncate task durations at S seconds (default: none; the Pareto tail "
                             "otherwise gives a few tasks of tens of hours)")
    parser.add_argument("--unconstrained", type=float, default=P_NONE, metavar="P",
                        help=f"share of jobs with no restricting constraint (default {P_NONE:g})")
    parser.add_argument("--rarity", type=float, default=1.0, metavar="R",
                        help="attribute k is on q_k^R of machines: above 1, constrained jobs fit fewer "
                             "machines (default 1)")
    parser.add_argument("--task-scale", type=float, default=1.0, metavar="S",
                        help="every task's CPU and memory times S; durations rescaled to keep --load (default 1)")
    parser.add_argument("--heterogeneity", type=float, default=1.0, metavar="H",
                        help="machine shapes: 1 drfh-paper Table I, 0 all 8-core/32 GiB servers (default 1)")
    parser.add_argument("-o", "--output", required=True, metavar="CONFIG", help="YAML config to write")


def run(args) -> int:
    stats = write_google(args.output, args.nodes, args.jobs, args.tasks, args.seed,
                         load=args.load, span=args.span, max_duration=args.max_duration,
                         unconstrained=args.unconstrained, rarity=args.rarity, task_scale=args.task_scale,
                         heterogeneity=args.heterogeneity)
    csv_name = Path(args.output).with_name(Path(args.output).stem + ".jobs.csv")
    print(f"wrote {args.output} ({stats['nodes']} nodes) and {csv_name} "
          f"({stats['jobs']} jobs, {stats['tasks']} tasks)")
    print(format_stats(stats))
    return 0
