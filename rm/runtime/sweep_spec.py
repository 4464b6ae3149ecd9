"""A sweep's spec: the workload, the grid of values to vary, the policies, baseline and seeds.

::

    workload: {generate: google, nodes: 200, jobs: 900, tasks: 36000, max_duration: 3600}
    grid:                       # any generator option or config run: setting
      load: [0.5, 1.0, 2.0]
      nodes: [100, 200]
    policies: [tsf, drf, cdrf]
    baseline: tsf
    seeds: 1-10

``workload`` is either the synthetic generator (``generate: google`` and any of
``GENERATOR_OPTIONS``, as ``rayrm trace generate google`` takes them) or ``config: PATH``
(relative to the spec's directory).  Each grid axis is a generator option (generated
workloads only), a ``run:`` setting of the config (``heartbeat_interval`` or
``run.heartbeat_interval``) or, for a config with a ``queues:`` tree, a number of one of
its queues, ``queue.<path>.<key>`` (``queue.eng.weight: [1, 2, 4]``; keys in
``QUEUE_KEYS``); a *cell* is one point of the grid's product, in the order the spec
lists the axes and values.  ``seeds`` (A-B, S,S,... or a list) seed the task
durations of every simulation, as ``rayrm simulate --seed`` does; ``baseline`` (default
the first policy) is the policy the others are compared against.  Policy names pass
unchanged to the simulator.

A cell is identified by ``cell_identity``: the generator's options in full (defaults
filled in) or the digest of the config file and its job table, plus the run settings
it overrides (and the queue settings, when it varies some).  ``run_key`` adds the seed, the policy and rayrm's version: the key under
which a sweep's manifest records a finished simulation.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from rayrm.rm.core.config import ExperimentConfig, RunSettings, load_config, parse_config
from rayrm.rm.core.errors import InputError
from rayrm.rm.runtime.experiments import parse_seeds
from rayrm.traces.generate import write_google
from rayrm.traces.google_model import Knobs

#: generator option -> (type, default); the defaults are ``rayrm trace generate google``'s
GENERATOR_OPTIONS: dict[str, tuple[type, Any]] = {
    "nodes": (int, 1000), "jobs": (int, 4500), "tasks": (int, 180_000), "seed": (int, 1),
    "load": (float, 1.0), "span": (float, 3600.0), "max_duration": (float, None),
    "unconstrained": (float, Knobs.unconstrained), "rarity": (float, Knobs.rarity),
    "task_scale": (float, Knobs.task_scale), "heterogeneity": (float, Knobs.heterogeneity),
}
RUN_SETTINGS = tuple(f.name for f in dataclasses.fields(RunSettings) if f.name != "seed")     # the seed is the sweep's seeds
SPEC_KEYS = {"workload", "grid", "policies", "baseline", "seeds", "description"}
#: the queue settings a grid may vary (``queue.<path>.<key>``), each a number in the config's tree
QUEUE_KEYS = ("weight", "max_apps", "user_limit", "capacity", "max_capacity", "user_limit_factor",
              "min_user_limit_percent")
MAX_RUNS = 1_000_000


def version() -> str:
    """rayrm's installed version (part of every run key: another version reruns everything)."""
    try:
        return metadata.version("rayrm")
    except metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Cell:
    """One point of the grid: (axis, value) pairs in the spec's order."""

    point: tuple[tuple[str, Any], ...]

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.point) or "(no grid)"

    def as_dict(self) -> dict[str, Any]:
        return dict(self.point)


@dataclass(frozen=True)
class SweepSpec:
    """A validated spec (see the module docstring)."""

    path: Path
    workload: dict[str, Any]
    grid: tuple[tuple[str, tuple], ...]
    policies: tuple[str, ...]
    baseline: str
    seeds: tuple[int, ...]

    @property
    def generated(self) -> bool:
        return "generate" in self.workload

    @property
    def axes(self) -> list[str]:
        return [a for a, _ in self.grid]

    def cells(self) -> list[Cell]:
        """Every point of the grid, the first axis varying slowest."""
        return [Cell(tuple(zip(self.axes, values)))
                for values in itertools.product(*(v for _, v in self.grid))]


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a spec; every error is an InputError naming the file and field."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", file=str(path)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(f"malformed YAML: {getattr(e, 'problem', None) or e}", file=str(path),
                         row=mark.line + 1 if mark else None) from None
    try:
        return parse_spec(doc, path)
    except InputError as e:
        raise e.at(file=str(path)) from None


def parse_spec(doc: Any, path: Path) -> SweepSpec:
    """A SweepSpec from a parsed document (``load_spec`` adds the file to errors)."""
    if not isinstance(doc, dict):
        raise InputError("a spec is a mapping with workload, grid, policies, baseline and seeds",
                         field="(top level)")
    unknown = set(doc) - SPEC_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {', '.join(sorted(map(str, unknown)))} "
                         f"(known: {', '.join(sorted(SPEC_KEYS))})", field="(top level)")
    workload = _workload(doc.get("workload"), path)
    grid = _grid(doc.get("grid") or {}, "generate" in workload)
    for axis, _ in grid:
        if axis.startswith("queue."):
            _queue_at(_config_queues(workload["config"]), axis, f"grid.{axis}")
    policies = doc.get("policies")
    if isinstance(policies, str):
        policies = [p.strip() for p in policies.split(",")]
    if not isinstance(policies, list) or not policies or not all(isinstance(p, str) and p for p in policies):
        raise InputError("must be a list of policy names, e.g. [tsf, drf, cdrf]", field="policies")
    if len(set(policies)) != len(policies):
        raise InputError("names a policy twice", field="policies")
    baseline = str(doc.get("baseline", policies[0]))
    if baseline not in policies:
        raise InputError(f"{baseline!r} is not one of the policies", field="baseline")
    seeds = doc.get("seeds", 1)
    if isinstance(seeds, list):
        seeds = ",".join(str(s) for s in seeds)
    seeds = parse_seeds(str(seeds), field="seeds")
    spec = SweepSpec(path, workload, grid, tuple(policies), baseline, tuple(seeds))
    runs = len(spec.cells()) * len(seeds) * len(policies)
    if runs > MAX_RUNS:
        raise InputError(f"asks for {runs:,} simulations, more than {MAX_RUNS:,}", field="grid")
    return spec


def _workload(raw: Any, path: Path) -> dict[str, Any]:
    if not isinstance(raw, dict) or ("generate" in raw) == ("config" in raw):
        raise InputError("give {generate: google, <options>} or {config: PATH}", field="workload")
    if "config" in raw:
        if set(raw) != {"config"}:
            raise InputError("a config workload takes only 'config' (vary run settings in the grid)",
                             field="workload")
        file = Path(str(raw["config"]))
        file = file if file.is_absolute() else path.parent / file
        if not file.is_file():
            raise InputError(f"no config file {file}", field="workload.config")
        return {"config": str(file)}
    if raw["generate"] != "google":
        raise InputError(f"unknown generator {raw['generate']!r} (known: google)", field="workload.generate")
    options = {k: v for k, v in raw.items() if k != "generate"}
    for k, v in options.items():
        options[k] = _option(k, v, f"workload.{k}")
    return {"generate": "google", **options}


def _option(name: str, value: Any, where: str):
    """A generator option's value, checked against its type."""
    if name not in GENERATOR_OPTIONS:
        raise InputError(f"unknown generator option (known: {', '.join(GENERATOR_OPTIONS)})", field=where)
    kind = GENERATOR_OPTIONS[name][0]
    if value is None and name == "max_duration":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
        raise InputError(f"must be {'a whole number' if kind is int else 'a number'}, got {value!r}", field=where)
    return kind(value)


def _grid(raw: Any, generated: bool) -> tuple[tuple[str, tuple], ...]:
    if not isinstance(raw, dict):
        raise InputError("must map each axis to a list of values, e.g. load: [0.5, 1, 2]", field="grid")
    axes = []
    for axis, values in raw.items():
        axis, where = str(axis), f"grid.{axis}"
        if not isinstance(values, list) or not values:
            raise InputError("must be a non-empty list of values", field=where)
        if len(set(map(repr, values))) != len(values):
            raise InputError("names a value twice", field=where)
        setting = axis.removeprefix("run.")
        if axis.startswith("queue."):
            if generated or axis.rsplit(".", 1)[-1] not in QUEUE_KEYS or axis.count(".") < 2:
                raise InputError(f"a queue axis is queue.<path>.<key> of a config workload, key one of "
                                 f"{', '.join(QUEUE_KEYS)}", field=where)
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in values):
                raise InputError("must be a list of non-negative numbers", field=where)
            axes.append((axis, tuple(values)))
        elif setting in RUN_SETTINGS and (axis.startswith("run.") or axis not in GENERATOR_OPTIONS):
            for v in values:
                _check_run_setting(setting, v, where)
            axes.append((f"run.{setting}", tuple(values)))
        elif axis in GENERATOR_OPTIONS and generated:
            axes.append((axis, tuple(_option(axis, v, where) for v in values)))
        else:
            known = RUN_SETTINGS + (tuple(GENERATOR_OPTIONS) if generated else ())
            raise InputError(f"is neither {'a generator option nor ' if generated else ''}a run setting "
                             f"(known: {', '.join(known)})", field=where)
    return tuple(axes)


def _check_run_setting(setting: str, value: Any, where: str) -> None:
    """``value`` is a valid ``run.<setting>``, as a config's run: block is checked (``RunSettings.parse``)."""
    try:
        RunSettings.parse({setting: value})
    except InputError as e:
        raise InputError(str(e).split(": ", 1)[-1], field=where) from None


# ----- cells -------------------------------------------------------------------

def split_point(spec: SweepSpec, cell: Cell) -> tuple[dict, dict]:
    """(generator options in full, run-setting overrides) of one cell."""
    options = {k: default for k, (_, default) in GENERATOR_OPTIONS.items()} if spec.generated else {}
    options.update({k: v for k, v in spec.workload.items() if k != "generate"} if spec.generated else {})
    run = {}
    for axis, value in cell.point:
        if axis.startswith("run."):
            run[axis[4:]] = value
        elif not axis.startswith("queue."):
            options[axis] = value
    return options, run


def queue_point(cell: Cell) -> dict:
    """The cell's queue settings, ``queue.<path>.<key>`` -> value."""
    return {axis: value for axis, value in cell.point if axis.startswith("queue.")}


def _config_queues(path: str) -> list:
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        doc = None                      # load_config names the problem when the cell runs
    queues = doc.get("queues") if isinstance(doc, dict) else None
    return queues if isinstance(queues, list) else []


def _queue_at(queues: list, axis: str, where: str) -> dict:
    """The queue mapping ``queue.<path>.<key>`` names in a ``queues:`` list."""
    path = axis[len("queue."):].rsplit(".", 1)[0].removeprefix("root.")
    q: dict = {}
    level = queues
    for name in path.split("."):
        q = next((x for x in level if isinstance(x, dict) and str(x.get("name")) == name), None)
        if q is None:
            raise InputError(f"the config's queues: has no queue root.{path}", field=where)
        level = q.get("children") or []
    return q


def cell_identity(spec: SweepSpec, cell: Cell) -> dict:
    """What makes a cell's simulations what they are (see the module docstring)."""
    options, run = split_point(spec, cell)
    if spec.generated:
        return {"generate": "google", "options": options, "run": run}
    queues = queue_point(cell)
    return {"config": _config_digest(spec.workload["config"]), "run": run} | ({"queues": queues} if queues else {})


def _config_digest(path: str) -> str:
    """sha256 of the config file and of the job table it names, if any."""
    h = hashlib.sha256(Path(path).read_bytes())
    try:
        doc = yaml.safe_load(Path(path).read_text())
        table = (doc.get("workload") or {}).get("file") if isinstance(doc, dict) else None
    except yaml.YAMLError:
        table = None
    if table and (Path(path).parent / str(table)).is_file():
        h.update((Path(path).parent / str(table)).read_bytes())
    return h.hexdigest()


def run_key(identity: dict, seed: int, policy: str, rayrm_version: str) -> str:
    """The manifest key of one simulation: sha256 of the canonical JSON of the cell's
    identity, seed, policy and version (first 20 hex digits)."""
    text = json.dumps({"cell": identity, "seed": seed, "policy": policy, "version": rayrm_version},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def cell_config(spec: SweepSpec, cell: Cell, home: Path) -> ExperimentConfig:
    """The ExperimentConfig a cell simulates: the config file with the cell's run settings,
    or the generated workload written to ``home/cell.yaml`` and ``home/cell.jobs.csv``
    exactly as ``rayrm trace generate google`` writes it (then read back, so ``rayrm
    simulate home/cell.yaml --seed S`` is the cell's simulation)."""
    options, run = split_point(spec, cell)
    if not spec.generated:
        path = Path(spec.workload["config"])
        queues = queue_point(cell)
        if not run and not queues:
            return load_config(path)
        doc = yaml.safe_load(path.read_text())
        if isinstance(doc, dict):
            doc = copy.deepcopy(doc)
            if run:
                doc["run"] = {**(doc.get("run") or {}), **run}
            for axis, value in queues.items():
                _queue_at(doc.get("queues") or [], axis, f"grid.{axis}")[axis.rsplit(".", 1)[-1]] = value
        return parse_config(doc, path)
    opts = dict(options)
    nodes, jobs, tasks, seed = (opts.pop(k) for k in ("nodes", "jobs", "tasks", "seed"))
    path = Path(home) / "cell.yaml"
    write_google(path, nodes, jobs, tasks, seed, **opts)
    if run:
        doc = yaml.safe_load(path.read_text())
        doc["run"] = {**(doc.get("run") or {}), **run}
        path.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=1 << 16))
    return load_config(path)
