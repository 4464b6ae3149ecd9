"""Batches of simulations fanned out on Ray: the runner behind compare, sensitivity and sweep.

A batch is a list of calls ``(key, function, args)``, each an independent simulation.  Each
runs as one Ray task (``num_cpus=1``) on a local Ray this runner starts, or on the cluster
at ``address`` (a ``ray start`` cluster); at most ``workers`` run at once, the rest wait
on the driver, so a batch of thousands holds only ``workers`` tasks in Ray.  Results come
back in the order they finish.

On a cluster of several nodes the runner, not Ray, picks each task's node (``Spread``): the
alive node with the most CPUs not yet running one of the batch's tasks.  Ray alone would
hand a finished task's worker the next queued task (it reuses a worker's lease), so a node
whose first worker is slow to start could sit out a batch of short simulations while the
others took all of it; pinned, the first ``workers`` tasks land one per free CPU.  The pin
is soft: a task whose node has died, or is busy with work not of this batch, runs elsewhere.

No task assumes a shared file system: a simulation writes its run directory to a
temporary directory on whichever node runs it and returns the files its caller asked
for as bytes (``simulate_files``), which the caller writes on the launching machine.
Large inputs (a config of 36,000 tasks) go to Ray's object store once (``Runner.share``),
wrapped in a ``Shared`` reference that Ray passes through unresolved; a worker decodes each
one the first time a task names it and keeps the last few decoded (``resolve``), so the
tasks of a batch on one config pay for its transfer and unpickling once per worker, not
once each.  A shared object is read, never changed, by the calls (the simulator changes
nothing in its config: a run on a config kept from earlier runs is the run on a fresh one).

A call that raises, or whose worker dies, is one failed ``Outcome`` with its error; the
others go on.  Ray retries a task whose worker or node was lost (``MAX_RETRIES``), so a
lost node costs only the tasks it was running.  ``Runner(inline=True)`` runs the same
calls one after another in this process, without Ray (tests and the benchmark's
in-process reference).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rayrm.rm.core.errors import InputError
from rayrm.rm.runtime.session import connect
from rayrm.rm.sim.engine import simulate

#: task retries after a lost worker or node (Ray's system failures; an exception is not retried)
MAX_RETRIES = 2
#: files of a run directory a comparison reads (``rayrm.rm.runs.compare``): the compact result
COMPACT_FILES = ("summary.json", "jobs.csv", "tasks.csv", "tasks.parquet")
MAX_SEEDS = 1000
TICK_SECONDS = 1.0
#: shared objects a worker keeps decoded (a sweep hands out its cells one after another)
KEEP_SHARED = 4


def parse_seeds(text: str, field: str = "--seeds") -> list[int]:
    """'1-50' -> 1..50; '1,4,9' -> those; '7' -> [7]."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            lo, sep, hi = part.strip().partition("-")
            seeds += list(range(int(lo), int(hi) + 1)) if sep else [int(lo)]
    except ValueError:
        raise InputError(f"write A-B or S,S,... (e.g. 1-50), got {text!r}", field=field) from None
    if not seeds:
        raise InputError(f"names no seed: {text!r}", field=field)
    if len(set(seeds)) != len(seeds):
        raise InputError(f"names a seed twice: {text!r}", field=field)
    if len(seeds) > MAX_SEEDS:
        raise InputError(f"names {len(seeds)} seeds, more than {MAX_SEEDS}", field=field)
    return seeds


@dataclass(frozen=True)
class Outcome:
    """What one call gave: its ``value``, or ``error`` (one line) when it failed;
    where it ran, its wall seconds inside the task, and the worker's peak memory."""

    key: Any
    value: Any = None
    error: str | None = None
    node: str = ""
    seconds: float = 0.0
    peak_rss_mb: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


def _peak_rss_mb() -> float:
    try:
        import resource  # noqa: PLC0415 (POSIX only)
    except ImportError:
        return 0.0
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / (1024 * 1024) if sys.platform == "darwin" else kb / 1024


def call(fn: Callable, *args) -> Outcome:
    """Run ``fn(*args)`` and capture its value or its error (the body of every task)."""
    started = time.perf_counter()
    try:
        value, error = fn(*args), None
    except Exception as e:  # noqa: BLE001 (a failing cell is recorded, the batch goes on)
        value = None
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        error = f"{type(e).__name__}: {e}" + (f" ({Path(where.filename).name}:{where.lineno})" if where else "")
    return Outcome(None, value, error, _where(), time.perf_counter() - started, _peak_rss_mb())


@dataclass(frozen=True)
class Shared:
    """An object in Ray's object store, by reference.  Nested in a task's arguments, the
    reference is not resolved by Ray before the task runs: ``resolve`` decodes it in the
    worker once and keeps it for the worker's later tasks."""

    ref: Any


#: the worker's decoded shared objects, object id -> value, least recently used first
_kept: OrderedDict[str, Any] = OrderedDict()


def resolve(arg):
    """``arg`` itself, or for a ``Shared`` the object it names: decoded from the object
    store the first time, from this process's last ``KEEP_SHARED`` ones afterwards."""
    if not isinstance(arg, Shared):
        return arg
    key = arg.ref.hex()
    if key in _kept:
        _kept.move_to_end(key)
        return _kept[key]
    import ray  # noqa: PLC0415 (only a Ray worker holds a Shared)
    value = _kept[key] = ray.get(arg.ref)
    while len(_kept) > KEEP_SHARED:
        _kept.popitem(last=False)
    return value


def task(fn: Callable, *args) -> Outcome:
    """The body of every Ray task: ``call`` on the arguments, shared ones resolved."""
    return call(fn, *(resolve(a) for a in args))


def _where() -> str:
    """The Ray node id running this call (in a task), else host:pid."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return ray.get_runtime_context().get_node_id()
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class RunFiles:
    """One simulation's result as it travels back: summary.json's dict and the run
    directory's files (relative name -> bytes; which ones: ``simulate_files``)."""

    summary: dict
    files: dict[str, bytes]


def simulate_files(config, policy: str, seed: int | None, keep: str = "compact") -> RunFiles:
    """Simulate ``config`` under ``policy`` and ``seed`` exactly as ``rayrm simulate`` does
    (``rayrm.rm.sim.engine.simulate`` into a run directory, default format) and return
    its ``RunFiles``: every file of the run directory for ``keep='all'``, ``COMPACT_FILES`` for 'compact', none for 'none'."""
    if keep not in ("all", "compact", "none"):
        raise ValueError(f"keep must be all, compact or none, got {keep!r}")
    tmp = Path(tempfile.mkdtemp(prefix="rayrm-cell-"))
    try:
        out = tmp / "run"
        summary = simulate(config, policy=policy, seed=seed, out=out, progress=False)
        files = {}
        if keep != "none":
            for path in sorted(p for p in out.rglob("*") if p.is_file()):
                name = path.relative_to(out).as_posix()
                if keep == "all" or name in COMPACT_FILES:
                    files[name] = path.read_bytes()
        return RunFiles(summary, files)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_files(files: dict[str, bytes], out: str | Path) -> Path:
    """Write a result's files into ``out`` (through a temporary sibling renamed into place,
    so ``out`` either holds every file or is absent after a crash)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    for name, data in files.items():
        target = staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    return out


class Runner:
    """Runs batches of calls on Ray (or inline); use as a context manager, which shuts
    down a local Ray it started.

    ``workers``: most calls running at once (default: the machine's cores for a local
    Ray, the cluster's CPUs with ``address``); ``address``: a Ray cluster to join.
    """

    def __init__(self, workers: int | None = None, address: str | None = None, inline: bool = False):
        if workers is not None and workers < 1:
            raise InputError(f"must be at least 1, got {workers}", field="--workers")
        self.inline, self.address = inline, address
        self.workers = workers
        self._started = False
        self._remote = None

    def __enter__(self) -> "Runner":
        if not self.inline:
            self._connect()
        return self

    def __exit__(self, *exc) -> None:
        if self._started:
            import ray  # noqa: PLC0415
            ray.shutdown()
            self._started = False

    def _connect(self) -> None:
        import ray  # noqa: PLC0415

        self._started = connect(self.address, num_cpus=None if self.address else (self.workers or os.cpu_count()))
        if self.workers is None:
            self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(task)

    def share(self, obj):
        """``obj`` in Ray's object store once (a ``Shared`` the calls' args may hold), or
        ``obj`` itself inline.  The calls must not change it (see the module docstring)."""
        if self.inline:
            return obj
        import ray  # noqa: PLC0415
        return Shared(ray.put(obj))

    def run_all(self, fn: Callable, arglist: list[tuple], label: str = "runs", stream=None) -> list:
        """``[fn(*args) for args in arglist]``, each a task; an argument object passed to
        several calls (a config) goes to the object store once.  Progress on stderr for
        more than a few calls; the first failure raises RuntimeError with its error."""
        refs: dict[int, Any] = {}

        def shared(a):
            if isinstance(a, (str, int, float, bool, type(None))):
                return a
            if id(a) not in refs:
                refs[id(a)] = self.share(a)
            return refs[id(a)]

        calls = [(k, fn, tuple(shared(a) for a in args)) for k, args in enumerate(arglist)]
        results: list = [None] * len(calls)
        progress = Progress(len(calls), label, stream=stream) if len(calls) > 4 else None
        for outcome in self.map(calls, tick=progress.tick if progress else None):
            if not outcome.ok:
                raise RuntimeError(f"{label} #{outcome.key + 1} failed: {outcome.error}")
            results[outcome.key] = outcome.value
            if progress is not None:
                progress.step(True)
        return results

    def map(self, calls: Iterable[tuple[Any, Callable, tuple]], tick: Callable[[], Any] | None = None
            ) -> Iterator[Outcome]:
        """Every ``(key, fn, args)`` run as ``fn(*args)``; outcomes as they finish.
        ``tick`` is called about every second while calls run (a progress line's clock)."""
        if self.inline:
            for key, fn, args in calls:
                yield _keyed(call(fn, *args), key)
            return
        if self._remote is None:
            self._connect()
        yield from self._map_ray(iter(calls), tick)

    def _map_ray(self, calls: Iterator, tick) -> Iterator[Outcome]:
        import ray  # noqa: PLC0415
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415

        running: dict = {}
        spread, listed = Spread(ray.nodes()), time.monotonic()
        try:
            while True:
                while len(running) < self.workers:
                    nxt = next(calls, None)
                    if nxt is None:
                        break
                    key, fn, args = nxt
                    node = spread.place()
                    # soft, spilling when unavailable: a task goes elsewhere when its node
                    # died or is busy with work not of this batch (a shared cluster)
                    remote = self._remote if node is None else self._remote.options(
                        scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True,
                                                                           _spill_on_unavailable=True))
                    running[remote.remote(fn, *args)] = (key, node)
                if not running:
                    return
                done, _ = ray.wait(list(running), num_returns=1, timeout=TICK_SECONDS)
                if tick is not None:
                    tick()
                if time.monotonic() - listed > TICK_SECONDS:      # a node may have joined or died
                    spread.refresh(ray.nodes())
                    listed = time.monotonic()
                for ref in done:
                    key, node = running.pop(ref)
                    spread.release(node)
                    try:
                        outcome = ray.get(ref)
                    except ray.exceptions.RayError as e:
                        outcome = Outcome(None, None, f"{type(e).__name__}: {str(e).strip().splitlines()[0]}")
                    yield _keyed(outcome, key)
        finally:
            for ref in running:
                ray.cancel(ref, force=True)


class Spread:
    """Which node runs the next task: among the alive nodes with CPUs, the one with the
    most CPUs free of this batch's tasks (CPUs − tasks placed there and still running);
    ties go to the node given the fewest tasks so far, then to the node listed first.

    ``nodes`` is ``ray.nodes()``'s list (refreshed by ``refresh``); a task's node is
    charged from ``place`` until ``release``."""

    def __init__(self, nodes: list[dict]):
        self.cpus: dict[str, float] = {}
        self.running: dict[str, int] = {}
        self.given: dict[str, int] = {}
        self.refresh(nodes)

    def refresh(self, nodes: list[dict]) -> None:
        self.cpus = {n["NodeID"]: n["Resources"].get("CPU", 0.0) for n in nodes
                     if n.get("Alive") and n["Resources"].get("CPU", 0.0) >= 1}

    def place(self) -> str | None:
        """The chosen node's id (charged one running task), or None with fewer than two
        nodes to choose from (Ray's own placement is then the same)."""
        if len(self.cpus) < 2:
            return None
        node = max(self.cpus, key=lambda n: (self.cpus[n] - self.running.get(n, 0), -self.given.get(n, 0)))
        self.running[node] = self.running.get(node, 0) + 1
        self.given[node] = self.given.get(node, 0) + 1
        return node

    def release(self, node: str | None) -> None:
        if node is not None:
            self.running[node] -= 1


def _keyed(outcome: Outcome, key) -> Outcome:
    return Outcome(key, outcome.value, outcome.error, outcome.node, outcome.seconds, outcome.peak_rss_mb)


class Progress:
    """A progress line on stderr at most every ``every`` seconds: done/total, failures,
    rate, time left.  On a terminal the line is redrawn in place; elsewhere (a log
    file, CI) each is a new line."""

    def __init__(self, total: int, label: str, every: float = 5.0, stream=None, clock=time.monotonic):
        self.total, self.label, self.every, self.clock = total, label, every, clock
        self.stream = stream if stream is not None else sys.stderr
        self.done = self.failed = 0
        self.started = self.last = clock()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def step(self, ok: bool) -> bool:
        """Count one finished call; True when a line was printed (time to refresh outputs)."""
        self.done += 1
        self.failed += 0 if ok else 1
        now = self.clock()
        if now - self.last >= self.every or self.done == self.total:
            self.last = now
            self._print(now)
            return True
        return False

    def tick(self) -> None:
        """Print the line if ``every`` seconds passed since the last one, though nothing finished."""
        now = self.clock()
        if now - self.last >= self.every and self.done < self.total:
            self.last = now
            self._print(now)

    def line(self, now: float | None = None) -> str:
        elapsed = max((self.clock() if now is None else now) - self.started, 1e-9)
        rate = self.done / elapsed * 60
        left = self.total - self.done
        eta = f"{_duration(left / (self.done / elapsed))} left" if self.done and left else ("done" if not left else "")
        return (f"{self.label}: {self.done}/{self.total} done, {self.failed} failed, "
                f"{rate:.1f}/min, {eta}").rstrip(", ")

    def _print(self, now: float) -> None:
        end = "" if self.tty and self.done < self.total else "\n"
        print(("\r" if self.tty else "") + self.line(now), end=end, file=self.stream, flush=True)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
