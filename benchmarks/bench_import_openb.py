"""openb-sized import + simulate: prints the wall time of each step.

    python benchmarks/bench_import_openb.py [--nodes 1500] [--pods 8000] [--seed 1] [--keep DIR]

Writes a synthetic node list and pod list shaped like Alibaba's
cluster-trace-gpu-v2023 (openb: ~1,500 nodes, ~8,000 pods), then times

1. ``rayrm trace import openb NODES PODS -o CONFIG`` (in process, through the CLI
   entry point: read, map, write YAML + job table, load it back to validate),
2. ``rayrm simulate CONFIG`` under TSF (load the config, simulate, write the run
   directory) — through the CLI when the ``simulate`` command exists, else
   ``rayrm.rm.sim.engine.simulate``,
3. ``rayrm check RUN_DIR``.

The shape: GPU node models with 8, 4, 2 or 1 GPUs plus CPU-only nodes; pods
20% CPU-only, 50% sharing one GPU (gpu_milli 100..900), 25% one GPU, 5% 2/4/8
GPUs; 30% name GPU models (``A|B``); 85% ended, 10% still running (no
deletion_time), 5% Pending; creation times uniform over 7 days, lifetimes
log-normal with a 6-hour mean.  It is not the real trace, only its size and
column semantics.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

NODE_TYPES = [  # (model, gpus, cpu_milli, memory_mib, count share)
    ("V100M16", 8, 96000, 786432, 0.17), ("V100M32", 8, 96000, 786432, 0.13),
    ("P100", 4, 64000, 393216, 0.10), ("T4", 2, 64000, 262144, 0.27), ("A10", 1, 32000, 262144, 0.07),
    ("G2", 8, 128000, 786432, 0.10), ("G3", 8, 128000, 786432, 0.06), ("", 0, 96000, 393216, 0.10),
]


def write_openb_sample(folder: Path, nodes: int = 1500, pods: int = 8000, seed: int = 1) -> tuple[Path, Path]:
    """Write ``openb_node_list.csv`` and ``openb_pod_list.csv``; returns their paths."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    shares = np.array([t[4] for t in NODE_TYPES])
    kinds = rng.choice(len(NODE_TYPES), size=nodes, p=shares / shares.sum())
    node_path = folder / "openb_node_list.csv"
    with open(node_path, "w") as f:
        f.write("sn,cpu_milli,memory_mib,gpu,model\n")
        for i, k in enumerate(kinds, start=1):
            model, gpus, cpu, mem, _ = NODE_TYPES[k]
            f.write(f"openb-node-{i:04d},{cpu},{mem},{gpus},{model}\n")
    models = [t[0] for t in NODE_TYPES if t[0]]
    kind = rng.choice(4, size=pods, p=[0.20, 0.50, 0.25, 0.05])
    created = np.sort(rng.uniform(0, 7 * 86400, pods)).round()
    life = rng.lognormal(np.log(6 * 3600) - 0.5, 1.0, pods).round() + 1
    phase = rng.choice(3, size=pods, p=[0.85, 0.10, 0.05])
    pod_path = folder / "openb_pod_list.csv"
    with open(pod_path, "w") as f:
        f.write("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                "creation_time,deletion_time,scheduled_time\n")
        for i in range(pods):
            cpu = int(rng.choice([1000, 2000, 4000, 8000, 16000, 32000]))
            mem = int(cpu / 1000 * rng.choice([1024, 2048, 4096]))
            num_gpu, milli = {0: (0, 0), 1: (1, int(rng.integers(1, 10)) * 100), 2: (1, 1000),
                              3: (int(rng.choice([2, 4, 8])), 1000)}[kind[i]]
            spec = ""
            if num_gpu and rng.random() < 0.3:
                spec = "|".join(rng.choice(models, size=int(rng.integers(1, 3)), replace=False))
            state = ("Succeeded", "Running", "Pending")[phase[i]]
            sched = "" if state == "Pending" else f"{created[i] + 1:.0f}"
            deleted = f"{created[i] + life[i]:.0f}" if state == "Succeeded" else ""
            qos = "LS" if rng.random() < 0.6 else "BE"
            f.write(f"openb-pod-{i:04d},{cpu},{mem},{num_gpu},{milli},{spec},{qos},{state},"
                    f"{created[i]:.0f},{deleted},{sched}\n")
    return node_path, pod_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1500)
    ap.add_argument("--pods", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep the files")
    args = ap.parse_args(argv)
    from rayrm.rm.cli.main import build_parser, main as rayrm  # noqa: PLC0415

    with contextlib.ExitStack() as stack:
        work = Path(args.keep) if args.keep else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        node_path, pod_path = write_openb_sample(work / "trace", args.nodes, args.pods, args.seed)
        config, run_dir = work / "openb.yaml", work / "run-tsf"

        t0 = time.perf_counter()
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = rayrm(["trace", "import", "openb", str(node_path), str(pod_path), "-o", str(config)])
        t_import = time.perf_counter() - t0
        if rc:
            print(err.getvalue(), file=sys.stderr)
            return rc
        print(err.getvalue().splitlines()[0])

        has_simulate = "simulate" in build_parser()._subparsers._group_actions[0].choices
        t0 = time.perf_counter()
        if has_simulate:
            with contextlib.redirect_stdout(io.StringIO()):
                rc = rayrm(["simulate", str(config), "--policy", "tsf", "--out", str(run_dir), "--no-progress"])
        else:
            from rayrm.rm.core.config import load_config  # noqa: PLC0415
            from rayrm.rm.sim.engine import simulate  # noqa: PLC0415
            simulate(load_config(config), policy="tsf", out=run_dir, progress=False)
        t_sim = time.perf_counter() - t0

        t0 = time.perf_counter()
        from rayrm.rm.runs.check import check_run  # noqa: PLC0415
        result = check_run(run_dir)
        t_check = time.perf_counter() - t0

    how = "rayrm simulate" if has_simulate else "rayrm.rm.sim.engine.simulate (no simulate command yet)"
    print(f"openb-shaped sample: {args.nodes} nodes, {args.pods} pods (seed {args.seed})")
    print(f"  import   {t_import:7.2f} s   rayrm trace import openb (incl. writing + validating the config)")
    print(f"  simulate {t_sim:7.2f} s   {how}, TSF, run directory written")
    print(f"  total    {t_import + t_sim:7.2f} s   (target: under 30 s)")
    print(f"  check    {t_check:7.2f} s   rayrm check: {'OK' if result.ok else 'VIOLATED'} "
          f"({result.jobs_accepted} jobs accepted, {result.jobs_rejected} rejected)")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
