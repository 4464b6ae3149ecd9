"""``rayrm compare CONFIG --policies tsf,drf,... [--mode sim|ray] [--out DIR]``.

Runs each policy on the same trace and seed — simulated in up to two worker
processes, or replayed on Ray one after another — into ``DIR/<policy>/`` and
prints and writes (``DIR/comparison.csv``) the comparison of ``rayrm.rm.runs.compare``.
"""

from __future__ import annotations

from pathlib import Path


def add_arguments(parser) -> None:
    parser.add_argument("config", metavar="CONFIG", help="experiment config (YAML)")
    parser.add_argument("--policies", required=True, metavar="P,P,...",
                        help="comma-separated policy names, e.g. tsf,drf,cdrf,cmmf-cpu,cmmf-mem,fifo")
    parser.add_argument("--mode", choices=("sim", "ray"), default="sim",
                        help="simulate (default) or replay on Ray")
    parser.add_argument("--seed", type=int, help="seed for task durations (default: the config's)")
    parser.add_argument("--out", metavar="DIR", help="output directory (default: runs/<config>-compare)")
    parser.add_argument("--time-scale", type=float, metavar="X", help="--mode ray: wall seconds per trace second")
    parser.add_argument("--address", metavar="ADDR", help="--mode ray: Ray cluster to join")


def run(args) -> int:
    from rayrm.rm.runs.compare import compare  # noqa: PLC0415
    from rayrm.rm.core.config import load_config  # noqa: PLC0415
    from rayrm.rm.core.errors import InputError  # noqa: PLC0415
    from rayrm.rm.core.policies import make_policy  # noqa: PLC0415

    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies:
        raise InputError("needs at least one policy name", field="--policies")
    if len(set(policies)) != len(policies):
        raise InputError("names a policy twice", field="--policies")
    for p in policies:
        if p == "ray-native":
            if args.mode != "ray":
                raise InputError("ray-native runs on Ray: add --mode ray", field="--policies")
        else:
            make_policy(p)
    cfg = load_config(args.config)          # fail fast, in this process, on a bad config
    out = args.out or str(Path("runs") / f"{cfg.name}-compare")
    replay_options = {k: v for k, v in (("time_scale", args.time_scale), ("address", args.address))
                      if v is not None}
    print(f"comparing {', '.join(policies)} on {cfg.name} ({args.mode}) -> {out}")
    compare(args.config, policies, out, mode=args.mode, seed=args.seed, replay_options=replay_options)
    return 0
