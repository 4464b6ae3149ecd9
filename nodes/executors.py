"""Container executors: how a granted container's payload runs on its NM's Ray node.

* ``task`` — each container is a Ray task pinned to the NM's Ray node
  (``NodeAffinitySchedulingStrategy(soft=False)``, ``num_cpus=0``: the RM's
  accounting is the only admission control).  Each running container holds a
  Ray worker process, so the workers are started before t = 0 (``prewarm``) and
  kept alive (``num_workers_soft_limit`` and a long
  ``idle_worker_killing_time_threshold_ms`` in ``_system_config``).
* ``actor`` — each container is a timer of the NM host actor's own event loop (an
  async actor on the NM's Ray node; one entry of the loop's timer heap resolving a
  future, no task per container): thousands of concurrent containers cost no
  process, and a container ending reaches the NM without a Ray call in between.
  The ``cpu`` payload instead runs in a thread of a ``ContainerExecutor`` actor on
  the same Ray node, so it cannot starve the NMs' heartbeats (one process: the
  GIL caps it at one core per Ray node — use ``task`` for real CPU load).

``auto`` (``choose_executor``) picks ``task`` when, on every Ray node, the most
containers that could ever run at once — Σ over its NMs of the most tasks of any
job that fit the NM — is at most ``TASK_WORKERS_PER_CPU`` × the Ray node's CPUs,
and ``actor`` otherwise.  The TSF micro-benchmark (up to 100 containers at once)
on a 2-core machine gets ``actor``; a 4-NM test cluster gets ``task``.

Payloads run until a *deadline*: the NM's launch time + the task's duration ×
time_scale, so the few milliseconds a Ray task or actor call takes to begin do
not lengthen the task.  ``sleep`` sleeps; ``cpu`` spins.  Both return ``(start,
finish)`` wall times read where the payload ran (the NM and its executors share a
Ray node, hence a clock).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import NodeSpec
from rayrm.rm.core.shares import tasks_fit

EXECUTORS = ("auto", "task", "actor")
PAYLOADS = ("sleep", "cpu")
TASK_WORKERS_PER_CPU = 4
#: the longest a ``sleep`` payload of the ``task`` executor sleeps at once (wall seconds): how
#: late a kill (``ray.cancel``) may take effect
KILL_CHECK = 0.05


def payload(deadline: float, kind: str) -> tuple[float, float]:
    """Run a container's payload here until ``deadline``; returns (start, finish) wall times."""
    start = time.time()
    if kind == "cpu":
        x = 0
        while time.time() < deadline:
            for _ in range(1000):
                x += 1
    else:
        # in short sleeps: Ray cancels a running task (the NM killing its container) by raising
        # in its thread between bytecodes, which one long sleep would put off to its end
        while (left := deadline - time.time()) > 0:
            time.sleep(min(left, KILL_CHECK))
    return start, time.time()


async def sleep_until(deadline: float) -> tuple[float, float]:
    """The ``sleep`` payload as a coroutine (the ``ContainerExecutor`` actor)."""
    start = time.time()
    await asyncio.sleep(max(0.0, deadline - start))
    return start, time.time()


def sleep_future(deadline: float) -> asyncio.Future:
    """The ``sleep`` payload in the NM host's own loop, without a task of its own: a future
    that one entry of the event loop's timer heap resolves with (start, finish) at
    ``deadline``.  Cancelling it kills the container (its timer then finds it done)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    start = time.time()
    loop.call_later(max(0.0, deadline - start), _wake_up, fut, start)
    return fut


def _wake_up(fut: asyncio.Future, start: float) -> None:
    if not fut.done():
        fut.set_result((start, time.time()))


@ray.remote(num_cpus=0, max_retries=0)
def run_container(deadline: float, kind: str) -> tuple[float, float]:
    """The ``task`` executor: one container = one Ray task."""
    return payload(deadline, kind)


@ray.remote(num_cpus=0, max_concurrency=100_000)
class ContainerExecutor:
    """The ``actor`` executor's ``cpu`` payloads: async actor tasks burning CPU in threads."""

    def __init__(self):
        self._threads: ThreadPoolExecutor | None = None

    async def run(self, deadline: float, kind: str) -> tuple[float, float]:
        if kind != "cpu":
            return await sleep_until(deadline)
        if self._threads is None:
            self._threads = ThreadPoolExecutor(max_workers=256)
        return await asyncio.get_running_loop().run_in_executor(self._threads, payload, deadline, kind)


@ray.remote(num_cpus=0, max_retries=0)
def _warm(barrier) -> int:
    """Hold a worker until ``barrier`` (the NM host) has seen every warm task arrive."""
    import os  # noqa: PLC0415
    ray.get(barrier.arrive.remote())
    return os.getpid()


class Launcher:
    """Starts container payloads for one NM host (call ``launch`` inside its event loop).

    Returns an awaitable per container — an asyncio future (actor executor, sleep) or an
    ObjectRef — that yields (start, finish); ``kill`` cancels it.
    """

    def __init__(self, kind: str, ray_node: str, actor=None):
        self.kind, self.ray_node, self.actor = kind, ray_node, actor
        self._strategy = NodeAffinitySchedulingStrategy(ray_node, soft=False)

    def launch(self, container: int, deadline: float, kind: str):
        name = f"container-{container}"
        if self.kind == "actor":
            if kind == "sleep" or self.actor is None:
                return sleep_future(deadline)
            return self.actor.run.options(name=name).remote(deadline, kind)
        return run_container.options(scheduling_strategy=self._strategy, name=name).remote(deadline, kind)

    @staticmethod
    def kill(handle) -> None:
        if isinstance(handle, asyncio.Future):
            handle.cancel()
        else:
            ray.cancel(handle)

    def warm_tasks(self, barrier, count: int) -> list:
        strategy = NodeAffinitySchedulingStrategy(self.ray_node, soft=False)
        return [_warm.options(scheduling_strategy=strategy).remote(barrier) for _ in range(count)]


def peak_containers(nodes: Iterable[NodeSpec], apps, dims: tuple[str, ...]) -> int:
    """The most containers that could ever run at once on ``nodes``.

    Σ over nodes of max over apps whose constraint admits the node of
    floor(min_r C_mr / d_ir) — an upper bound, since one job rarely fills every node.
    Apps are taken by constraint (a trace has far fewer constraints than jobs), and nodes
    alike but for their name share their term unless a constraint names nodes.
    """
    demands: dict = {}                      # constraint -> the distinct demands of its apps
    for a in apps:
        demands.setdefault(a.constraint, set()).add(a.demand.vector(dims))
    naming = any(c.attr == "node" for con in demands for c in con.clauses)
    fits: dict[tuple, float] = {}           # (capacity, constraint) -> best tasks_fit of its demands
    terms: dict[tuple, int] = {}            # (capacity, attributes) -> the node's term
    total = 0
    for n in nodes:
        cap = n.capacity.vector(dims)
        key = (cap, tuple(sorted(n.attributes.items())))
        term = None if naming else terms.get(key)
        if term is None:
            best = 0.0
            for con, group in demands.items():
                if con.matches(n.name, n.attributes):
                    fit = fits.get((cap, con))
                    if fit is None:
                        fit = fits[(cap, con)] = max(tasks_fit(cap, d) for d in group)
                    best = max(best, fit)
            term = terms[key] = int(best)
        total += term
    return total


def choose_executor(requested: str, peaks: dict[str, int], cpus: dict[str, float]) -> str:
    """``task`` or ``actor`` for ``requested`` (auto/task/actor); see the module docstring."""
    if requested not in EXECUTORS:
        raise InputError(f"unknown executor '{requested}' (choose from {', '.join(EXECUTORS)})")
    if requested != "auto":
        return requested
    fits = all(peaks[n] <= TASK_WORKERS_PER_CPU * max(1.0, cpus.get(n, 1.0)) for n in peaks)
    return "task" if fits else "actor"


def make_container_executor(ray_node: str):
    """An ``actor``-executor ContainerExecutor pinned to ``ray_node``."""
    return ContainerExecutor.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(ray_node, soft=False)).remote()
