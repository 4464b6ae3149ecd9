"""TSF against YARN's own Fair and Capacity schedulers on an SLS trace with Hadoop's queue files.

The trace is a SYNTH spec (``examples/queues/sls-three-queues.json``: 20 nodes of 16 vcores
and 16 GB, 120 jobs of a map and a reduce stage in three queues — CPU-bound ``etl`` in
sls_queue_1, memory-bound ``queries`` in sls_queue_2, balanced ``batch`` in sls_queue_3 —
arriving over 300 s), drawn once per seed (``rayrm trace import sls --synth-seed``).  The
queues are Hadoop SLS's own test files (``tests/data/sls/hadoop/``):
``fair-scheduler-allocation.xml`` (weights 0.25 / 0.25 / 0.5, min 1 GB and 1 vcore each,
leaves ``fair``) and ``capacity-scheduler.xml`` (capacities 25 / 25 / 50, maximum 100).
Each seed is simulated (exact, no jitter) under:

* ``tsf`` and ``drf`` on the Fair tree with the leaves' policies dropped (H-TSF / H-DRF
  all the way down: ``--drop-queue-policies``),
* ``yarn-fair`` on the Fair tree as written (leaves ``fair``: memory),
* ``tsf`` and ``yarn-capacity`` on the Capacity tree,
* and each of those but ``drf`` again with preemption on (``+ preemption``): on the Fair tree
  through SLS's ``fair-scheduler.xml`` (``yarn.scheduler.fair.preemption`` true, the
  allocation file's ``minSharePreemptionTimeout`` 2 s per queue, grace YARN's 15 s
  ``waitTimeBeforeKill``); on the Capacity tree as YARN's monitor with its defaults would
  (``yarn.resourcemanager.scheduler.monitor.enable`` true: a round every 3 s, threshold 1,
  grace 15 s ``max_wait_before_kill``; ``traces.importers.queue_files.site_preemption``).

It prints, per scheduler and tree, means over the seeds (± the 95% Student-t half-width):
makespan, job completion time (finish − submit; mean and p50 over all jobs, and the mean
per queue), and each queue's share of the cluster (its dominant share, max_r U_r / T_r)
against what it is owed (YARN's water-filling among the queues with demand), each averaged
over [0, makespan] (``rayrm.rm.runs.queues.run_queue_history``, the UI's queue chart), and
the containers preempted and the task-seconds they had run (``rayrm.rm.runs.queues.preemptions``,
the ``rayrm report`` table).

    python benchmarks/compare_yarn.py [--seeds 1-5] [--out DIR] [--markdown]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "queues" / "sls-three-queues.json"
HADOOP = ROOT / "tests" / "data" / "sls" / "hadoop"
RAYRM = [sys.executable, "-m", "rayrm.rm.cli.main"]
NM = ["--nm-resource", "memory_mb=16384,cpu=16", "--synth-time-unit", "s"]
#: (label, policy, tree config): the tree config is one of TREES' keys
RUNS = [("tsf (fair tree)", "tsf", "fair-tsf"), ("drf (fair tree)", "drf", "fair-tsf"),
        ("yarn-fair", "yarn-fair", "fair"), ("tsf (capacity tree)", "tsf", "cap"),
        ("yarn-capacity", "yarn-capacity", "cap"),
        ("tsf (fair tree) + preemption", "tsf", "fair-tsf-pre"), ("yarn-fair + preemption", "yarn-fair", "fair-pre"),
        ("tsf (capacity tree) + preemption", "tsf", "cap-pre"),
        ("yarn-capacity + preemption", "yarn-capacity", "cap-pre")]
TREES = {"fair": ["--queue-file", str(HADOOP / "fair-scheduler-allocation.xml")],
         "fair-tsf": ["--queue-file", str(HADOOP / "fair-scheduler-allocation.xml"), "--drop-queue-policies"],
         "cap": ["--queue-file", str(HADOOP / "capacity-scheduler.xml")],
         "fair-pre": ["--queue-file", str(HADOOP / "fair-scheduler.xml")],
         "fair-tsf-pre": ["--queue-file", str(HADOOP / "fair-scheduler.xml"), "--drop-queue-policies"],
         "cap-pre": ["--queue-file", str(HADOOP / "capacity-scheduler.xml")]}
#: the Capacity Scheduler's yarn-site switch, the rest its defaults: SLS's capacity-scheduler.xml
#: does not switch the monitor on, so the preemption runs add it
CAPACITY_SITE = {"yarn.resourcemanager.scheduler.monitor.enable": "true"}
QUEUES = ("sls_queue_1", "sls_queue_2", "sls_queue_3")


def seeds_of(text: str) -> list[int]:
    a, _, b = text.partition("-")
    return list(range(int(a), int(b or a) + 1))


def run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"compare_yarn: {' '.join(cmd)} failed:\n{done.stderr}")


def figures(run_dir: Path) -> dict:
    """One run's figures (module docstring)."""
    from rayrm.rm.runs.queues import preemptions, run_queue_history  # noqa: PLC0415
    from rayrm.rm.runs.reader import RunDir  # noqa: PLC0415
    rd = RunDir(run_dir)
    jobs = rd.jobs
    jct = (jobs["finish"] - jobs["submit"]).to_numpy(dtype=float)
    out = {"makespan": float(jobs["finish"].max()), "jct mean": float(np.mean(jct)),
           "jct p50": float(np.median(jct))}
    queue = jobs["queue"].astype(str).str.rpartition(".")[2].to_numpy()
    for q in QUEUES:
        out[f"{q} jct"] = float(np.mean(jct[queue == q]))
    pre = preemptions(rd)
    out["preempted"] = float(pre["preempted"].sum())
    out["lost task-s"] = float(pre["lost_task_seconds"].sum())
    history = run_queue_history(rd)
    for q in QUEUES:
        share, owed = time_averages(history[f"root.{q}"], out["makespan"])
        out[f"{q} share"], out[f"{q} owed"] = share, owed
    return out


def time_averages(points: list[tuple], end: float) -> tuple[float, float]:
    """The mean of a step series [(t, share, owed), ...] (each value holds until the next t)
    over [0, end]: (mean share, mean owed)."""
    t = np.array([p[0] for p in points] + [end], dtype=float)
    dt = np.diff(np.clip(t, 0.0, end))
    return (float(np.dot(dt, [p[1] for p in points]) / end), float(np.dot(dt, [p[2] for p in points]) / end))


def mean_ci(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    if len(a) < 2:
        return float(a.mean()), 0.0
    return float(a.mean()), float(stats.t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / np.sqrt(len(a)))


def with_capacity_preemption(config: Path) -> None:
    """Add to an imported config the ``preemption:`` YARN's yarn-site ``CAPACITY_SITE`` gives."""
    import yaml  # noqa: PLC0415
    from rayrm.traces.importers.queue_files import site_preemption  # noqa: PLC0415
    doc = yaml.safe_load(config.read_text())
    doc["preemption"] = site_preemption(CAPACITY_SITE, "capacity", "yarn-site.xml")
    config.write_text(yaml.safe_dump(doc, sort_keys=False))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-5")
    ap.add_argument("--out", default=None, help="keep the configs and run directories here")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    args = ap.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="compare-yarn-"))
    seeds = seeds_of(args.seeds)
    results: dict[str, list[dict]] = {label: [] for label, _, _ in RUNS}
    for seed in seeds:
        for tree, extra in TREES.items():
            config = out / f"seed{seed}" / f"{tree}.yaml"
            config.parent.mkdir(parents=True, exist_ok=True)
            run(RAYRM + ["trace", "import", "sls", str(SPEC), *NM, *extra, "--synth-seed", str(seed),
                         "-o", str(config)])
            if tree == "cap-pre":
                with_capacity_preemption(config)
        for label, policy, tree in RUNS:
            run_dir = out / f"seed{seed}" / f"{policy}-{tree}"
            run(RAYRM + ["simulate", str(out / f"seed{seed}" / f"{tree}.yaml"), "--policy", policy,
                         "--out", str(run_dir)])
            results[label].append(figures(run_dir))
    columns = list(next(iter(results.values()))[0])
    print(f"compare_yarn: {len(seeds)} seeds ({args.seeds}), run directories in {out}")
    jobs_cols = 3 + len(QUEUES) + 2
    for part, cols in (("jobs", columns[:jobs_cols]), ("queues", columns[jobs_cols:])):
        head = ["scheduler"] + cols
        rows = []
        for label, runs in results.items():
            cells = []
            for c in cols:
                m, h = mean_ci([r[c] for r in runs])
                cells.append(f"{m:.2f} ±{h:.2f}" if c.endswith(("share", "owed")) else f"{m:.0f} ±{h:.0f}")
            rows.append([label] + cells)
        print()
        if args.markdown:
            print("| " + " | ".join(head) + " |")
            print("|" + "---|" * len(head))
            for r in rows:
                print("| " + " | ".join(r) + " |")
        else:
            widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
            for r in [head] + rows:
                print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
