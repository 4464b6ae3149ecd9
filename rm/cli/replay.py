"""``rayrm replay [CONFIG]``: replay a trace on Ray (see ``rayrm.rm.runtime.driver``).

With no CONFIG it replays the bundled TSF micro-benchmark (configs/paper-micro.yaml,
whose time scale 0.05 makes it about 25 wall seconds).
With no ``--address`` it starts a local Ray; ``--address ADDR`` (or ``auto``) joins
a cluster started with ``ray start``.  Prints the jobs' completion times and the
scheduling latency; the run directory goes to ``--out``.  ``--fault SPEC`` (repeatable,
besides the config's ``faults:``) injects failures; ``rm/core/faults.py`` lists the kinds.
At scale the console shows at most 20 job rows (with ``--twin`` the worst ratios); the
rest is in jobs.csv.  ``--until T`` stops at trace time T and writes what ran; so do
Ctrl-C and SIGTERM (exit status 130 / 143).
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

DEFAULT_CONFIG = "paper-micro.yaml"


def bundled_config(name: str = DEFAULT_CONFIG) -> Path:
    """``configs/<name>`` as installed: pyproject.toml ships ``configs/`` as the package
    ``rayrm.configs``, so this finds it in a wheel or ``pip install .`` as in ``pip install -e .``."""
    return Path(resources.files("rayrm.configs") / name)


def add_arguments(parser) -> None:
    parser.add_argument("config", nargs="?", metavar="CONFIG",
                        help="experiment config (default: the bundled configs/paper-micro.yaml)")
    parser.add_argument("--policy", help="policy: a name, path/to/file.py:Class or package.module:Class "
                                         "(shipped to the Ray workers), or ray-native (default: the config's)")
    parser.add_argument("--time-scale", type=float, metavar="X",
                        help="wall seconds per trace second (default: the config's run.time_scale)")
    parser.add_argument("--address", metavar="ADDR",
                        help="join the Ray cluster at ADDR ('auto': the one `ray start` runs here); "
                             "default: start a local Ray")
    parser.add_argument("--executor", choices=("auto", "task", "actor"), default="auto",
                        help="containers as Ray tasks or as async actor tasks (default: auto)")
    parser.add_argument("--payload", choices=("sleep", "cpu"),
                        help="what a container does for its duration (default: the config's, sleep)")
    parser.add_argument("--seed", type=int, help="seed for task durations (default: the config's)")
    parser.add_argument("--twin", action="store_true",
                        help="also simulate the same trace and seed; report completion-time ratios, "
                             "and the range the simulator itself gives under this replay's launch latency")
    parser.add_argument("--fault", action="append", default=[], metavar="SPEC",
                        help="inject a fault at trace time T (repeatable): kill-nm:NODE@T, kill-nm-host:I@T, "
                             "kill-am:APP@T, kill-am-host:I@T, kill-rm@T, kill-ray-node:I@T, stall-rm:SECONDS@T, "
                             "partition-nm-host:I@T+D, partition-am-host:I@T+D, slow-nm-host:I@T+D:MS, "
                             "slow-am-host:I@T+D:MS, drop:P@T+D; instead of T, EVENT[+S]: S trace seconds "
                             "after the first preempt_warned, node_lost, am_expired or rm_recovered "
                             "(see rm/core/faults.py)")
    parser.add_argument("--chaos", metavar="SEED[:RATE]",
                        help="add a seeded nemesis's schedule of faults of every kind, about RATE per trace "
                             "hour (default: one per 300 trace s, at least 3); printed at start and written to "
                             "summary.json as --fault specs (see rm/core/chaos.py)")
    parser.add_argument("--until", type=float, metavar="T",
                        help="stop at trace time T and write what ran (jobs not done are 'unfinished')")
    parser.add_argument("--am-hosts", type=int, metavar="N",
                        help="ApplicationMaster host actors, dealt over the Ray nodes with CPUs (default: "
                             "the config's run.am_hosts, else one per such node)")
    parser.add_argument("--out", metavar="DIR", help="run directory (default: runs/<config>-<policy>-ray)")
    parser.add_argument("--keep-rm-state", action="store_true",
                        help="keep every snapshot and journal of the RM in DIR/rm-state, for "
                             "'rayrm check --restores' (default: removed after a complete run)")
    parser.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    add_ui_arguments(parser, "while the replay runs; 0: no UI")


def add_ui_arguments(parser, what: str) -> None:
    """``--ui-port`` and ``--ui-host`` (the web UI and YARN's REST API, docs/ui.md)."""
    parser.add_argument("--ui-port", type=int, default=8088, metavar="PORT",
                        help=f"serve the web UI and YARN's REST API on PORT, or the next free one ({what}; "
                             "default 8088)")
    parser.add_argument("--ui-host", default="127.0.0.1", metavar="HOST",
                        help="address to bind (default 127.0.0.1); any other needs the cluster's auth token "
                             "(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)")


def ui_settings(args, allow_off: bool = True):
    """The ``UISettings`` the flags ask for, or None (``--ui-port 0``)."""
    from rayrm.rm.core.errors import InputError  # noqa: PLC0415
    from rayrm.rm.ui.auth import token_for  # noqa: PLC0415
    from rayrm.rm.ui.server import UISettings  # noqa: PLC0415

    if not 0 <= args.ui_port <= 65535:
        raise InputError(f"--ui-port must be a port number (0-65535), got {args.ui_port}")
    if args.ui_port == 0 and allow_off:
        return None
    return UISettings(args.ui_host, args.ui_port, token_for(args.ui_host))


def run(args) -> int:
    from rayrm.rm.core.config import load_config  # noqa: PLC0415
    from rayrm.rm.core.errors import InputError  # noqa: PLC0415
    from rayrm.rm.core.policies.plugins import policy_slug  # noqa: PLC0415
    from rayrm.rm.core.policies import make_policy  # noqa: PLC0415
    from rayrm.rm.core.queues.scheduler import check_queues  # noqa: PLC0415
    from rayrm.rm.runtime.driver import replay  # noqa: PLC0415
    from rayrm.rm.runtime.supervisor import STUCK  # noqa: PLC0415

    if args.config:
        path = Path(args.config)
    else:
        try:
            path = bundled_config()
        except ModuleNotFoundError:   # an editable install made before configs/ became rayrm.configs
            raise InputError("no CONFIG given and the bundled configs (package rayrm.configs) are not "
                             "installed; reinstall rayrm") from None
    cfg = load_config(path)
    policy = args.policy or cfg.policy
    if policy != "ray-native":
        make_policy(policy)        # a bad name or plugin is an error before Ray starts
        check_queues(policy, cfg.queues, file=path)
    ui = ui_settings(args) if policy != "ray-native" else None
    out = args.out or str(Path("runs") / f"{cfg.name}-{policy_slug(policy)}-ray")
    summary = replay(cfg, policy=policy, out=out, time_scale=args.time_scale, address=args.address,
                     executor=args.executor, payload=args.payload, twin=args.twin, seed=args.seed,
                     progress=False if args.no_progress else None, faults=args.fault, until=args.until,
                     am_hosts=args.am_hosts, ui=ui, chaos=args.chaos,
                     keep_state=args.keep_rm_state)
    print(format_summary(summary, out))
    if ui is not None:
        print(f"  explore it in the web UI: rayrm ui {out}")
    if summary.get("policy_error"):
        raise InputError(f"{summary['policy_error']} (the replay stopped; what ran: {out})")
    reason = summary.get("interrupt_reason", "")
    if reason.startswith(STUCK):
        print(f"rayrm replay: {reason}; the run directory {out} has what ran", file=sys.stderr)
        return 1
    return 130 if reason.startswith("SIGINT") else 143 if reason.startswith("SIGTERM") else 0


#: at most this many job rows on the console; the rest is in jobs.csv
MAX_JOB_ROWS = 20


def format_summary(summary: dict, out: str) -> str:
    """A few lines: policy, executor, makespan, at most ``MAX_JOB_ROWS`` jobs (with a twin,
    the worst ratios to the jittered simulator's median), latency, pace, twin ratios."""
    import csv  # noqa: PLC0415
    lines = [f"replay of {summary.get('name')} under {summary.get('policy')}: "
             f"makespan {summary.get('makespan', 0):.1f}s (trace), wall {summary.get('wall_seconds')}s, "
             f"time scale {summary.get('time_scale')}, executor {summary.get('executor', '-')}"]
    if summary.get("interrupted"):
        lines.append(f"  INTERRUPTED ({summary.get('interrupt_reason')}): jobs not done are marked unfinished")
    jobs_csv = Path(out) / "jobs.csv"
    twin = summary.get("twin") or {}
    ratios = twin.get("completion_time_ratio", {})
    spread = twin.get("spread") or {}
    ranges, to_median = spread.get("ratio_range", {}), spread.get("ratio_to_median", {})
    if jobs_csv.exists():
        with open(jobs_csv, newline="") as fh:
            rows = list(csv.DictReader(fh))
        if len(rows) > MAX_JOB_ROWS:
            worst = to_median or ratios
            rows.sort(key=lambda r: -abs(worst.get(r["app"], 1.0) - 1.0))
            what = "worst ratios to the jittered simulator's median" if to_median else \
                "worst ratios to the simulator" if ratios else "first"
            lines.append(f"  {len(rows)} jobs; the {MAX_JOB_ROWS} {what} (all in {jobs_csv}):")
            rows = rows[:MAX_JOB_ROWS]
        for row in rows:
            ct = row.get("completion_time") or "-"
            extra = f"  vs simulator x{ratios[row['app']]:.3f}" if row["app"] in ratios else ""
            if row["app"] in ranges:
                low, high = ranges[row["app"]]
                extra += f" (jittered simulator x{low:.3f}-x{high:.3f}"
                extra += f", x{to_median[row['app']]:.3f} its median)" if row["app"] in to_median else ")"
            lines.append(f"  {row['app']:<12} {row['status']:<9} tasks {row['num_tasks']:>6}  "
                         f"completion {ct:>10}{extra}")
    if twin.get("makespan_ratio") is not None:
        line = f"  makespan vs simulator x{twin['makespan_ratio']:.4f}"
        if to_median:
            within = twin.get("within_median", {})
            line += (f"; {within.get('fraction', 0):.1%} of jobs within max(5%, 2 heartbeats) of the "
                     f"jittered simulator's median" if within else "")
        lines.append(line)
    pace = summary.get("pace") or {}
    if pace:
        lag = pace.get("lag_wall_s", {})
        verdict = "kept pace" if pace.get("kept_pace") else \
            f"FELL BEHIND (try --time-scale {pace.get('suggested_time_scale')})"
        lines.append(f"  pace: {verdict}; lag p50 {lag.get('p50', 0):.3f}s p99 {lag.get('p99', 0):.3f}s "
                     f"max {lag.get('max', 0):.3f}s wall; behind {pace.get('behind_fraction', 0):.1%} of the run")
    lat = (summary.get("scheduling_latency") or {}).get("allocation_to_running_ms") or {}
    if lat:
        lines.append(f"  allocation-to-running latency: p50 {lat['p50']} ms, p99 {lat['p99']} ms")
    tasks = summary.get("tasks", {})
    lines.append(f"  tasks: {tasks.get('finished', 0)} finished, {tasks.get('lost', 0)} lost, "
                 f"{tasks.get('killed', 0)} killed, {summary.get('tasks_finished_twice', 0)} finished twice")
    faults = summary.get("faults")
    if faults:
        lines.append(f"  faults: {', '.join(faults['injected'])}; RM restarts {faults['rm_restarts']}, "
                     f"NM host restarts {faults['nm_host_restarts']}, AM crashes {faults['am_crashes']} "
                     f"(recovery: rayrm check --recovery {out})")
        if faults.get("not_triggered"):
            lines.append(f"  not injected, their event never came: {', '.join(faults['not_triggered'])}")
    lines.append(f"  run directory: {out}")
    return "\n".join(lines)
