"""Building the synthetic Google-like workload and measuring it (see ``rayrm.traces.generate``).

The model — machine mix (drfh-paper Table I), 21 attributes over 4 classes,
constraints (tsf-paper Fig. 8a, choosy-paper §7.1), job sizes (tsf-paper Fig. 8b),
Pareto durations (choosy-paper §6.2), demands and load — is in ``rayrm.traces.google_model``.
At 1,000 nodes / 4,500 jobs / 180,000 tasks it takes about a second.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import yaml

from rayrm.rm.core.jobs import Durations, JobSpec
from rayrm.rm.core.config import ExperimentConfig, RunSettings, node_group, write_job_table
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import AppSpec, Resources
from rayrm.traces.google_model import (ALPHA, ATTR_FREQ, CLASSES, DIMS, MACHINE_MIX, MAX_WAVES, Knobs,
                                       attribute_clause, draw_demand, draw_machines, draw_required,
                                       job_sizes, machine_capacity, node_groups)


# ----- the workload --------------------------------------------------------------

def generate_google(nodes: int, jobs: int, tasks: int, seed: int, *, load: float = 1.0,
                    span: float = 3600.0, name: str = "google",
                    max_duration: float | None = None, **knobs) -> tuple[dict, list[JobSpec], dict]:
    """(config document, jobs, achieved statistics) of a Google-like workload.

    ``knobs``: ``unconstrained``, ``rarity``, ``task_scale``, ``heterogeneity``
    (``rayrm.traces.google_model.Knobs``; their defaults are the calibrated workload).
    The document's ``workload.file`` is ``<name>.jobs.csv``; ``write_google`` writes both.
    Machines and jobs draw from separate streams of ``seed``.  ``max_duration``
    truncates every task's Pareto duration at that many seconds (``pareto:A:M:S``):
    without it a few tail tasks of α = 1.9 run for tens of hours past a one-hour
    arrival window.
    """
    for flag, value, low in (("--nodes", nodes, 1), ("--jobs", jobs, 1), ("--tasks", tasks, jobs)):
        if value < low:
            raise InputError(f"must be at least {low}, got {value}", field=flag)
    for flag, value in (("--load", load), ("--span", span)) + (
            (("--max-duration", max_duration),) if max_duration is not None else ()):
        if not (value > 0 and math.isfinite(value)):
            raise InputError(f"must be positive, got {value}", field=flag)
    dials = Knobs(**knobs)
    machine_rng, job_rng = (np.random.default_rng([seed & 0xFFFFFFFF, s]) for s in (0, 1))
    config, cls, satisfied = draw_machines(nodes, machine_rng, dials.rarity)
    groups = node_groups(config, cls, satisfied, dials.heterogeneity)
    caps = [machine_capacity(int(i), dials.heterogeneity) for i in config]
    cap_cpu = np.array([c for c, _ in caps])
    cap_mem = np.array([m for _, m in caps])
    machine_mask = satisfied.astype(np.int64) @ (1 << np.arange(len(ATTR_FREQ), dtype=np.int64))

    sizes = job_sizes(jobs, tasks, job_rng)
    submits = np.round(np.sort(job_rng.uniform(0, span, jobs)), 2)
    rel_mean = np.exp(job_rng.normal(0.0, 0.8, jobs))
    clauses = [attribute_clause(k) for k in range(len(ATTR_FREQ))]
    required, demands, eligible = [], [], np.zeros(jobs)
    for j in range(jobs):
        need = math.ceil(int(sizes[j]) / MAX_WAVES)
        for attempt in range(10_000):
            req, (cpu, mem) = draw_required(job_rng, dials.unconstrained), draw_demand(job_rng, dials.task_scale)
            want = sum(1 << k for k in req)
            ok = (machine_mask & want) == want
            slots = np.floor(np.minimum(cap_cpu / cpu, cap_mem / mem))[ok].sum()
            if slots >= (need if attempt < 1_000 else 1):
                break
        else:
            raise InputError("no job shape fits this cluster; give more --nodes", field="--nodes")
        required.append(req)
        demands.append((cpu, mem))
        eligible[j] = ok.mean()
    cpu_work = sum(int(n) * d[0] * r for n, d, r in zip(sizes, demands, rel_mean))
    scale = load * cap_cpu.sum() * span / cpu_work
    width = max(4, len(str(jobs)))
    specs = []
    for j in range(jobs):
        mean = max(0.1, round(float(scale * rel_mean[j]), 1))
        app = AppSpec(f"j{j + 1:0{width}d}", Resources(cpu=demands[j][0], memory_mb=demands[j][1]),
                      int(sizes[j]), 1.0, float(submits[j]),
                      Constraint(tuple(clauses[k] for k in required[j])))
        specs.append(JobSpec(app, Durations("pareto", mean=mean, alpha=ALPHA, max=max_duration or 0.0)))
    cap = f" --max-duration {max_duration:g}" if max_duration is not None else ""
    cap += "".join(f" --{k.replace('_', '-')} {v:g}" for k, v in dials.changed().items())
    doc = {"name": name,
           "description": (f"rayrm trace generate google --nodes {nodes} --jobs {jobs} --tasks {tasks} "
                           f"--seed {seed} --load {load:g} --span {span:g}{cap} (tsf-paper §VI-B)"),
           "resources": list(DIMS), "cluster": {"nodes": groups},
           "workload": {"file": f"{name}.jobs.csv"}, "policy": "tsf", "run": {"seed": int(seed)}}
    stats = workload_stats(specs, eligible, [len(r) for r in required], config, cls,
                           cap_cpu, cap_mem, span, seed)
    if max_duration is not None:
        stats["max_duration"] = float(max_duration)
    return doc, specs, stats


def workload_stats(specs, eligible, n_constraints, config, cls, cap_cpu, cap_mem, span, seed) -> dict:
    """The statistics ``TARGETS`` compares against the papers."""
    sizes = np.array([s.app.num_tasks for s in specs])
    per_job = [s.task_durations(seed) for s in specs]
    # a truncated Pareto's mean is below M: the load is the drawn work's
    means = np.array([d.mean() if s.durations.max > 0 else s.durations.mean for s, d in zip(specs, per_job)])
    cpu = np.array([s.app.demand["cpu"] for s in specs])
    mem = np.array([s.app.demand["memory_mb"] for s in specs])
    drawn = np.concatenate(per_job)
    top = np.sort(drawn)[-max(10, len(drawn) // 100):]                # Hill estimator, top 1%
    logs = np.log(top[1:] / top[0]).sum() if len(top) > 1 else 0.0
    hill = (len(top) - 1) / logs if logs > 0 else float("nan")      # nan: a tail truncated flat
    weights = np.array([m[0] for m in MACHINE_MIX], dtype=float)
    submits = [s.app.submit for s in specs]
    return {
        "nodes": len(config), "jobs": len(specs), "tasks": int(sizes.sum()),
        "class_share": {c: float(np.mean(cls == i)) for i, c in enumerate(CLASSES)},
        "config_share_error": float(np.abs(np.bincount(config, minlength=len(MACHINE_MIX)) / len(config)
                                           - weights / weights.sum()).sum() / 2),
        "jobs_all_machines": float(np.mean(eligible >= 1.0)),
        "jobs_le_20pct": float(np.mean(eligible <= 0.2)),
        "jobs_lt_10pct": float(np.mean(eligible < 0.1)),
        "mean_eligible": float(eligible.mean()),
        "constraints_per_job": float(np.mean(n_constraints)),
        "single_task_jobs": float(np.mean(sizes == 1)),
        "jobs_le_10_tasks": float(np.mean(sizes <= 10)),
        "tasks_in_le_10_jobs": int(sizes[sizes <= 10].sum()),
        "largest_job": int(sizes.max()),
        "size_bins": {b: int(n) for b, n in zip(("<=10", "11-100", "101-500", ">500"),
                                                np.histogram(sizes, [0, 10.5, 100.5, 500.5, np.inf])[0])},
        "pareto_alpha_hill": float(hill),
        "longest_task": float(drawn.max()),
        "mean_task_duration": float((sizes * means).sum() / sizes.sum()),
        "arrival_span": float(max(submits) - min(submits)),
        "cpu_load": float((sizes * cpu * means).sum() / (cap_cpu.sum() * span)),
        "memory_load": float((sizes * mem * means).sum() / (cap_mem.sum() * span)),
    }


# (statistic, what the paper says, how it is printed)
TARGETS = [
    ("config_share_error", "machine mix = drfh Table I (total variation)", "{:.3f}"),
    ("jobs_all_machines", "< 20% of jobs run on all machines (tsf Fig. 8a)", "{:.1%}"),
    ("jobs_le_20pct", "~50% of jobs run on <= 20% (tsf Fig. 8a; choosy 40%)", "{:.1%}"),
    ("jobs_lt_10pct", "~30% of jobs run on < 10% (choosy §7.1)", "{:.1%}"),
    ("mean_eligible", "average job runs on ~38% (choosy §7.1)", "{:.1%}"),
    ("constraints_per_job", "1.8 constraints per job (choosy §7.1)", "{:.2f}"),
    ("single_task_jobs", "> 60% single-task jobs (tsf Fig. 8b)", "{:.1%}"),
    ("jobs_le_10_tasks", "86% of jobs have <= 10 tasks (tsf §VI-B3)", "{:.1%}"),
    ("tasks_in_le_10_jobs", "< 8k tasks in those at 180k (tsf §VI-B3)", "{:,}"),
    ("largest_job", "largest job ~20k of 180k tasks (tsf §VI-B3)", "{:,}"),
    ("tasks", "total tasks = --tasks", "{:,}"),
    ("pareto_alpha_hill", "task durations Pareto, alpha ~1.9 (choosy §6.2)", "{:.2f}"),
    ("longest_task", "longest task (at most --max-duration when given)", "{:,.0f} s"),
    ("arrival_span", "arrivals over one hour", "{:.0f} s"),
    ("cpu_load", "offered CPU work / (cores x span) = --load", "{:.2f}"),
    ("memory_load", "offered memory work (CPU-bound workload: lower)", "{:.2f}"),
]


def format_stats(stats: dict) -> str:
    """The achieved statistics next to the papers' targets, one per line."""
    lines = [f"{'target':<58} achieved"]
    lines += [f"{label:<58} {fmt.format(stats[key])}" for key, label, fmt in TARGETS]
    if "max_duration" in stats:
        lines.append(f"{'task durations truncated at --max-duration':<58} {stats['max_duration']:,.0f} s")
    lines.append(f"{'machine classes A/B/C/D (0.535/0.322/0.080/0.063)':<58} "
                 + "/".join(f"{v:.3f}" for v in stats["class_share"].values()))
    lines.append(f"{'jobs by size <=10 / 11-100 / 101-500 / >500':<58} "
                 + " / ".join(str(v) for v in stats["size_bins"].values()))
    return "\n".join(lines)


def google_experiment(nodes: int, jobs: int, tasks: int, seed: int, **kw) -> ExperimentConfig:
    """The generated workload as an ExperimentConfig, without files (for benchmarks)."""
    doc, specs, _ = generate_google(nodes, jobs, tasks, seed, **kw)
    specs_nodes = [n for k, g in enumerate(doc["cluster"]["nodes"])
                   for n in node_group(g, f"cluster.nodes[{k}]")]
    return ExperimentConfig(doc["name"], DIMS, specs_nodes, specs, doc["policy"],
                            RunSettings(seed=int(seed)))


def write_google(path: str | Path, nodes: int, jobs: int, tasks: int, seed: int, **kw) -> dict:
    """Write CONFIG and ``<stem>.jobs.csv`` beside it; returns the achieved statistics."""
    path = Path(path)
    doc, specs, stats = generate_google(nodes, jobs, tasks, seed, name=path.stem, **kw)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_job_table(path.parent / doc["workload"]["file"], specs, DIMS)
        with open(path, "w") as fh:
            yaml.dump(doc, fh, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
                      sort_keys=False, default_flow_style=None, width=1 << 16, allow_unicode=True)
    except OSError as e:
        raise InputError(f"cannot write: {e.strerror}", file=str(path)) from None
    return stats
