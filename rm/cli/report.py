"""``rayrm report RUN_DIR...``: PNG plots and an HTML page with the tables (see ``rayrm.rm.runs.report``).

Give several runs of different policies on the same trace, a ``tsf`` run among them,
to get the per-job (tsf-paper Fig. 10) and per-task (Fig. 11b) speedups of TSF.
"""

from __future__ import annotations

from rayrm.rm.core.errors import InputError


def _window(text: str) -> tuple[float, float]:
    try:
        t0, t1 = (float(x) for x in text.split(","))
    except ValueError:
        raise InputError(f"write T0,T1 (e.g. 40,70), got {text!r}", field="--window") from None
    if not t1 > t0:
        raise InputError(f"needs T1 > T0, got {text!r}", field="--window")
    return t0, t1


def add_arguments(parser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (simulate/replay --out)")
    parser.add_argument("--out", help="where to write the report (default: <first RUN_DIR>/report)")
    parser.add_argument("--window", metavar="T0,T1",
                        help="time window of the time-averaged share table (default: the whole run)")
    parser.add_argument("--tolerance", type=float, metavar="S",
                        help="trace seconds within which two delays or completion times count as equal "
                             "(default: 0 between simulations; a replay's p99 allocation-to-running "
                             "latency or one heartbeat, whichever is larger)")
    parser.add_argument("--max-apps", type=int, default=8,
                        help="apps drawn in each share timeline, largest peak task share first (default 8)")


def run(args) -> int:
    from rayrm.rm.runs.report import write_report  # noqa: PLC0415 (pandas and matplotlib only when used)

    window = _window(args.window) if args.window else None
    if args.tolerance is not None and not args.tolerance >= 0:
        raise InputError(f"must be >= 0 seconds, got {args.tolerance}", field="--tolerance")
    out, rep = write_report(args.runs, args.out, window, max_apps=args.max_apps, tolerance=args.tolerance)
    for r in rep.tables["runs"]:
        q, c = r["job_queueing_delay"], r["task_queueing_delay"]
        print(f"{r['run']:<16} jobs {r['finished']}/{r['jobs']} finished, makespan {r['makespan']:.1f} s, "
              f"mean job queueing delay {q.get('mean', float('nan')):.2f} s, "
              f"mean task queueing delay {c.get('mean', float('nan')):.2f} s")
    if "task_speedup" in rep.tables:
        print(f"comparisons against TSF: {rep.tolerance.header()}")
    for label, v in rep.tables.get("task_speedup", {}).items():
        print(f"TSF vs {label}: shortens the queueing delay of {v['shortened']:.1%} of tasks, "
              f"lengthens {v['lengthened']:.1%}")
    for policy, rows in rep.sim_vs_ray.items():
        flagged = [f"{r['label']} ({r['differs']})" for r in rows if r["differs"]]
        print(f"TSF vs {policy}, simulator against Ray: "
              + (f"differs on {', '.join(flagged)}" if flagged else "every conclusion agrees"))
    print(f"wrote {out / 'index.html'}")
    return 0
