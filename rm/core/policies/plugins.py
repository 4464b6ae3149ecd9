"""Naming a policy: built-ins, files, modules and installed plugins (docs/policies.md).

A policy is named by one string, the same wherever a policy is named (``--policy``,
``compare --policies``, a config's ``policy:``)::

    NAME[:KEY=VALUE]...                  a built-in (tsf, drf, slots, ...) or an installed
                                         plugin: entry point NAME of group rayrm.policies
    path/to/file.py:Class[:KEY=VALUE]... a class in a Python file
    package.module:Class[:KEY=VALUE]...  a class in an importable module

``KEY=VALUE`` options are keyword arguments of the class (int, float, true/false, or
text).  The string itself is what run directories and tables call the policy; the
summary also records the class's import path and the sha256 of its source file
(``policy_source``).  A file is imported as a module named after its stem, so a Ray
worker elsewhere imports it under the same name once the file is shipped to it
(``ship_paths``).  Anything wrong is a ``PolicyError``: one line naming the plugin,
what was being done and what went wrong.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from rayrm.rm.core.policies.base import Policy, PolicyError
from rayrm.rm.core.policies.builtin import BUILTIN, factory

GROUP = "rayrm.policies"


@dataclass(frozen=True)
class PolicyRef:
    """A policy string parsed (not loaded): what kind of name, its target, its options."""

    text: str
    kind: str                                   # built-in | entry point | file | module
    target: str                                 # the name, the file path or the module
    attr: str | None                            # the class (file and module)
    options: tuple[tuple[str, object], ...]


@dataclass(frozen=True)
class Resolved:
    """A policy string loaded: its class, the options, and where the code came from."""

    ref: PolicyRef
    make: object                                # callable(**options) -> Policy
    cls: type
    distribution: str | None = None             # an entry point's "name version"

    @property
    def import_path(self) -> str:
        return f"{self.cls.__module__}:{self.cls.__qualname__}"


def parse_policy(text: str) -> PolicyRef:
    """The policy string's parts (module docstring); a syntax error is a ``PolicyError``."""
    text = str(text).strip()
    if not text:
        raise PolicyError("''", "name", "empty policy name")
    head, *rest = text.split(":")
    if head.endswith(".py") or "/" in head:
        kind = "file"
    elif rest and "=" not in rest[0]:
        kind = "module"
    else:
        kind = "entry point" if head not in BUILTIN else "built-in"
    attr = None
    if kind in ("file", "module"):
        if not rest or not rest[0].isidentifier():
            raise PolicyError(text, "name", f"name the class: {head}:ClassName")
        attr, rest = rest[0], rest[1:]
    options = []
    for part in rest:
        key, eq, value = part.partition("=")
        if not eq or not key.isidentifier():
            raise PolicyError(text, "name", f"option {part!r} is not KEY=VALUE")
        options.append((key, _value(value)))
    return PolicyRef(text, kind, head, attr, tuple(options))


def _value(text: str):
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


_RESOLVED: dict[str, Resolved] = {}


def resolve_policy(text: str) -> Resolved:
    """Load the class a policy string names (once per process and string)."""
    hit = _RESOLVED.get(text)
    if hit is None:
        ref = parse_policy(text)
        if ref.kind == "built-in":
            hit = Resolved(ref, factory(ref.target), BUILTIN[ref.target][0])
        elif ref.kind == "entry point":
            hit = _entry_point(ref)
        else:
            module = _load_file(ref) if ref.kind == "file" else _import(ref, ref.target)
            cls = _policy_class(ref, module, ref.attr)
            hit = Resolved(ref, cls, cls)
        _RESOLVED[text] = hit
    return hit


def _load_file(ref: PolicyRef):
    path = Path(ref.target)
    if not path.is_file():
        raise PolicyError(ref.text, "load", f"no file {path}")
    name = path.stem
    if not name.isidentifier():
        raise PolicyError(ref.text, "load", f"the file's stem {name!r} is not a Python module name")
    known = sys.modules.get(name)
    if known is not None:
        if getattr(known, "__file__", None) and Path(known.__file__).resolve() == path.resolve():
            return known
        raise PolicyError(ref.text, "load", f"module name {name!r} is taken by {known!r}; rename the file")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:     # noqa: BLE001 - any failure of the user's code
        del sys.modules[name]
        raise PolicyError(ref.text, "import", _why(e)) from None
    return module


def _import(ref: PolicyRef, module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            raise PolicyError(ref.text, "load", f"no module named {e.name!r}") from None
        raise PolicyError(ref.text, "import", _why(e)) from None
    except (Exception, SystemExit) as e:     # noqa: BLE001
        raise PolicyError(ref.text, "import", _why(e)) from None


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _policy_class(ref: PolicyRef, module, attr: str) -> type:
    cls = getattr(module, attr, None)
    if cls is None:
        raise PolicyError(ref.text, "load", f"{module.__name__} has no {attr}")
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise PolicyError(ref.text, "load", f"{module.__name__}.{attr} is not a subclass of rayrm.Policy")
    if cls.unit is Policy.unit and cls.share is None:
        raise PolicyError(ref.text, "load", f"{module.__name__}.{attr} defines neither share nor unit()")
    return cls


def entry_points() -> list:
    """The installed plugins: entry points of group ``rayrm.policies``, by name."""
    from importlib import metadata  # noqa: PLC0415 (a fiftieth of a second, for plugins only)

    return sorted(metadata.entry_points(group=GROUP), key=lambda ep: ep.name)


def _entry_point(ref: PolicyRef) -> Resolved:
    found = [ep for ep in entry_points() if ep.name == ref.target]
    if not found:
        known = ", ".join(list(BUILTIN) + [ep.name for ep in entry_points()])
        what = f"unknown policy '{ref.target}' (choose from {known}, or name path/to/file.py:Class " \
               f"or package.module:Class)"
        raise PolicyError(ref.text, "load", what, line=what)
    ep = found[0]
    module, _, attr = ep.value.partition(":")
    cls = _policy_class(ref, _import(ref, module.strip()), attr.strip())
    dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else None
    return Resolved(ref, cls, cls, dist)


def make_policy(text: str, **defaults) -> Policy:
    """A fresh policy from its string; ``defaults`` are options the string may override."""
    hit = resolve_policy(text)
    options = dict(defaults) | dict(hit.ref.options)
    try:
        policy = hit.make(**options)
    except Exception as e:           # noqa: BLE001
        raise PolicyError(text, "__init__", _why(e)) from None
    if not isinstance(policy, Policy):
        raise PolicyError(text, "__init__", "did not make a rayrm.Policy")
    return policy


def policy_for_run(text: str, run) -> Policy:
    """``make_policy`` with the options a config's ``RunSettings`` give it (``slots_per_node``
    is the slots policy's k); the simulator and the Ray replay build their policy alike."""
    hit = resolve_policy(text)
    defaults = {"k": run.slots_per_node} if hit.cls is BUILTIN["slots"][0] else {}
    return make_policy(text, **defaults)


def policy_source(text: str) -> dict:
    """summary.json's ``policy_source``: which code the run's policy was."""
    hit = resolve_policy(text)
    out = {"spec": text, "kind": hit.ref.kind, "class": hit.import_path,
           "options": dict(hit.ref.options)}
    try:
        path = Path(inspect.getsourcefile(hit.cls))
        out |= {"file": str(path), "source_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    except (TypeError, OSError):
        out |= {"file": None, "source_sha256": None}
    if hit.distribution:
        out["distribution"] = hit.distribution
    return out


def policy_slug(text: str) -> str:
    """The policy string as one path component (default run directory names)."""
    ref = parse_policy(text)
    head = f"{Path(ref.target).stem}.{ref.attr}" if ref.kind == "file" else \
        f"{ref.target}.{ref.attr}" if ref.kind == "module" else ref.target
    tail = "".join(f"-{k}={v}" for k, v in ref.options)
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "-", head + tail)


def ship_paths(text: str) -> list[str]:
    """What a Ray worker on another machine needs to import the policy (``py_modules``):
    the file itself, or the top-level package (or single-file module) of a module
    outside rayrm; nothing for a built-in."""
    hit = resolve_policy(text)
    top = hit.cls.__module__.split(".")[0]
    if top == "rayrm":
        return []
    module = sys.modules[top]
    paths = list(getattr(module, "__path__", None) or [])
    return paths[:1] if paths else [module.__file__]


def first_line(cls) -> str:
    """The first line of a class's docstring ('' when it has none)."""
    doc = inspect.getdoc(cls) if cls.__doc__ else ""
    return (doc or "").strip().split("\n")[0]


def installed_policies() -> list[tuple[str, str, str]]:
    """(name, first docstring line, origin) of every built-in and installed plugin."""
    rows = [(name, first_line(cls), f"built-in ({cls.__module__}:{cls.__qualname__})")
            for name, (cls, _) in BUILTIN.items()]
    for ep in entry_points():
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "?"
        try:
            doc = first_line(resolve_policy(ep.name).cls)
        except PolicyError as e:
            doc = f"(cannot load: {e.what})"
        rows.append((ep.name, doc, f"entry point of {dist} ({ep.value})"))
    return rows
