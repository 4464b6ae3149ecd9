"""``rayrm compare CONFIG --policies tsf,drf,... [--mode sim|ray] [--out DIR]``.

Runs each policy on the same trace and seed — simulated in up to two worker
processes, or replayed on Ray one after another — into ``DIR/<policy>/`` and
prints and writes (``DIR/comparison.csv``) the comparison of ``rayrm.rm.runs.compare``,
which reads the run directories alone.  Running is here, in the CLI layer, because
it needs the simulator and the Ray replay; ``rayrm.rm.runs`` must import neither.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from rayrm.rm.core.errors import InputError

MAX_WORKERS = 2


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
    from rayrm.rm.core.config import load_config  # noqa: PLC0415
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


def _simulate_one(config_path: str, policy: str, seed: int | None, out: str) -> dict:
    """Worker: load the config and simulate one policy into ``out`` (a fresh process each)."""
    from rayrm.rm.core.config import load_config  # noqa: PLC0415
    from rayrm.rm.sim.engine import simulate  # noqa: PLC0415
    return simulate(load_config(config_path), policy=policy, seed=seed, out=out, progress=False)


def run_policies(config_path: str | Path, policies: list[str], out: Path, *, mode: str = "sim",
                 seed: int | None = None, workers: int = MAX_WORKERS, replay_options: dict | None = None,
                 log=print) -> dict[str, Path]:
    """Run every policy into ``out/<policy>``; returns policy -> run directory."""
    dirs = {p: out / p for p in policies}
    if mode == "sim":
        workers = max(1, min(workers, MAX_WORKERS, len(policies), os.cpu_count() or 1))
        if workers == 1:
            for p in policies:
                _report(log, p, _simulate_one(str(config_path), p, seed, str(dirs[p])))
            return dirs
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(_simulate_one, str(config_path), p, seed, str(dirs[p])): p
                       for p in policies}
            for fut in as_completed(futures):
                _report(log, futures[fut], fut.result())
        return dirs
    if mode == "ray":
        try:
            from rayrm.rm.runtime.driver import replay  # noqa: PLC0415
        except ImportError as e:
            raise InputError(f"--mode ray needs the Ray replay (rayrm.rm.runtime.driver), which cannot be imported: {e}") from None
        from rayrm.rm.core.config import load_config  # noqa: PLC0415
        cfg = load_config(config_path)
        for p in policies:
            opts = dict(replay_options or {})
            if seed is not None:
                opts["seed"] = seed
            _report(log, p, replay(cfg, policy=p, out=dirs[p], **opts))
        return dirs
    raise InputError(f"unknown mode '{mode}' (choose sim or ray)", field="--mode")


def _report(log, policy: str, summary: dict) -> None:
    jobs = summary.get("jobs", {})
    log(f"  {policy:<10} makespan {summary.get('makespan', 0):10.1f}s  "
        f"jobs finished {jobs.get('finished', 0)}, rejected {jobs.get('rejected', 0)}  "
        f"(wall {summary.get('wall_seconds')}s)")


def compare(config_path: str | Path, policies: list[str], out: str | Path, *, mode: str = "sim",
            seed: int | None = None, replay_options: dict | None = None, log=print):
    """Run, tabulate and write ``comparison.csv`` and ``job_speedup_by_size.csv``; returns the table."""
    from rayrm.rm.runs.compare import write_comparison  # noqa: PLC0415 (pandas only when used)

    out = Path(out)
    started = time.perf_counter()
    dirs = run_policies(config_path, policies, out, mode=mode, seed=seed,
                        replay_options=replay_options, log=log)
    table = write_comparison(dirs, out, log=log)
    log(f"wrote {out}/comparison.csv and {len(dirs)} run directories "
        f"({time.perf_counter() - started:.1f}s)")
    sys.stdout.flush()
    return table
