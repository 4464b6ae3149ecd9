"""Alibaba GPU cluster trace (``cluster-trace-gpu-v2023``, "openb") as a rayrm config.

Inputs: the node list and the pod list, CSV with a header, told apart by their
columns (``sn`` for nodes, ``name`` and ``pod_phase`` for pods):

* nodes ``sn, cpu_milli, memory_mib, gpu, model``
* pods ``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase,
  creation_time, deletion_time, scheduled_time`` (times in seconds)

Mapping:

* A node ``sn`` has capacity ``cpu = cpu_milli / 1000``, ``memory_mb = memory_mib``
  (MiB are kept as the unit: nodes and pods use the same one) and ``gpu``, and the
  attribute ``gpu_model: <model>`` when ``model`` is given.
* A pod is a one-task job named ``name``, submitted at ``creation_time``, demanding
  ``cpu = cpu_milli / 1000``, ``memory_mb = memory_mib`` and ``gpu = num_gpu`` — or,
  for a GPU-sharing pod (``0 < gpu_milli < 1000``), ``num_gpu × gpu_milli / 1000``.
  rayrm accounts GPUs as one divisible amount per node: two 0.5-GPU pods fit a
  1-GPU node, but a fraction is not pinned to a particular GPU.
* ``gpu_spec`` ``A|B`` becomes ``gpu_model in (A, B)``; an empty spec, no constraint.
* Duration ``deletion_time − creation_time`` (it includes the pod's original
  queueing time; ``--start scheduled`` measures from ``scheduled_time`` instead).
* **Pods that never ran** (``pod_phase`` Pending, or no ``scheduled_time``) are
  skipped and reported.  **Pods that never ended** (no ``deletion_time``: still
  running when the trace was taken) run until the end of the trace, the latest
  time in the pod list (``--unfinished skip`` drops them instead); a note counts them.
* ``qos`` is not used.
* Skipped and reported: a missing or non-numeric cell, a negative amount or time,
  ``gpu_milli`` above 1000, a name used before, a pod demanding nothing, a
  duration that is not positive.  A node with a bad cell or no capacity likewise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from rayrm.rm.core.jobs import Durations, JobSpec
from rayrm.rm.core.constraints import Clause, Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.traces.importers.common import ImportResult, SkipReport, token
from rayrm.traces.importers.reading import numeric, read_table, width_check

HELP = "Alibaba GPU cluster trace (cluster-trace-gpu-v2023): node list and pod list CSV"
NODE_COLUMNS = ["sn", "cpu_milli", "memory_mib", "gpu", "model"]
POD_COLUMNS = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
               "pod_phase", "creation_time", "deletion_time", "scheduled_time"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs=2, metavar="CSV", help="the node list and the pod list (any order)")
    parser.add_argument("--unfinished", choices=("truncate", "skip"), default="truncate",
                        help="pods with no deletion_time: run to the trace end (default) or skip")
    parser.add_argument("--start", choices=("creation", "scheduled"), default="creation",
                        help="measure durations from creation_time (default) or scheduled_time")


def load(args: argparse.Namespace, report: SkipReport) -> ImportResult:
    return import_openb(args.inputs, report, unfinished=args.unfinished, start=args.start)


def classify(inputs) -> tuple[Path, Path]:
    """(node list, pod list) by their header lines."""
    nodes = pods = None
    for p in map(Path, inputs):
        try:
            with open(p) as handle:
                head = {c.strip() for c in handle.readline().strip().split(",")}
        except OSError as e:
            raise InputError(f"cannot read: {e.strerror}", file=str(p)) from None
        if "sn" in head:
            nodes = p
        elif {"name", "pod_phase"} <= head:
            pods = p
        else:
            raise InputError("neither a node list (sn, ...) nor a pod list (name, ..., pod_phase, ...)",
                             file=str(p), row=1)
    if nodes is None or pods is None:
        raise InputError("needs one node list (sn, cpu_milli, ...) and one pod list (name, ...)",
                         file=str(inputs[0]))
    return nodes, pods


def _numbers(df, columns, checks, *, allow_empty=()):
    out = {}
    for c in columns:
        values, empty, bad = numeric(df, c)
        if c not in allow_empty:
            checks.append((empty, c, "missing"))
        checks += [(bad, c, "not a number"), (~bad & ~empty & (values < 0), c, "negative")]
        out[c] = values
    return out


def read_nodes(path: Path, report: SkipReport) -> list[NodeSpec]:
    df = read_table(path, NODE_COLUMNS, header=True)
    names = df["sn"].astype(str).str.strip().to_numpy()
    checks = [width_check(df), (names == "", "sn", "missing"), (_duplicated(names), "sn", "node name used before")]
    v = _numbers(df, ["cpu_milli", "memory_mib", "gpu"], checks)
    cpu, mem, gpu = v["cpu_milli"] / 1000.0, v["memory_mib"], v["gpu"]
    checks.append(((np.nan_to_num(cpu) <= 0) & (np.nan_to_num(mem) <= 0) & (np.nan_to_num(gpu) <= 0),
                   "cpu_milli", "no capacity"))
    good = report.check_rows(df["_line"].to_numpy(), checks, file=path)
    models = df["model"].astype(str).str.strip().to_numpy()
    nodes = []
    for i in np.flatnonzero(good):
        attrs = {"gpu_model": token(models[i])} if models[i] else {}
        nodes.append(NodeSpec(names[i], Resources(cpu=cpu[i], memory_mb=mem[i], gpu=gpu[i]), attrs))
    return nodes


def _duplicated(values: np.ndarray) -> np.ndarray:
    import pandas as pd  # noqa: PLC0415
    return pd.Series(values).duplicated().to_numpy() & (values != "")


def read_pods(path: Path, report: SkipReport, *, unfinished="truncate", start="creation") -> list[JobSpec]:
    df = read_table(path, POD_COLUMNS, header=True)
    lines = df["_line"].to_numpy()
    names = df["name"].astype(str).str.strip().to_numpy()
    phase = df["pod_phase"].astype(str).str.strip().str.lower().to_numpy()
    checks = [width_check(df), (names == "", "name", "missing"), (_duplicated(names), "name", "pod name used before")]
    v = _numbers(df, ["cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time",
                      "deletion_time", "scheduled_time"], checks,
                 allow_empty=("deletion_time", "scheduled_time"))
    checks.append((v["gpu_milli"] > 1000, "gpu_milli", "gpu_milli is per GPU: 0..1000"))
    cpu, mem, num_gpu, milli = v["cpu_milli"] / 1000.0, v["memory_mib"], v["num_gpu"], v["gpu_milli"]
    gpu = num_gpu * np.where((milli > 0) & (milli < 1000), milli / 1000.0, 1.0)
    nothing = ~(np.nan_to_num(cpu) > 0) & ~(np.nan_to_num(mem) > 0) & ~(np.nan_to_num(gpu) > 0)
    checks.append((nothing, "cpu_milli", "the pod demands nothing"))
    cells_ok = report.check_rows(lines, checks, file=path)
    # The trace ends at the latest time among well-formed rows.
    times = np.concatenate([v[c][cells_ok] for c in ("creation_time", "deletion_time", "scheduled_time")])
    trace_end = float(np.nanmax(times)) if np.isfinite(times).any() else 0.0
    never_ran = (phase == "pending") | np.isnan(v["scheduled_time"])
    open_ended = np.isnan(v["deletion_time"])
    end = np.where(open_ended, trace_end, v["deletion_time"])
    begin = v["scheduled_time"] if start == "scheduled" else v["creation_time"]
    duration = end - begin
    rules = [(never_ran, "scheduled_time", "never scheduled (Pending or no scheduled_time)", "rule")]
    if unfinished == "skip":
        rules.append((open_ended, "deletion_time", "never ended (no deletion_time)", "rule"))
    rules.append((~(duration > 0), "deletion_time", "duration is not positive", "rule"))
    good = cells_ok.copy()
    good[cells_ok] = report.check_rows(lines[cells_ok], [(m[cells_ok], *rest) for m, *rest in rules], file=path)
    if unfinished == "truncate":
        report.note("pods with no deletion_time run until the trace end "
                    f"(t = {trace_end:g} s)", int((good & open_ended).sum()))
    report.note("GPU-sharing pods (0 < gpu_milli < 1000)", int((good & (gpu % 1 != 0)).sum()))
    specs = df["gpu_spec"].astype(str).str.strip().to_numpy()
    constraints: dict[str, Constraint] = {"": Constraint()}
    jobs = []
    for i in np.flatnonzero(good):
        spec = specs[i]
        c = constraints.get(spec)
        if c is None:
            models = tuple(dict.fromkeys(token(m) for m in spec.split("|") if m.strip()))
            c = constraints[spec] = Constraint((Clause("gpu_model", "in", models),)) if models else Constraint()
        app = AppSpec(names[i], Resources(cpu=cpu[i], memory_mb=mem[i], gpu=gpu[i]), 1, 1.0,
                      float(v["creation_time"][i]), c)
        jobs.append(JobSpec(app, Durations("fixed", mean=float(duration[i]))))
    return jobs


def import_openb(inputs, report: SkipReport, *, unfinished="truncate", start="creation") -> ImportResult:
    node_path, pod_path = classify(inputs)
    nodes = read_nodes(node_path, report)
    jobs = read_pods(pod_path, report, unfinished=unfinished, start=start)
    return ImportResult(nodes, jobs, description=f"openb {node_path.name} + {pod_path.name} "
                                                 f"(rayrm trace import openb)")
