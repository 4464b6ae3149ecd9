"""``rayrm sweep SPEC.yaml --out DIR [--workers N] [--address ADDR] [--keep-runs]``.

Simulates every cell of the spec's grid with every policy on every seed, each
simulation one Ray task (``rayrm.rm.runtime.experiments``), and writes ``DIR/sweep.csv``
(each metric's mean, 95% CI and range over the seeds, per cell and policy against the
baseline) and ``DIR/report/`` (heatmaps, index.html).  The spec format and ``DIR``'s
layout: ``rayrm.rm.runtime.sweep_spec`` and ``rayrm.rm.runtime.sweep``; docs/sweeps.md.

Running the same command again resumes: finished simulations are skipped.  Exit
status 0 when every simulation finished, 1 when some failed (each recorded with its
error in ``DIR/manifest.jsonl``), 2 on a bad spec, 130 when interrupted.
"""

from __future__ import annotations

from pathlib import Path


def add_arguments(parser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="sweep spec (YAML; see docs/sweeps.md)")
    parser.add_argument("--out", metavar="DIR", help="output directory (default: runs/<spec>-sweep); "
                        "rerunning with the same DIR resumes")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="most simulations at once (default: the cores of the machine or cluster)")
    parser.add_argument("--address", metavar="ADDR",
                        help="Ray cluster to join (HOST:PORT or auto; default: start a local Ray)")
    parser.add_argument("--keep-runs", action="store_true",
                        help="bring back and keep every simulation's whole run directory "
                             "(default: what the comparison reads)")
    parser.add_argument("--progress-every", type=float, default=5.0, metavar="S",
                        help="seconds between progress lines on stderr (default 5)")


def run(args) -> int:
    from rayrm.rm.core.errors import InputError  # noqa: PLC0415
    from rayrm.rm.core.policies import make_policy  # noqa: PLC0415
    from rayrm.rm.runtime.experiments import Runner  # noqa: PLC0415
    from rayrm.rm.runtime.sweep import exit_status, main_log, run_sweep  # noqa: PLC0415
    from rayrm.rm.runtime.sweep_spec import load_spec  # noqa: PLC0415

    spec = load_spec(args.spec)
    for p in spec.policies:
        try:
            make_policy(p)
        except InputError as e:
            raise InputError(e.reason, file=args.spec, field="policies") from None
    if not args.progress_every > 0:
        raise InputError(f"must be positive, got {args.progress_every}", field="--progress-every")
    out = Path(args.out or Path("runs") / f"{Path(args.spec).stem}-sweep")
    result = run_sweep(spec, out, Runner(workers=args.workers, address=args.address),
                       keep_runs=args.keep_runs, every=args.progress_every, log=main_log())
    return exit_status(result)
