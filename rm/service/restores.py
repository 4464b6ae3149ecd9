"""Does a restart rebuild the state the RM had?  Each kept snapshot against the one before
plus its journal.

A restarted RM loads its last snapshot and replays the journal since (``store.py``); that
is right only if ``ResourceManagerState`` is a function of the calls alone *and* survives
pickling whole.  A store that keeps every generation (``StateStore(keep=True)``, ``rayrm
replay --keep-rm-state``) allows checking it after the fact: snapshot g+1 is the live
state at the instant journal g ended, so

    load(snapshot g) + replay(journal g)  ==  load(snapshot g+1)

must hold field by field for every g.  What the RM changes between calls on purpose,
outside the journal, is brought to the same point on both sides first: the hosts' marks
folded into the NMs' and the apps' records (``NodeManagers.settle``, ``AppMasters.settle``,
liveness only) and the AM hosts to wake (``AppMasters.news``, cleared by a restart).

The files are read as data (``store.read_snapshot``): a run directory
someone hands you cannot run code in ``rayrm check --restores``.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rayrm.rm.service.store import read_journal, read_snapshot, replay_records

_SCALARS = (int, float, str, bytes, bytearray, bool, type(None))


@dataclass
class RestoreCheck:
    """One generation: snapshot g + journal g against snapshot g+1."""

    generation: int
    records: int
    differences: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.differences


def kept_generations(state_dir: str | Path) -> list[int]:
    """The generations whose snapshot a keeping store left in ``state_dir``, in order."""
    return sorted(int(p.stem.split("-")[1]) for p in Path(state_dir).glob("snapshot-*.pkl"))


def check_restores(state_dir: str | Path, limit: int = 20) -> list[RestoreCheck]:
    """Replay each kept journal onto its snapshot and compare with the next snapshot; at
    most ``limit`` differences are named per generation."""
    d = Path(state_dir)
    gens = kept_generations(d)
    out = []
    for g in gens:
        if g + 1 not in gens or not (d / f"journal-{g}.log").exists():
            continue
        replayed, live = _load(d / f"snapshot-{g}.pkl"), _load(d / f"snapshot-{g + 1}.pkl")
        records = list(read_journal(d / f"journal-{g}.log"))
        replay_records(replayed, records)
        for state in (replayed, live):
            state.nodes.settle()
            state.apps.settle()
            state.apps.news.clear()
        check = RestoreCheck(g, len(records))
        differences(replayed, live, "state", check.differences, limit)
        out.append(check)
    return out


def _load(path: Path):
    return read_snapshot(path)[1]


def differences(a, b, path: str, out: list[str], limit: int = 20, _seen: set | None = None) -> None:
    """Append to ``out`` where ``a`` (replayed) and ``b`` (live) differ, by attribute path:
    values, dict keys and their order, lengths; NaN equals NaN.  Bound methods (a policy's
    own callbacks) are not compared."""
    seen = set() if _seen is None else _seen
    if len(out) >= limit or (id(a), id(b)) in seen:
        return
    seen.add((id(a), id(b)))
    if type(a) is not type(b):
        out.append(f"{path}: {type(a).__name__} replayed, {type(b).__name__} live")
    elif isinstance(a, float):
        if a != b and not (a != a and b != b):
            out.append(f"{path}: {a!r} replayed, {b!r} live")
    elif isinstance(a, _SCALARS) or isinstance(a, itertools.count):
        if (repr(a) if isinstance(a, itertools.count) else a) != (repr(b) if isinstance(b, itertools.count) else b):
            out.append(f"{path}: {_short(a)} replayed, {_short(b)} live")
    elif isinstance(a, np.ndarray):
        if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            out.append(f"{path}: arrays differ")
    elif isinstance(a, dict):
        if list(a) != list(b):
            only = sorted(map(str, set(b) - set(a)))[:5], sorted(map(str, set(a) - set(b)))[:5]
            out.append(f"{path}: keys differ (live only {only[0]}, replayed only {only[1]})" if any(only)
                       else f"{path}: key order differs")
        for k in a:
            if k in b:
                differences(a[k], b[k], f"{path}[{k!r}]", out, limit, seen)
    elif isinstance(a, (set, frozenset)):
        if a != b:
            out.append(f"{path}: live only {sorted(map(str, b - a))[:5]}, replayed only {sorted(map(str, a - b))[:5]}")
    elif isinstance(a, (list, tuple, deque)):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items replayed, {len(b)} live")
        for i, (x, y) in enumerate(zip(a, b)):
            differences(x, y, f"{path}[{i}]", out, limit, seen)
    elif type(a).__name__ != "method":
        for name in _fields(a):
            differences(getattr(a, name, None), getattr(b, name, None), f"{path}.{name}", out, limit, seen)


def _fields(obj) -> list[str]:
    names = []
    for cls in type(obj).__mro__:
        slots = getattr(cls, "__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    names = [n for n in names if n not in ("__weakref__", "__dict__")]
    return list(dict.fromkeys(names + list(getattr(obj, "__dict__", {}))))


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
