"""``rayrm compare CONFIG --policies tsf,drf,... [--mode sim|ray|both] [--seeds A-B] [--repeats K]``.

Runs each policy on the same trace and seed — each simulation one Ray task on a local
Ray or the cluster at ``--address``, at most ``--workers`` at once
(``rayrm.rm.runtime.experiments``), or replayed on Ray one after another — and prints and writes the
comparison of ``rayrm.rm.runs.compare``, which reads the run directories alone.
Running is here, in the CLI layer, because it needs the simulator and the Ray
replay; ``rayrm.rm.runs`` must import neither.

Where the run directories go (``DIR`` is ``--out``):

* one mode, one seed, one replay: ``DIR/<policy>/`` and ``DIR/comparison.csv``;
* ``--seeds A-B`` (every policy on each seed, tsf-paper §VI-B averages 50) or
  ``--repeats K`` (ray: K replays of each seed): ``DIR/seed<S>[-r<K>]/<policy>/``, a
  ``comparison.csv`` in each, and ``DIR/comparison_stats.csv`` (mean, 95% CI, range);
* ``--mode both``: the same under ``DIR/sim/`` and ``DIR/ray/``, and
  ``DIR/sim_vs_ray.csv``, each metric's simulator and Ray values side by side with
  the conclusions that differ flagged.

Differences within a tolerance count as equal (``rayrm.rm.runs.metrics.noise_tolerance``:
0 between exact simulations, else the largest replay's p99 allocation-to-running
latency or one heartbeat; ``--tolerance S`` overrides); every table says which.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rayrm.rm.core.errors import InputError
from rayrm.rm.runtime.experiments import parse_seeds

__all__ = ["add_arguments", "run", "parse_seeds", "plan", "study", "compare", "run_policies", "run_replicas"]


def add_arguments(parser) -> None:
    parser.add_argument("config", metavar="CONFIG", help="experiment config (YAML)")
    parser.add_argument("--policies", required=True, metavar="P,P,...",
                        help="comma-separated policies, e.g. tsf,drf,cdrf,fifo; a plugin as "
                             "path/to/file.py:Class or package.module:Class (see `rayrm policies`)")
    parser.add_argument("--mode", choices=("sim", "ray", "both"), default="sim",
                        help="simulate (default), replay on Ray, or both side by side")
    parser.add_argument("--seed", type=int, help="seed for task durations (default: the config's)")
    parser.add_argument("--seeds", metavar="A-B|S,S,...",
                        help="run every policy on each of these seeds (e.g. 1-50); means with 95%% CIs")
    parser.add_argument("--repeats", type=int, default=1, metavar="K",
                        help="ray: replay each seed K times; means and ranges show the replay noise")
    parser.add_argument("--tolerance", type=float, metavar="S",
                        help="trace seconds within which two delays or completion times count as equal "
                             "(default: 0 between simulations; a replay's p99 allocation-to-running "
                             "latency or one heartbeat, whichever is larger)")
    parser.add_argument("--out", metavar="DIR", help="output directory (default: runs/<config>-compare)")
    parser.add_argument("--time-scale", type=float, metavar="X", help="ray: wall seconds per trace second")
    parser.add_argument("--address", metavar="ADDR",
                        help="Ray cluster to join (HOST:PORT or auto; default: start a local Ray)")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="sim: most simulations at once (default: the cores of the machine or cluster)")


def run(args) -> int:
    from rayrm.rm.core.config import load_config  # noqa: PLC0415
    from rayrm.rm.core.queues.scheduler import check_queues  # noqa: PLC0415
    from rayrm.rm.core.policies import make_policy  # noqa: PLC0415

    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies:
        raise InputError("needs at least one policy name", field="--policies")
    if len(set(policies)) != len(policies):
        raise InputError("names a policy twice", field="--policies")
    for p in policies:
        if p == "ray-native":
            if args.mode != "ray":
                raise InputError("ray-native runs on Ray only: use --mode ray", field="--policies")
        else:
            make_policy(p)
    if args.repeats < 1:
        raise InputError(f"must be at least 1, got {args.repeats}", field="--repeats")
    if args.repeats > 1 and args.mode == "sim":
        raise InputError("a simulation gives the same run every time: repeat replays with --mode ray or both",
                         field="--repeats")
    if args.tolerance is not None and not args.tolerance >= 0:
        raise InputError(f"must be >= 0 seconds, got {args.tolerance}", field="--tolerance")
    if args.seeds is not None and args.seed is not None:
        raise InputError("give --seed or --seeds, not both", field="--seeds")
    seeds = parse_seeds(args.seeds) if args.seeds is not None else [args.seed]
    cfg = load_config(args.config)          # fail fast, in this process, on a bad config
    for p in policies:
        if p != "ray-native":
            check_queues(p, cfg.queues, file=args.config)
    out = args.out or str(Path("runs") / f"{cfg.name}-compare")
    replay_options = {k: v for k, v in (("time_scale", args.time_scale), ("address", args.address))
                      if v is not None}
    print(f"comparing {', '.join(policies)} on {cfg.name} ({args.mode}"
          + (f", {len(seeds)} seeds" if len(seeds) > 1 else "")
          + (f", {args.repeats} replays each" if args.repeats > 1 else "") + f") -> {out}")
    study(args.config, policies, out, modes=("sim", "ray") if args.mode == "both" else (args.mode,),
          seeds=seeds, repeats=args.repeats, tolerance=args.tolerance, replay_options=replay_options,
          workers=args.workers)
    return 0


def simulate_on_ray(config_path, jobs, label, *, workers: int | None = None, address: str | None = None,
                    log=print) -> None:
    """Each (policy, seed, run directory, replica) of ``jobs`` simulated as one Ray task
    (``rayrm.rm.runtime.experiments``); the run directories come back as bytes and are
    written here, on the launching machine.  The first failure stops the batch."""
    from rayrm.rm.core.config import load_config  # noqa: PLC0415
    from rayrm.rm.runtime.experiments import Progress, Runner, simulate_files, write_files  # noqa: PLC0415

    with Runner(workers=workers, address=address) as runner:
        cfg = runner.share(load_config(config_path))
        progress = Progress(len(jobs), "compare", stream=sys.stderr) if len(jobs) > 4 else None
        calls = ((k, simulate_files, (cfg, p, seed, "all")) for k, (p, seed, _, _) in enumerate(jobs))
        for outcome in runner.map(calls, tick=progress.tick if progress else None):
            p, _, d, where = jobs[outcome.key]
            if not outcome.ok:
                raise InputError(f"simulating {label(p, where)} failed: {outcome.error}")
            write_files(outcome.value.files, d)
            _report(log, label(p, where), outcome.value.summary)
            if progress is not None:
                progress.step(True)


def plan(out: Path, modes: tuple[str, ...], seeds: list[int | None], repeats: int = 1
         ) -> dict[str, list[tuple[Path, int | None]]]:
    """mode -> replicas (directory, seed): ``out`` itself for one mode, seed and replay,
    else ``out[/mode]/seed<S>[-r<K>]`` (see the module docstring)."""
    out = Path(out)
    layout = {}
    for mode in modes:
        root = out / mode if len(modes) > 1 else out
        k = repeats if mode == "ray" else 1
        if len(seeds) == 1 and k == 1:
            layout[mode] = [(root, seeds[0])]
            continue
        layout[mode] = [(root / (f"seed{s if s is not None else 'default'}" + (f"-r{r}" if k > 1 else "")), s)
                        for s in seeds for r in range(1, k + 1)]
    return layout


def run_replicas(config_path: str | Path, policies: list[str], replicas: list[tuple[Path, int | None]], *,
                 mode: str = "sim", workers: int | None = None, replay_options: dict | None = None,
                 log=print) -> list[tuple[Path, dict[str, Path]]]:
    """Run every policy in every replica into ``<replica>/<policy>``.

    Simulations run as Ray tasks, at most ``workers`` at once (``simulate_on_ray``);
    replays run one after another, since one replay already keeps the Ray cluster busy.  Returns (replica, policy -> run directory).
    """
    from rayrm.rm.core.policies.plugins import policy_slug  # noqa: PLC0415
    out = [(where, {p: where / policy_slug(p) for p in policies}) for where, _ in replicas]
    jobs = [(p, seed, dirs[p], where) for (where, seed), (_, dirs) in zip(replicas, out) for p in policies]
    label = (lambda p, where: p) if len(replicas) == 1 else (lambda p, where: f"{where.name}/{p}")
    if mode == "sim":
        simulate_on_ray(config_path, jobs, label, workers=workers, address=(replay_options or {}).get("address"),
                        log=log)
        return out
    if mode == "ray":
        try:
            from rayrm.rm.runtime.driver import replay  # noqa: PLC0415
        except ImportError as e:
            raise InputError(f"--mode ray needs the Ray replay (rayrm.rm.runtime.driver), which cannot be imported: {e}") from None
        from rayrm.rm.core.config import load_config  # noqa: PLC0415
        cfg = load_config(config_path)
        for p, seed, d, where in jobs:
            opts = dict(replay_options or {})
            if seed is not None:
                opts["seed"] = seed
            _report(log, label(p, where), replay(cfg, policy=p, out=d, **opts))
        return out
    raise InputError(f"unknown mode '{mode}' (choose sim, ray or both)", field="--mode")


def run_policies(config_path: str | Path, policies: list[str], out: Path, *, mode: str = "sim",
                 seed: int | None = None, workers: int | None = None, replay_options: dict | None = None,
                 log=print) -> dict[str, Path]:
    """Run every policy into ``out/<policy>``; returns policy -> run directory."""
    return run_replicas(config_path, policies, [(Path(out), seed)], mode=mode, workers=workers,
                        replay_options=replay_options, log=log)[0][1]


def _report(log, label: str, summary: dict) -> None:
    jobs = summary.get("jobs", {})
    log(f"  {label:<10} makespan {summary.get('makespan', 0):10.1f}s  "
        f"jobs finished {jobs.get('finished', 0)}, rejected {jobs.get('rejected', 0)}  "
        f"(wall {summary.get('wall_seconds')}s)")


def study(config_path: str | Path, policies: list[str], out: str | Path, *, modes: tuple[str, ...] = ("sim",),
          seeds: list[int | None] = (None,), repeats: int = 1, tolerance: float | None = None,
          replay_options: dict | None = None, workers: int | None = None, log=print) -> dict:
    """Run every replica of every mode, then ``rayrm.rm.runs.compare.write_study``; returns its result."""
    from rayrm.rm.core.config import load_config  # noqa: PLC0415
    from rayrm.rm.runs.compare import write_study  # noqa: PLC0415 (pandas only when used)

    out = Path(out)
    started = time.perf_counter()
    layout = plan(out, tuple(modes), list(seeds), repeats)
    runs = {mode: run_replicas(config_path, policies, reps, mode=mode, replay_options=replay_options,
                               workers=workers, log=log)
            for mode, reps in layout.items()}
    heartbeat = load_config(config_path).run.heartbeat_interval
    result = write_study(runs, out, tolerance=tolerance, heartbeat=heartbeat, log=log)
    n = sum(len(reps) * len(policies) for reps in layout.values())
    log(f"wrote {out} ({n} run directories, {time.perf_counter() - started:.1f}s)")
    sys.stdout.flush()
    return result


def compare(config_path: str | Path, policies: list[str], out: str | Path, *, mode: str = "sim",
            seed: int | None = None, tolerance: float | None = None, replay_options: dict | None = None,
            log=print):
    """One mode, one seed: run, tabulate, write ``comparison.csv``; returns the table."""
    result = study(config_path, policies, out, modes=(mode,), seeds=[seed], tolerance=tolerance,
                   replay_options=replay_options, log=log)
    return result["tables"][mode][0]
