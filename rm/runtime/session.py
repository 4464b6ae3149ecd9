"""The Ray session a replay runs in: connecting to (or starting) Ray with rayrm's settings
(``connect``), and the actors one replay started (``Session``), killed when it ends.

Used by the replay driver and the ray-native baseline alike.  Ray itself is
imported inside ``connect``: the CLI imports this module without paying for Ray.
"""

from __future__ import annotations

import os

from rayrm.nodes.placement import lost_ray_nodes
from rayrm.rm.core.errors import InputError
from rayrm.rm.service.protocol import NAMESPACE

SYSTEM_CONFIG = {
    # Keep pre-started workers: a container must not pay a worker cold start.
    "num_workers_soft_limit": 1000,
    "idle_worker_killing_time_threshold_ms": 3_600_000,
    # A call on an actor that died fails once Ray has the death's cause, or after this
    # wait (default 1 s): the driver learns that an NM or AM host died from such a call,
    # and at 1,000 nodes 2 x nm_expiry is 2 wall seconds for its NMs to be back.  Here a
    # killed actor's call failed after 1.1-1.9 s by default, 0.5-1.0 s with 100 ms; the
    # callers retry an actor still restarting (ActorUnavailableError) either way.
    "timeout_ms_task_wait_for_death_info": 100,
    # Ray runs workers at nice 15 so that its own daemons stay responsive under batch load;
    # here the workers are the RM, NM and AM hosts, latency-bound services the replay times
    # against the wall clock, and at nice 15 any ordinary process on the machine (the
    # driver, a test suite) takes the CPU from them: the replay's lag spikes.
    "worker_niceness": 0,
}
OBJECT_STORE_BYTES = 100 * 1024 * 1024
START_POLL = 1.0          # wall seconds between two looks at the Ray nodes while actors start


def connect(address: str | None, *, num_cpus: int | None = None) -> bool:
    """Connect to Ray; returns True when this call started a local Ray (shut it down after)."""
    import ray  # noqa: PLC0415
    if ray.is_initialized():
        return False
    kwargs = {"namespace": NAMESPACE, "logging_level": "ERROR", "log_to_driver": True}
    if address:
        _check_reachable(address)
        try:
            ray.init(address=address, **kwargs)
        except ConnectionError as e:
            raise InputError(f"cannot connect to the Ray cluster at {address!r}: {e} (a cluster started with "
                             f"RAY_AUTH_MODE=token needs RAY_AUTH_MODE=token here too, and its token in "
                             f"RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)") from None
        return True
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), object_store_memory=OBJECT_STORE_BYTES,
             include_dashboard=False, _system_config=SYSTEM_CONFIG, **kwargs)
    return True


def _check_reachable(address: str, timeout: float = 3.0) -> None:
    """Fail in seconds, not after Ray's long GCS retries, when HOST:PORT does not answer."""
    import socket  # noqa: PLC0415
    if address in ("auto", "local") or address.startswith(("ray://", "anyscale://")):
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--address must be HOST:PORT or auto, got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise InputError(f"no Ray cluster answers at {address} ({e.strerror or e}); "
                         f"start one with `ray start --head` or use --address auto") from None


class NodeLeft(Exception):
    """A Ray node the replay was placed on left while its actors were starting."""


class Session:
    """The actors of one replay, killed at the end whatever happens."""

    def __init__(self):
        self.actors: list = []
        self.pinned: list = []
        self.nodes: list = []             # the Ray nodes the replay is placed on (get)

    def get(self, refs: list) -> list:
        """``ray.get(refs)`` of the start's calls, but NodeLeft as soon as one of ``nodes``
        is no longer alive: an actor pinned to a node that died waits on Ray's own handling
        of it, which a loaded cluster can draw out well past the death."""
        import ray  # noqa: PLC0415
        waiting = list(refs)
        while waiting:
            _, waiting = ray.wait(waiting, num_returns=len(waiting), timeout=START_POLL)
            if waiting and (gone := lost_ray_nodes(self.nodes)):
                raise NodeLeft(f"Ray node {', '.join(r.node_id[:8] for r in gone)} is no longer alive")
        return ray.get(refs)

    def add(self, actor):
        self.actors.append(actor)
        return actor

    def pin(self, value):
        """``ray.put(value)``, the reference held until the replay ends: a restartable actor
        constructed from it (the RM, NM and AM hosts) can be restarted — Ray re-reads its
        constructor arguments, and large ones live in the object store only while referenced."""
        import ray  # noqa: PLC0415
        ref = ray.put(value)
        self.pinned.append(ref)
        return ref

    def close(self) -> None:
        import ray  # noqa: PLC0415
        for a in reversed(self.actors):
            try:
                ray.kill(a)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors.clear()
        self.pinned.clear()
