"""Chaos: replays under seeded nemesis schedules, one row per seed.

Replays the 200-node trace (``rayrm trace generate google --nodes 200 --jobs 900 --tasks
36000 --seed 3 --max-duration 3600``) at time scale 0.02 under ``--seeds`` chaos seeds
(default 20), and with ``--paper`` the paper-scale trace (1,000 nodes, 4,500 jobs, 180,000
tasks, seed 7) under 3, and prints per seed: the faults by kind, tasks finished, finished
twice, lost (missing), apps failed, over-allocations, constraint violations, nothing on a
node held lost, the worst recovery (trace s), availability, wall time, and how many of
the RM's snapshots its predecessor plus journal rebuilt exactly (``restores``: each
replay keeps its RM state, ``rayrm check --restores``).  The goal: on every seed 0 twice,
0 missing, 0 over-allocated, no app failed beyond what max_attempts forces, every
restore exact, and every replay ends (a replay that stops making progress ends with its
run directory and says why, column ``ended``).

    python benchmarks/bench_chaos.py --seeds 2 --out /tmp/chaos      # two seeds, 200 nodes
    python benchmarks/bench_chaos.py --seeds 20 --paper              # the whole benchmark
    python benchmarks/bench_chaos.py --from-runs /tmp/chaos            # the tables of runs kept
    python benchmarks/bench_chaos.py --seeds 3 --preemption             # with preemption on

With ``--preemption`` the trace runs on a two-queue tree (``PREEMPTION_TREE``: every third job,
by submit order, in ``b``, the rest in ``a``, equal weights) with YARN's preemption enabled
(``PREEMPTION``), so the RM warns AMs and kills containers at their deadlines while the
nemesis kills and cuts hosts and restarts the RM; the table adds the containers preempted
(``preempt``) and the invariants are the same.

Heavy: run it under the shared lock (``flock /tmp/rayrm-heavy.lock ...``).
"""

from __future__ import annotations

import argparse
import csv
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

from rayrm.rm.runs.check import check_run

SHORT = {"partition-nm-host": "pNM", "partition-am-host": "pAM", "slow-nm-host": "sNM", "slow-am-host": "sAM",
         "drop": "drop", "kill-nm": "kNM", "kill-nm-host": "kNMh", "kill-am": "kAM", "kill-am-host": "kAMh",
         "kill-rm": "kRM", "kill-ray-node": "kRay", "stall-rm": "stall"}


def trace(base: Path, paper: bool) -> Path:
    """The 200-node trace, or the paper-scale one, written under ``base`` once."""
    from rayrm.traces.generate import write_google  # noqa: PLC0415
    path = base / ("paper.yaml" if paper else "google-200.yaml")
    if not path.exists():
        if paper:
            write_google(path, 1000, 4500, 180_000, 7, max_duration=3600)
        else:
            write_google(path, 200, 900, 36_000, 3, max_duration=3600)
    return path


#: the queues of ``--preemption``, and their preemption settings (trace seconds)
PREEMPTION_TREE = [{"name": "a"}, {"name": "b"}]
PREEMPTION = {"enabled": True, "min_share_timeout": 30, "fair_share_timeout": 60, "fair_share_threshold": 0.5,
              "grace": 15}


def with_preemption(config: Path) -> Path:
    """``config`` on ``PREEMPTION_TREE`` with ``PREEMPTION`` on, written beside it once."""
    import yaml  # noqa: PLC0415
    path = config.with_name(config.stem + "-preempt.yaml")
    if path.exists():
        return path
    doc = yaml.safe_load(config.read_text())
    jobs_csv = config.parent / doc["workload"]["file"]
    with open(jobs_csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    order = sorted(range(len(rows)), key=lambda i: (float(rows[i]["submit"]), rows[i]["id"]))
    for k, i in enumerate(order):
        rows[i]["queue"] = "b" if k % 3 == 2 else "a"
    out_csv = jobs_csv.with_name(config.stem + "-preempt.jobs.csv")
    with open(out_csv, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    doc.update(name=path.stem, queues=PREEMPTION_TREE, preemption=PREEMPTION, workload={"file": out_csv.name})
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def one(config: Path, seed: int, scale: float, out: Path) -> dict:
    """One replay of ``config`` under chaos ``seed``: its row of the table."""
    from rayrm.rm.runtime.driver import replay  # noqa: PLC0415
    t0 = time.time()
    replay(str(config), out=out, time_scale=scale, chaos=str(seed), progress=False, keep_state=True)
    return row(out, seed, time.time() - t0)


def row(out: Path, seed: int, wall: float | None = None) -> dict:
    """The table's row of the run directory ``out`` (chaos ``seed``): its summary and ``rayrm
    check``; ``wall`` defaults to the replay's own ``wall_seconds``."""
    summary = json.loads((out / "summary.json").read_text())
    check = check_run(out)
    faults = summary.get("faults", {})
    kinds = Counter(s.split("@")[0].split(":")[0] for s in summary.get("chaos", {}).get("faults", []))
    return {"seed": seed, "faults": " ".join(f"{SHORT[k]}{n}" for k, n in sorted(kinds.items())),
            "finished": summary["tasks"]["finished"], "twice": summary["tasks_finished_twice"],
            "missing": check.tasks_missing, "failed": summary["jobs"].get("failed", 0),
            "over": check.over_allocations, "constraint": check.constraint_violations,
            "on_lost": check.started_on_lost + check.finished_on_lost,
            "worst": faults.get("worst_recovery"), "avail": faults.get("availability"),
            "wall": summary.get("wall_seconds", 0.0) if wall is None else wall,
            "restores": restores(out), "ended": summary.get("interrupt_reason", "") or "done",
            "preempt": summary.get("preemption_protocol", {}).get("preempted")}


def restores(out: Path) -> str:
    """"same/checked" of the run's kept RM snapshots (``rayrm check --restores``), worked
    out once and kept in ``restores.json``; "-" when the run kept no RM state."""
    from rayrm.rm.service.restores import check_restores, kept_generations  # noqa: PLC0415
    cached = out / "restores.json"
    if not cached.exists():
        if len(kept_generations(out / "rm-state")) < 2:
            return "-"
        checks = check_restores(out / "rm-state")
        cached.write_text(json.dumps([vars(c) for c in checks], indent=1) + "\n")
    checks = json.loads(cached.read_text())
    return f"{sum(not c['differences'] for c in checks)}/{len(checks)}"


def from_runs(base: Path) -> None:
    """Print the tables of the run directories ``base/<trace>-chaos-<seed>`` already written
    (seeds run one at a time, e.g. one per turn of the shared lock), their fault costs
    (faults.json, summary.json ``faults``) worked out again by this code."""
    from rayrm.rm.runs.recovery import write_costs  # noqa: PLC0415
    for stem in ("google-200", "paper", "google-200-preempt", "paper-preempt"):
        runs = sorted(base.glob(f"{stem}-chaos-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
        runs = [p for p in runs if (p / "summary.json").exists()]
        for p in runs:
            write_costs(p, json.loads((p / "summary.json").read_text()))
        if runs:
            rows = [row(p, int(p.name.rsplit("-", 1)[1])) for p in runs]
            print(f"{stem}, {len(rows)} chaos seeds (from {base})")
            print(table(rows), flush=True)


def table(rows: list[dict]) -> str:
    head = (f"{'seed':>4} {'finished':>8} {'twice':>5} {'missing':>7} {'failed':>6} {'over':>4} {'constr':>6} "
            f"{'onlost':>6} {'worst s':>7} {'avail':>6} {'wall s':>6} {'restores':>8} {'preempt':>7}  faults / ended")
    lines = [head]
    for r in rows:
        worst = "-" if r["worst"] is None else f"{r['worst']:.1f}"
        avail = "-" if r["avail"] is None else f"{r['avail']:.3f}"
        lines.append(f"{r['seed']:>4} {r['finished']:>8} {r['twice']:>5} {r['missing']:>7} {r['failed']:>6} "
                     f"{r['over']:>4} {r['constraint']:>6} {r['on_lost']:>6} {worst:>7} {avail:>6} "
                     f"{r['wall']:>6.0f} {r['restores']:>8} {'-' if r['preempt'] is None else r['preempt']:>7}  "
                     f"{r['faults']} / {r['ended']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=20, help="chaos seeds of the 200-node trace (default 20)")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--time-scale", type=float, default=0.02)
    ap.add_argument("--paper", action="store_true", help="also the paper-scale trace under 3 seeds")
    ap.add_argument("--out", help="keep traces and run directories under this directory")
    ap.add_argument("--preemption", action="store_true", help="the traces on a two-queue tree with "
                    "preemption on (PREEMPTION_TREE, PREEMPTION)")
    ap.add_argument("--from-runs", metavar="DIR", help="replay nothing: print the tables of the run "
                    "directories already under DIR (written by earlier --out runs)")
    args = ap.parse_args()
    if args.from_runs:
        from_runs(Path(args.from_runs))
        return
    base = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-chaos-"))
    base.mkdir(parents=True, exist_ok=True)
    for paper, seeds in ((False, args.seeds), (True, 3 if args.paper else 0)):
        if not seeds:
            continue
        config = trace(base, paper)
        if args.preemption:
            config = with_preemption(config)
        rows = []
        for seed in range(args.first_seed, args.first_seed + seeds):
            rows.append(one(config, seed, args.time_scale, base / f"{config.stem}-chaos-{seed}"))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
        print(f"\n{config.stem}, time scale {args.time_scale}, {seeds} chaos seeds")
        print(table(rows), flush=True)


if __name__ == "__main__":
    main()
