"""The queue tree an import writes: from ``--queue-file``, ``--queue-weights`` or the jobs' queues.

``queue_tree`` reads ``--queue-file`` — a Fair Scheduler allocation file or a
capacity-scheduler.xml (``queue_files.py``), or YAML/JSON: the config's own ``queues:``
list (with its ``policy:``), or a mapping ``{queue: weight}`` — and ``--queue-weights
q1=2,eng.batch=1``, which sets those queues' weights in the file's tree or, alone, makes a
flat tree (a dotted name nests: ``eng.batch`` is leaf ``batch`` of parent ``eng``) to
which the other queues the jobs name are added with weight 1.  Without either the tree
is the queues the jobs name, each of weight 1, as the Fair Scheduler creates a queue an
app names; jobs all in ``default`` need no tree at all.
A job naming a queue the tree lacks, or a parent queue, is kept: the run rejects it
with the reason (``rayrm.rm.core.queues``), and the import notes how many there are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.queues.tree import parse_queues
from rayrm.traces.importers.common import SkipReport
from rayrm.traces.importers.queue_files import YarnQueues, read_yarn_queues

DEFAULT = "default"
NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass
class QueueTree:
    """The config's ``queues:`` list and the policy the queue file gives (None: the import's)."""

    queues: list[dict]
    policy: str | None = None
    open: bool = False            # the jobs' other queues join it (weight 1): --queue-weights alone
    source: str | None = None     # the queue file it was read from
    preemption: dict | None = None  # the config's preemption: the file's yarn-site properties switch on

    def check(self, dims: tuple[str, ...], total: dict[str, float]) -> None:
        """Validate the tree as a config would (``rayrm.rm.core.queues.tree``), errors naming
        the queue file: min above max against this cluster, a bad key in a YAML tree."""
        try:
            parse_queues(self.queues, dims, total)
        except InputError as e:
            raise e.at(file=self.source) from None

    def leaves(self) -> set[str]:
        return {path for path, q in walk(self.queues) if not q.get("children")}

    def parents(self) -> set[str]:
        return {path for path, q in walk(self.queues) if q.get("children")}


def walk(queues: list[dict], parent: str = ""):
    """(path below root, queue) of every queue, parents before their children."""
    for q in queues:
        path = f"{parent}.{q['name']}" if parent else str(q["name"])
        yield path, q
        yield from walk(q.get("children") or [], path)


def queue_path(name: str) -> str:
    """``root.eng.batch`` and ``eng.batch`` are both ``eng.batch``."""
    name = str(name).strip()
    return name[len("root."):] if name.startswith("root.") else name


def queue_tree(spec: str | None, file: str | None, report: SkipReport | None = None) -> QueueTree | None:
    """The tree ``--queue-file`` and ``--queue-weights`` give, or None when neither is given."""
    tree = read_queue_file(file, report) if file else None
    weights = parse_weights(spec)
    if not weights:
        return tree
    tree = tree or QueueTree([], open=True)
    for path, weight in weights.items():
        _at(tree.queues, path)["weight"] = weight
    return tree


def jobs_tree(queues, tree: QueueTree | None = None) -> QueueTree | None:
    """``tree`` (an open one) with the queues jobs name added, weight 1 each; without ``tree``
    None when all jobs are in ``default``."""
    names = sorted({queue_path(q) for q in queues} - {DEFAULT, ""})
    names = [n for n in names if all(NAME.fullmatch(part) for part in n.split("."))]
    if not names and tree is None:
        return None
    tree = tree or QueueTree([])
    known = {path for path, _ in walk(tree.queues)}
    for name in [DEFAULT, *names]:
        if name not in known:
            _at(tree.queues, name)
    return tree


def without_policies(tree: QueueTree) -> QueueTree:
    """The tree with every queue following the config's policy (``--drop-queue-policies``)."""
    def strip(queues):
        return [{k: (strip(v) if k == "children" else v) for k, v in q.items() if k != "policy"} for q in queues]
    return QueueTree(strip(tree.queues), None, preemption=tree.preemption)


def check_jobs(tree: QueueTree, queues, report: SkipReport) -> None:
    """Note the jobs the run will reject: in a queue the tree lacks, or in a parent queue."""
    leaves, parents = tree.leaves(), tree.parents()
    for q in queues:
        path = queue_path(q)
        if path in parents:
            report.note(f"jobs in a parent queue, rejected by the run (e.g. {path!r})")
        elif path not in leaves:
            report.note(f"jobs in a queue the tree does not define, rejected by the run (e.g. {path!r})")


def read_queue_file(file: str, report: SkipReport | None = None) -> QueueTree:
    path = Path(file)
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError(f"cannot read queue file: {e.strerror}", file=file) from None
    except UnicodeDecodeError:
        raise InputError("not a text file", file=file) from None
    if text.lstrip().startswith("<"):
        yarn: YarnQueues = read_yarn_queues(path, report)
        return QueueTree(yarn.queues, yarn.policy, source=file, preemption=yarn.preemption)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        raise InputError("malformed YAML/JSON", file=file) from None
    if isinstance(doc, dict) and isinstance(doc.get("queues"), list):
        policy = doc.get("policy")
        return QueueTree(doc["queues"], None if policy is None else str(policy), source=file)
    if isinstance(doc, list):
        return QueueTree(doc, source=file)
    doc = doc.get("queues", doc) if isinstance(doc, dict) else doc
    if not isinstance(doc, dict) or not doc:
        raise InputError("needs a queues: list, a list of queues or a mapping of queue name to weight",
                         file=file)
    tree = QueueTree([], source=file)
    for name, weight in doc.items():
        _at(tree.queues, queue_path(name))["weight"] = _weight(weight, file, f"queue {name}")
    return tree


def parse_weights(spec: str | None) -> dict[str, float]:
    """``--queue-weights a=2,eng.batch=1`` as {path: weight}."""
    weights: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in (spec or "").split(","))):
        name, eq, value = part.partition("=")
        if not eq or not queue_path(name):
            raise InputError(f"write queue=weight, got {part!r}", field="--queue-weights")
        weights[queue_path(name)] = _weight(value, None, "--queue-weights")
    return weights


def _at(queues: list[dict], path: str) -> dict:
    """The queue at ``path`` in the ``queues:`` list, made (weight 1) with its parents where missing."""
    names = path.split(".")
    level = queues
    for depth, name in enumerate(names):
        q = next((x for x in level if str(x.get("name")) == name), None)
        if q is None:
            q = {"name": name}
            level.append(q)
        if depth < len(names) - 1:
            level = q.setdefault("children", [])
    return q


def _weight(value, file, where) -> float:
    try:
        w = float(value)
    except (TypeError, ValueError):
        w = float("nan")
    if not w > 0 or w == float("inf"):
        raise InputError(f"a weight must be a positive number, got {value!r}", file=file, field=where)
    return int(w) if w.is_integer() else w
