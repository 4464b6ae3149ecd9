"""``rayrm sensitivity CONFIG [--policy P] [--seed N] [--jitter X] [--runs N] [--out FILE]``.

Simulates the trace once as given and ``--runs`` more times, each simulation a Ray task
(``rayrm.rm.runtime.experiments``; ``--workers``, ``--address`` as for ``rayrm compare``), with each task starting
U(0, X) trace seconds after its allocation (``rayrm.rm.sim.sensitivity``), and prints each job's
completion time in the exact run beside the min / median / max of the jittered runs:
how far a replay on Ray, whose containers start milliseconds late, can differ from the
simulator without anything being wrong.
"""

from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("config", metavar="CONFIG", help="experiment config (YAML)")
    parser.add_argument("--policy", help="policy: a name, path/to/file.py:Class or package.module:Class "
                                         "(default: the config's)")
    parser.add_argument("--seed", type=int, help="seed for task durations (default: the config's run.seed)")
    parser.add_argument("--jitter", type=float, default=0.1, metavar="X",
                        help="largest launch delay in trace seconds (default 0.1: 5 ms of wall time "
                             "at time scale 0.05, a replay's typical allocation-to-running latency)")
    parser.add_argument("--runs", type=int, default=20, metavar="N", help="jittered runs (default 20)")
    parser.add_argument("--out", metavar="FILE", help="also write the whole table as CSV")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="most simulations at once, each a Ray task (default: the cores of the machine or cluster)")
    parser.add_argument("--address", metavar="ADDR",
                        help="Ray cluster to join (HOST:PORT or auto; default: start a local Ray)")


def run(args) -> int:
    from rayrm.rm.core.config import load_config  # noqa: PLC0415
    from rayrm.rm.core.errors import InputError  # noqa: PLC0415
    from rayrm.rm.core.policies import make_policy  # noqa: PLC0415
    from rayrm.rm.runtime.experiments import Runner  # noqa: PLC0415
    from rayrm.rm.sim.sensitivity import completion_spread, format_spread  # noqa: PLC0415

    if not args.jitter > 0:
        raise InputError(f"must be positive, got {args.jitter}", field="--jitter")
    if args.runs < 1:
        raise InputError(f"must be at least 1, got {args.runs}", field="--runs")
    cfg = load_config(args.config)
    policy = args.policy or cfg.policy
    make_policy(policy)
    seed = cfg.seed if args.seed is None else args.seed
    with Runner(workers=args.workers, address=args.address) as runner:
        table = completion_spread(cfg, policy, seed, jitter=args.jitter, runs=args.runs,
                                  run_all=lambda fn, arglist: runner.run_all(fn, arglist, label="sensitivity"))
    print(format_spread(table, f"{cfg.name} under {policy} (seed {seed}): job completion time (s), "
                               f"exact and over {args.runs} runs with launch jitter U(0, {args.jitter:g} s)"))
    if args.out:
        table.rename_axis("app").to_csv(args.out, float_format="%.6f")
        print(f"  table: {args.out}")
    return 0
