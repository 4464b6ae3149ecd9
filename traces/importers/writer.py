"""The config an import writes: :class:`ImportResult` and :func:`write_config` (see ``common.py``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import yaml

from rayrm.rm.core.config import load_config, write_job_table
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.jobs import JobSpec
from rayrm.rm.core.model import NodeSpec


# ----- the result and the config writer --------------------------------------------

@dataclass
class ImportResult:
    """What an importer produces: the cluster (nodes and events) and the jobs."""

    nodes: list[NodeSpec]
    jobs: list[JobSpec]
    events: list[dict] = field(default_factory=list)   # cluster.events entries (config form)
    description: str = ""
    queues: list[dict] | None = None                    # the config's queues: tree (None: root.default)
    policy: str | None = None                           # the queue file's policy, when --policy is not given


def dims_of(nodes: Iterable[NodeSpec], jobs: Iterable[JobSpec], events: Iterable[dict] = ()) -> tuple:
    """Resource dimensions in the config's order: cpu first, GPUs last."""
    names = {d for n in nodes for d in n.capacity}
    names |= {d for j in jobs for d in j.app.demand}
    names |= {d for e in events if "join" in e for d in e["join"]["capacity"]}
    return tuple(sorted(names, key=lambda d: (d != "cpu", d.startswith("gpu"), d)))


def _node_entry(spec: NodeSpec) -> dict:
    entry: dict[str, Any] = {"name": spec.name, "capacity": {k: _num(v) for k, v in spec.capacity.items()}}
    if spec.attributes:
        entry["attributes"] = dict(spec.attributes)
    return entry


def _num(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def node_groups(nodes: Sequence[NodeSpec]) -> list[dict]:
    """``cluster.nodes`` groups: runs of identical nodes named ``prefix<n>`` become one group."""
    groups: list[dict] = []
    run: list[tuple[str, int, int, NodeSpec]] = []   # (prefix, number, width, spec)

    def flush():
        if not run:
            return
        if len(run) == 1:
            groups.append(_node_entry(run[0][3]))
        else:
            prefix, start, width, spec = run[0]
            entry = _node_entry(spec)
            entry["name"] = prefix + "{i:0%dd}" % width
            entry["count"], entry["start"] = len(run), start
            groups.append(entry)
        run.clear()

    for spec in nodes:
        m = re.fullmatch(r"(.*?)(\d+)", spec.name)
        if not m or "{" in spec.name or "}" in spec.name:
            flush()
            groups.append(_node_entry(spec))
            continue
        prefix, digits = m.group(1), m.group(2)
        width, number = len(digits), int(digits)
        if run:
            p0, n0, w0, s0 = run[-1]
            same = (p0 == prefix and w0 == width and number == n0 + 1 and s0.capacity == spec.capacity
                    and dict(s0.attributes) == dict(spec.attributes))
            if not same:
                flush()
        run.append((prefix, number, width, spec))
    flush()
    return groups


def write_config(path: str | Path, result: ImportResult, *, name: str | None = None,
                 policy: str | None = None, check: bool = True, report=None) -> Path:
    """Write ``path`` (YAML) and ``<stem>.jobs.csv`` next to it; returns the CSV path.

    With ``check`` the written config is loaded back (every error it would raise in
    ``rayrm simulate`` is raised here instead).  With ``report``, a trace that yields no
    job or node is an error that names the rules and checks that left out which rows.
    """
    path = Path(path)
    why = report.why() if report is not None else "see the skip report"
    if not result.nodes:
        raise InputError(f"the trace yields no usable node ({why})", file=str(path))
    if not result.jobs:
        raise InputError(f"the trace yields no usable job ({why})", file=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    table = path.with_name(path.stem + ".jobs.csv")
    dims = dims_of(result.nodes, result.jobs, result.events)
    doc: dict[str, Any] = {"name": name or path.stem}
    if result.description:
        doc["description"] = result.description
    doc["resources"] = list(dims)
    doc["cluster"] = {"nodes": node_groups(result.nodes)}
    if result.events:
        doc["cluster"]["events"] = result.events
    if result.queues:
        doc["queues"] = result.queues
    doc["workload"] = {"file": table.name}
    doc["policy"] = policy if policy is not None else (result.policy or "tsf")
    doc["run"] = {"seed": 1}
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    with open(path, "w") as handle:
        yaml.dump(doc, handle, Dumper=dumper, sort_keys=False, default_flow_style=None, width=120)
    write_job_table(table, result.jobs, dims)
    if check:
        try:
            load_config(path)
        except InputError:
            path.unlink(missing_ok=True)      # never leave a config rayrm cannot read
            table.unlink(missing_ok=True)
            raise
    return table
