"""Queue weights for imported jobs: YARN queues become rayrm job weights.

``queue_weights`` reads ``--queue-weights q1=2,q2=1`` and/or ``--queue-file``: a YAML or
JSON mapping ``{queue: weight}`` (optionally under ``queues:``), or a Fair Scheduler
allocation XML, whose nested ``<queue name=...><weight>`` give each queue its weight under
its own name, its dotted path and ``root.<path>``.  A bad weight is one line naming the
file and the queue.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from rayrm.rm.core.errors import InputError


def queue_weights(spec: str | None, file: str | None) -> dict[str, float]:
    """Queue -> weight from ``q=w,...`` and/or a queue file (YAML/JSON mapping or allocation XML)."""
    weights: dict[str, float] = {}
    if file:
        path = Path(file)
        try:
            text = path.read_text()
        except OSError as e:
            raise InputError(f"cannot read queue file: {e.strerror}", file=file) from None
        if text.lstrip().startswith("<"):
            try:
                root = ET.fromstring(text)
            except ET.ParseError as e:
                raise InputError(f"malformed XML: {e}", file=file) from None

            def walk(elem, prefix):
                for q in elem.findall("queue"):
                    name = q.get("name", "")
                    full = f"{prefix}.{name}" if prefix else name
                    w = q.findtext("weight")
                    if w is not None:
                        value = _weight(w, file, f"queue {full} weight")
                        weights[full] = weights[name] = value
                        weights.setdefault(full if full.startswith("root.") else f"root.{full}", value)
                    walk(q, full)
            walk(root, "")
        else:
            try:
                doc = yaml.safe_load(text)
            except yaml.YAMLError:
                raise InputError("malformed YAML/JSON", file=file) from None
            doc = doc.get("queues", doc) if isinstance(doc, dict) else doc
            if not isinstance(doc, dict):
                raise InputError("needs a mapping of queue name to weight", file=file)
            for k, v in doc.items():
                weights[str(k)] = _weight(v, file, f"queue {k}")
    for part in filter(None, (p.strip() for p in (spec or "").split(","))):
        name, eq, value = part.partition("=")
        if not eq:
            raise InputError(f"write queue=weight, got {part!r}", field="--queue-weights")
        weights[name.strip()] = _weight(value, None, "--queue-weights")
    return weights


def _weight(value, file, where) -> float:
    try:
        w = float(value)
    except (TypeError, ValueError):
        w = float("nan")
    if not w > 0:
        raise InputError(f"a weight must be a positive number, got {value!r}", file=file, field=where)
    return w
