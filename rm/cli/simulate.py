"""``rayrm simulate CONFIG [--policy P] [--seed N] [--launch-jitter X] [--fault SPEC]... [--out DIR]
[--format auto|csv|parquet]``: the discrete-event simulator.

Replays the config's trace under one policy on a virtual clock (``rayrm.rm.sim.engine``), writes
the run directory (default ``runs/<config name>-<policy>-sim``) and prints a short
summary: makespan, jobs finished and rejected, delay percentiles, wall time.  The run
directory is written as the run goes; its tasks, shares and events are CSV, or Parquet
with ``--format parquet`` (by default above a million tasks; ``rayrm.rm.runs.schema``).
On a stderr that is not a terminal, a plain progress line comes every ten seconds.
``--fault SPEC`` (repeatable, besides the config's ``faults:``) simulates failures as
``rayrm replay`` injects them (``rayrm.rm.sim.faults``); a fault on Ray processes or nodes,
which a simulation does not have, or on the wall time and delivery of calls, which it does
not make, is recorded and reported on stderr, not simulated.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path


def add_arguments(parser) -> None:
    parser.add_argument("config", metavar="CONFIG", help="experiment config (YAML)")
    parser.add_argument("--policy", help="policy: a name, path/to/file.py:Class or package.module:Class, "
                                         "options as :KEY=VALUE (default: the config's; see `rayrm policies`)")
    parser.add_argument("--seed", type=int, help="seed for task durations (default: the config's run.seed)")
    parser.add_argument("--out", metavar="DIR", help="run directory (default: runs/<config>-<policy>-sim)")
    parser.add_argument("--launch-jitter", type=float, default=0.0, metavar="X",
                        help="each task starts U(0, X) trace seconds after its allocation, as a real "
                             "container launch does (default 0: instantly, the paper's model)")
    parser.add_argument("--jitter-seed", type=int, default=0, metavar="K",
                        help="seed of the launch-jitter draws (the durations stay the --seed's)")
    parser.add_argument("--fault", action="append", default=[], metavar="SPEC",
                        help="simulate a fault at trace time T (repeatable): kill-nm:NODE@T, kill-am:APP@T, "
                             "kill-am-host:I@T, kill-rm@T, partition-nm-host:I@T+D, partition-am-host:I@T+D; "
                             "kill-nm-host, kill-ray-node, stall-rm, slow-nm-host, slow-am-host and drop are "
                             "recorded, not simulated; instead of T, EVENT[+S] as for replay "
                             "(see rm/sim/faults.py)")
    parser.add_argument("--am-hosts", type=int, metavar="N",
                        help="AM hosts the apps are dealt to, as the replay deals them (kill-am-host; "
                             "default: the config's run.am_hosts, 0 counting as 1: a local Ray's one node)")
    parser.add_argument("--nm-hosts", type=int, metavar="N",
                        help="NM hosts the nodes are dealt to, as the replay places them on N equal Ray nodes "
                             "(partition-nm-host; default: the config's run.nm_hosts, 0 counting as 1)")
    parser.add_argument("--format", choices=("auto", "csv", "parquet"), default="auto",
                        help="tasks, shares and events as CSV or Parquet (default auto: Parquet above "
                             "a million tasks)")
    parser.add_argument("--until", type=float, metavar="T",
                        help="stop at trace time T and write what ran, like replay --until (jobs not done "
                             "are 'unfinished'; rayrm check checks what ran)")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")


def run(args) -> int:
    from rayrm.rm.core.config import load_config  # noqa: PLC0415
    from rayrm.rm.core.errors import InputError  # noqa: PLC0415
    from rayrm.rm.core.policies.plugins import policy_slug  # noqa: PLC0415
    from rayrm.rm.core.policies import PolicyError, make_policy  # noqa: PLC0415
    from rayrm.rm.core.queues.scheduler import check_queues  # noqa: PLC0415
    from rayrm.rm.sim.engine import simulate  # noqa: PLC0415

    started = time.perf_counter()
    cfg = load_config(args.config)
    for flag, name in (("--am-hosts", "am_hosts"), ("--nm-hosts", "nm_hosts")):
        hosts = getattr(args, name)
        if hosts is not None:
            if hosts < 1:
                raise InputError(f"{flag} must be at least 1, got {hosts}")
            cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, **{name: hosts}))
    policy = args.policy or cfg.policy
    make_policy(policy)            # an unknown name is an InputError before any work
    check_queues(policy, cfg.queues, file=args.config)
    out = args.out or str(Path("runs") / f"{cfg.name}-{policy_slug(policy)}-sim")
    try:
        summary = simulate(cfg, policy=policy, seed=args.seed, out=out,
                           progress=False if args.no_progress else None,
                           launch_jitter=args.launch_jitter, jitter_seed=args.jitter_seed, faults=args.fault,
                           fmt=args.format, until=args.until)
    except PolicyError as e:            # the run stopped; its directory holds what ran
        raise PolicyError(e.plugin, e.method, f"{e.what} (what ran: {out})") from None
    for spec, reason in (summary.get("faults") or {}).get("not_simulated", {}).items():
        print(f"rayrm simulate: fault {spec} not simulated: {reason}", file=sys.stderr)
    print(format_summary(summary, out, total=time.perf_counter() - started))
    return 0


def format_summary(summary: dict, out: str | None = None, total: float | None = None) -> str:
    """Four lines: what ran, jobs, delays, and where the run directory went."""
    jobs = summary.get("jobs", {})
    tasks = summary.get("tasks", {})

    def pct(name: str) -> str:
        p = summary.get(name) or {}
        if not p:
            return "-"
        return f"p50 {p['p50']:.1f}s  p90 {p['p90']:.1f}s  p99 {p['p99']:.1f}s  max {p['max']:.1f}s"

    other = {k: v for k, v in jobs.items() if k not in ("finished", "rejected")}
    lines = [
        f"{summary.get('name')} under {summary.get('policy')} (seed {summary.get('seed')}): "
        f"makespan {summary.get('makespan', 0):.1f}s, simulated in {summary.get('wall_seconds')}s"
        + (f" ({total:.1f}s with the config and the run directory)" if total is not None else ""),
        f"  jobs: {jobs.get('finished', 0)} finished, {jobs.get('rejected', 0)} rejected"
        + "".join(f", {v} {k}" for k, v in other.items())
        + f"; tasks: {tasks.get('finished', 0)} finished, {tasks.get('lost', 0)} attempts lost",
        f"  job queueing delay   {pct('job_queueing_delay')}",
        f"  job completion time  {pct('job_completion_time')}",
        f"  task queueing delay  {pct('task_queueing_delay')}",
    ]
    faults = summary.get("faults")
    if faults and faults["simulated"]:
        lines.append(f"  faults: {', '.join(faults['simulated'])}; RM restarts {faults['rm_restarts']}, "
                     f"AM crashes {faults['am_crashes']}"
                     + (f" (recovery: rayrm check --recovery {out})" if out else ""))
    if faults and faults.get("not_triggered"):
        lines.append(f"  not injected, their event never came: {', '.join(faults['not_triggered'])}")
    if out:
        lines.append(f"  run directory: {out}")
    return "\n".join(lines)
