"""Faults at the network layer: the micro-benchmark on three machines of network namespaces
(examples/cluster/netns.sh), under a seeded schedule of network faults, one row per seed.

Each seed draws two faults (wall seconds after the replay's clock starts):

1. on a worker W drawn at random, at 2-5 s, one of
   * ``cut`` — W's link down for D s, then up again (``ip link set VETH down/up``);
   * ``block`` — the head and W drop each other's packets for D s (blackhole routes in both,
     W still reaches the other worker);
   * ``kill`` — every process of machine W killed (it comes back only after the replay);
   D short (1.5-3 s: shorter than Ray's health check, 5 × 1 s here, and than the RM's
   host-silence expiry, 30 × 1 s) or long (8-15 s: past Ray's health check), even odds;
2. on the other worker, 4-8 s later, a short ``cut`` or ``block`` (1.5-3 s).

Each fault is logged into the replay's events.csv as the driver logs its own (``fault``
rows, with the NMs on the machine), so ``rayrm.rm.runs.recovery`` measures detection and
recovery.  Printed per seed, as ``bench_chaos.py``: tasks finished, finished twice, missing,
apps failed, over-allocations, constraint violations, tasks on a node held lost, the worst
recovery (trace s), availability, wall time, restores (``-``: no RM state kept) and the
faults; then every fault's detection and recovery in wall seconds and what detected it.
``--ray-detection`` replays nothing: it times how long Ray takes to declare a worker dead
after its link is cut and after its processes are killed, under the ``--health`` settings.
Needs root and iproute2; heavy: run it alone on the machine.

    python benchmarks/bench_netfaults.py --seeds 5 --out /tmp/netfaults
    python benchmarks/bench_netfaults.py --ray-detection --health 3000:10000:5
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_chaos import table  # noqa: E402
from netns_cluster import MICRO, WORKERS, HeadLine, NetnsCluster, unavailable  # noqa: E402

from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.runs.reader import RunDir  # noqa: E402
from rayrm.rm.runs.recovery import affected_nodes, recovery_times, write_costs  # noqa: E402

SHORT = (1.5, 3.0)        # wall s: below Ray's health check and the RM's host silence
LONG = (8.0, 15.0)        # wall s: past Ray's health check


def schedule(seed: int) -> list[dict]:
    """The seed's two faults (module docstring): kind, worker, at and duration (wall s)."""
    rng = random.Random(seed)
    first_on = rng.choice(WORKERS)
    kind = rng.choice(["cut", "block", "kill"])
    first = {"kind": kind, "worker": first_on, "at": rng.uniform(2.0, 5.0),
             "for": 0.0 if kind == "kill" else rng.uniform(*(SHORT if rng.random() < 0.5 else LONG))}
    other = next(w for w in WORKERS if w != first_on)
    second = {"kind": rng.choice(["cut", "block"]), "worker": other, "at": first["at"] + rng.uniform(4.0, 8.0),
              "for": rng.uniform(*SHORT)}
    return [first, second]


def actions(cluster: NetnsCluster, f: dict) -> tuple:
    """(inject, heal) for fault ``f`` as netns.sh commands."""
    w = f["worker"]
    if f["kind"] == "cut":
        return ("link", w, "down"), ("link", w, "up")
    if f["kind"] == "block":
        return ("block", "head", w), ("unblock", "head", w)
    return ("kill", w), None


def one(cluster: NetnsCluster, line: HeadLine, seed: int, scale: float, out: Path) -> dict:
    """One replay under seed's schedule: its row of the table (and its faults' times)."""
    cluster.heal()
    plan = schedule(seed)
    nms = {w: line.nms_on(MICRO, cluster.ips[w]) for w in WORKERS}
    proc = cluster.replay(out, "--time-scale", str(scale))
    t0 = line.wait_started()
    todo = []
    for f in plan:
        inject, heal = actions(cluster, f)
        todo.append((f["at"], inject, f))
        if heal is not None:
            todo.append((f["at"] + f["for"], heal, None))
    for at, command, f in sorted(todo, key=lambda x: x[0]):
        time.sleep(max(0.0, t0 + at - time.time()))
        if f is not None:              # logged first, as the driver logs its own faults
            spec = f"net-{f['kind']}:{f['worker']}@{at / scale:.1f}" + (f"+{f['for'] / scale:.1f}" if f["for"] else "")
            line.log_fault(f"{spec} (machine {cluster.ips[f['worker']]}: {' '.join(nms[f['worker']])})")
        cluster.script(*command)
    rc, log = cluster.finish(out, proc)
    if not (out / "summary.json").exists():
        raise RuntimeError(f"seed {seed}: the replay wrote no run directory (exit {rc}): {log[-3000:]}")
    summary = write_costs(out, json.loads((out / "summary.json").read_text()))
    return row(out, seed, summary, plan)


def row(out: Path, seed: int, summary: dict, plan: list[dict]) -> dict:
    check = check_run(out)
    faults = summary.get("faults", {})
    text = " ".join(f"{f['kind']}:{f['worker'][-1]}" + (f"+{f['for']:.0f}s" if f["for"] else "") for f in plan)
    return {"seed": seed, "faults": text,
            "finished": summary["tasks"]["finished"], "twice": summary["tasks_finished_twice"],
            "missing": check.tasks_missing, "failed": summary["jobs"].get("failed", 0),
            "over": check.over_allocations, "constraint": check.constraint_violations,
            "on_lost": check.started_on_lost + check.finished_on_lost,
            "worst": faults.get("worst_recovery"), "avail": faults.get("availability"),
            "wall": summary.get("wall_seconds", 0.0), "restores": "-",
            "ended": summary.get("interrupt_reason", "") or "done"}


def times(out: Path, seed: int) -> list[str]:
    """Each fault's detection and recovery (wall s after it) and what detected it: the RM's
    expiry of a silent host, or the driver, whose call on the host Ray failed (the host's
    processes died, or Ray declared its node dead)."""
    ev = RunDir(out).events
    faults = ev[ev.kind == "fault"]
    lines = []
    for r, f in zip(recovery_times(out), faults.itertuples(index=False)):
        lost = ev[(ev.kind == "node_lost") & ev.node.isin(affected_nodes("", f.node, f.detail)) & (ev.time >= f.time)]
        by = "-"
        if r["detected"] is not None and len(lost):
            by = "driver: Ray says host died" if "NM host" in lost.iloc[0].detail else "RM: host silent"
        cells = ["-" if x is None else f"{x:.2f}" for x in (r["detected_wall"], r["recovered_wall"])]
        lines.append(f"{seed:>4}  {r['fault']:<34} {cells[0]:>8} {cells[1]:>9} {r['lost_attempts']:>5}  {by}")
    return lines


#: the head's side of ray_detection: polls ray.nodes() from "go" until the worker is dead
_POLL = r"""
import sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
print("@ready", flush=True)
sys.stdin.readline()
t0 = time.time()
while any(n["Alive"] for n in ray.nodes() if n["NodeManagerAddress"] == sys.argv[2]):
    time.sleep(0.1)
print(f"@dead {time.time() - t0:.2f}", flush=True)
"""


def ray_detection(cluster: NetnsCluster) -> None:
    """Seconds from a worker's link cut (worker1), and from its processes killed (worker2),
    to Ray's verdict that it is dead, as a driver on the head sees it in ``ray.nodes()``."""
    import subprocess  # noqa: PLC0415
    from netns_cluster import SCRIPT  # noqa: PLC0415
    for kind, w, command in (("link cut", "worker1", ("link", "worker1", "down")),
                             ("processes killed", "worker2", ("kill", "worker2"))):
        poll = subprocess.Popen([str(SCRIPT), "exec", "head", sys.executable, "-c", _POLL, cluster.address,
                                 cluster.ips[w]], env=cluster.env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        while not poll.stdout.readline().startswith("@ready"):
            pass
        time.sleep(6.0)                        # past the health check's initial delay
        poll.stdin.write("go\n")
        poll.stdin.flush()
        cluster.script(*command)
        line = ""
        while not line.startswith("@dead"):
            line = poll.stdout.readline()
        poll.wait()
        print(f"{kind:<17} declared dead after {line.split()[1]} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--time-scale", type=float, default=0.03)
    ap.add_argument("--out", help="keep the run directories under this directory")
    ap.add_argument("--ray-detection", action="store_true", help="replay nothing: time Ray's verdict on a "
                    "worker whose link is cut and on one whose processes are killed")
    ap.add_argument("--health", default="1000:1000:5", help="Ray's node health check, PERIOD_MS:TIMEOUT_MS:"
                    "THRESHOLD (default 1000:1000:5; Ray's own defaults are 3000:10000:5)")
    args = ap.parse_args()
    why = unavailable()
    if why:
        sys.exit(f"bench_netfaults: {why}")
    base = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-netfaults-"))
    base.mkdir(parents=True, exist_ok=True)
    cluster = NetnsCluster(base / "cluster", prefix="rrb", subnet="10.213.8", health=args.health)
    cluster.up()
    if args.ray_detection:
        try:
            print(f"Ray health check {args.health}")
            ray_detection(cluster)
        finally:
            cluster.down()
        return
    line = HeadLine(cluster)
    rows, detail = [], []
    try:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            out = base / f"micro-net-{seed}"
            rows.append(one(cluster, line, seed, args.time_scale, out))
            detail += times(out, seed)
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    finally:
        line.close()
        cluster.down()
    print(f"\npaper-micro on 3 netns machines, time scale {args.time_scale}, {args.seeds} seeds, "
          f"Ray health check {args.health}")
    print(table(rows))
    print(f"\n{'seed':>4}  {'fault':<34} {'detected':>8} {'recovered':>9} {'lost':>5}  detected by   (wall s)")
    print("\n".join(detail), flush=True)


if __name__ == "__main__":
    main()
