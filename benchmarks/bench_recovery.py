"""Time from a fault to full recovery, for each fault kind, in Ray replays.

Replays CONFIG (default configs/paper-micro.yaml, the TSF micro-benchmark) at
``--time-scale`` (default 0.05) once per fault kind, each with one fault injected
mid-run, checks the run directory (``rayrm check``), and prints for each fault
how long after it the failure was detected and the replay had fully recovered —
the definitions are in ``rm/runs/recovery.py``:

* kill-nm:n30@60        detected: n30 declared LOST (heartbeat expiry);
                        recovered: every task lost with it running again elsewhere
* kill-nm-host:0@60     the same for every NM of host nm-0 (host death or expiry)
* kill-am:job2@50       detected: attempt 1 FAILED (AM expiry); recovered: attempt 2 registered
* kill-am-host:0@50     the same for every app of AM host am-0 (its death, seen by the driver)
* kill-rm@100           detected: the restarted RM serving (state rebuilt);
                        recovered: every NM and AM resynchronised
* kill-ray-node:1@60    on a two-node ray.cluster_utils.Cluster: Ray node 1 killed;
                        detected and recovered as for kill-nm

Times are trace seconds and wall seconds after the fault.  At time scale 0.05 one
trace second is 50 ms, and the NM and AM expiry (10 heartbeats = 0.5 s) are held
at the RM's 1-second floor, so expiry-based detection is about 1 wall second.

At scale (``--nodes N``) one replay survives every fault kind in turn, on
``rayrm trace generate google --nodes N --jobs 1500 --tasks 60000 --seed 11 --span 1800
--max-duration 3600`` at time scale 0.02: kill-nm@300 (the first node), kill-nm-host:0@600,
kill-am-host:0@900, kill-rm@1200.

    python benchmarks/bench_recovery.py [CONFIG] [--time-scale 0.05] [--kinds kill-nm,kill-rm]
    python benchmarks/bench_recovery.py --nodes 1000 [--time-scale 0.02]
    python benchmarks/bench_recovery.py --run-dir RUN_DIR...      # figures of existing runs
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rayrm.rm.runs.check import check_run
from rayrm.rm.runs.recovery import format_times, recovery_times

ROOT = Path(__file__).resolve().parents[1]
FAULTS = {"kill-nm": "kill-nm:n30@60", "kill-nm-host": "kill-nm-host:0@60", "kill-am": "kill-am:job2@50",
          "kill-am-host": "kill-am-host:0@50", "kill-rm": "kill-rm@100", "kill-ray-node": "kill-ray-node:1@60"}


def run_local(config: Path, fault: str, scale: float, out: Path) -> None:
    from rayrm.rm.runtime.driver import replay  # noqa: PLC0415
    replay(config, out=out, time_scale=scale, faults=[fault], progress=False)


def run_two_nodes(config: Path, fault: str, scale: float, out: Path) -> None:
    """The replay on a two-node ray.cluster_utils.Cluster (one CPU each), then shut it down."""
    import ray  # noqa: PLC0415
    from ray.cluster_utils import Cluster  # noqa: PLC0415

    from rayrm.rm.runtime.driver import replay  # noqa: PLC0415
    from rayrm.rm.runtime.session import SYSTEM_CONFIG  # noqa: PLC0415
    store = 80 * 1024 * 1024
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": store, "include_dashboard": False, "_system_config": SYSTEM_CONFIG})
    cluster.add_node(num_cpus=1, object_store_memory=store)
    cluster.wait_for_nodes()
    try:
        ray.init(address=cluster.address, namespace="rayrm", logging_level="ERROR")
        replay(config, out=out, time_scale=scale, faults=[fault], progress=False)
    finally:
        ray.shutdown()
        cluster.shutdown()


def run_at_scale(nodes: int, scale: float, base: Path) -> Path:
    """The at-scale recovery trace at ``nodes`` nodes, every fault kind in one replay; returns its run dir."""
    from rayrm.rm.core.config import load_config  # noqa: PLC0415
    from rayrm.rm.runtime.driver import replay  # noqa: PLC0415
    from rayrm.traces.generate import write_google  # noqa: PLC0415
    path = base / f"google-{nodes}.yaml"
    write_google(path, nodes, 1500, 60_000, 11, span=1800, max_duration=3600)
    cfg = load_config(path)
    faults = [f"kill-nm:{cfg.nodes[0].name}@300", "kill-nm-host:0@600", "kill-am-host:0@900", "kill-rm@1200"]
    out = base / f"all-faults-{nodes}"
    summary = replay(cfg, out=out, time_scale=scale, faults=faults)
    print(f"failed apps {summary['jobs'].get('failed', 0)}, tasks finished {summary['tasks']['finished']}, "
          f"finished twice {summary['tasks_finished_twice']}; RM restores {summary['rm'].get('restores')}",
          flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", nargs="?", default=str(ROOT / "configs" / "paper-micro.yaml"))
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--kinds", default=",".join(FAULTS), help="fault kinds to run (comma-separated)")
    parser.add_argument("--out", help="keep the run directories under this directory")
    parser.add_argument("--run-dir", nargs="+", help="only print the figures of these run directories")
    parser.add_argument("--nodes", type=int, help="every fault kind in one replay of a generated trace "
                                                  "of this many nodes (time scale default 0.02)")
    args = parser.parse_args()
    if args.nodes:
        base = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-recovery-"))
        base.mkdir(parents=True, exist_ok=True)
        scale = args.time_scale if args.time_scale != 0.05 else 0.02
        out = run_at_scale(args.nodes, scale, base)
        result = check_run(out)
        print(result.report())
        print(f"\nrecovery after each fault ({args.nodes} nodes, time scale {scale}; "
              f"trace seconds after the fault, wall seconds in brackets)")
        print(format_times(recovery_times(out)))
        print(f"\nrun directory: {out}")
        return
    if args.run_dir:
        for d in args.run_dir:
            print(d)
            print(format_times(recovery_times(d)))
        return
    base = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    rows = []
    for kind in args.kinds.split(","):
        fault = FAULTS[kind]
        out = base / kind
        (run_two_nodes if kind == "kill-ray-node" else run_local)(Path(args.config), fault, args.time_scale, out)
        result = check_run(out)
        print(f"{fault}: rayrm check {'OK' if result.ok else 'VIOLATED'} "
              f"({result.over_allocations} over-allocations, {result.constraint_violations} constraint "
              f"violations, {result.tasks_missing} missing, {result.finished_twice} finished twice; "
              f"{result.attempts_by_status.get('lost', 0)} attempts lost)", flush=True)
        rows += recovery_times(out)
    print(f"\nrecovery after each fault ({Path(args.config).name}, time scale {args.time_scale}; "
          f"trace seconds after the fault, wall seconds in brackets)")
    print(format_times(rows))
    print(f"\nrun directories: {base}")


if __name__ == "__main__":
    main()
