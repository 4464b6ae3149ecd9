"""SLS's node (topology) file, node labels and label expressions, and resource names, for ``sls.py``.

The node file and the mapping of labels to node attributes and constraints are
described in ``sls.py``'s docstring.
"""

from __future__ import annotations

import re

from rayrm.rm.core.constraints import Clause, Constraint
from rayrm.rm.core.model import NodeSpec, Resources
from rayrm.traces.importers.common import SkipReport, amount, token
from rayrm.traces.importers.reading import json_stream

RESOURCE_NAMES = {"memory-mb": "memory_mb", "memory": "memory_mb", "memory_mb": "memory_mb",
                  "vcores": "cpu", "yarn.io/gpu": "gpu", "gpu": "gpu"}


def resource_name(key: str) -> str:
    return RESOURCE_NAMES.get(key, re.sub(r"\W", "_", key))


# ----- labels ----------------------------------------------------------------------------

def parse_labels(text: str) -> list[tuple[str, bool]]:
    """``"l1, l2(exclusive=false)"`` -> [(l1, True), (l2, False)]."""
    out = []
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        m = re.fullmatch(r"([^()\s]+)\s*(?:\(\s*exclusive\s*=\s*(true|false)\s*\))?", part, re.I)
        if not m:
            raise ValueError(part)
        out.append((m.group(1), (m.group(2) or "true").lower() == "true"))
    return out


# ----- nodes ----------------------------------------------------------------------------

def read_nodes(path, default_cap: Resources, report: SkipReport):
    """Nodes of an SLS node file, and the set of exclusive labels."""
    nodes: dict[str, NodeSpec] = {}
    exclusive: set[str] = set()
    for line, rack in json_stream(path):
        if not isinstance(rack, dict) or not isinstance(rack.get("nodes"), list):
            report.skip("not a rack object with a 'nodes' list", file=path, row=line)
            continue
        rack_name = token(str(rack.get("rack", "default-rack")).strip("/"))
        for k, entry in enumerate(rack["nodes"]):
            where = f"nodes[{k}]"
            if not isinstance(entry, dict) or not str(entry.get("node", "")).strip():
                report.skip("a node needs a 'node' name", file=path, row=line, field=where)
                continue
            name = token(str(entry["node"]).strip("/").split("/")[-1])
            cap = dict(default_cap)
            bad = None
            for key, value in entry.items():
                if key in ("node", "labels"):
                    continue
                x = amount(value)
                if x is None:
                    bad = (f"{where}.{key}", f"not a non-negative number: {value!r}")
                    break
                cap[resource_name(key)] = x
            attrs: dict = {"rack": rack_name}
            if bad is None and entry.get("labels"):
                try:
                    for label, excl in parse_labels(entry["labels"]):
                        attrs[f"label.{token(label)}"] = "yes"
                        if excl:
                            exclusive.add(token(label))
                except ValueError as e:
                    bad = (f"{where}.labels", f"cannot read label {e}")
            if bad is None and name in nodes:
                bad = (f"{where}.node", f"node {name} is listed twice")
            if bad is None and not any(v > 0 for v in cap.values()):
                bad = (where, "no positive capacity")
            if bad:
                report.skip(bad[1], file=path, row=line, field=bad[0])
                continue
            nodes[name] = NodeSpec(name, Resources(cap), attrs)
    return list(nodes.values()), exclusive


def label_constraint(expr, exclusive: set[str], shared: bool) -> Constraint | None:
    """The constraint for ``job.label.expression`` (None when it cannot be a conjunction)."""
    expr = str(expr or "").strip()
    if not expr:
        if shared:
            return Constraint()
        return Constraint(tuple(Clause(f"label.{x}", "not exists") for x in sorted(exclusive)))
    if "||" in expr:
        return None
    labels = [token(p.strip()) for p in expr.split("&&") if p.strip()]
    return Constraint(tuple(Clause(f"label.{x}", "exists") for x in labels))
