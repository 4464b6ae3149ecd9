"""Messages of the replay's YARN-style protocol (docs/design.md, "The protocol").

Everything that crosses an actor boundary is one of these small immutable
records: the messages that travel once or more per container (statuses, heartbeats,
allocations and their answers) are ``NamedTuple``s, which a process builds and unpickles
in a third of a frozen dataclass's time; the rest are frozen dataclasses.

Every call to the ResourceManager carries ``caller`` (the id of the host actor making
it) and ``request_id`` (increasing per caller); the RM answers a repeated ``(caller,
request_id)`` with the response it gave the first time, so a retried call never
allocates, releases or finishes twice.

    NodeManager host  -> RM   register_nodes([NodeRegistration])     -> [str action]
                              node_heartbeat([NodeHeartbeat], idle, sent, mark) -> [NodeHeartbeatResponse]
                                  (idle: names of NMs with nothing to report; mark: a
                                  HostMark, the host's quiet NMs in one)
    AppMaster host    -> RM   register_apps([AppRegistration])       -> [AppRegistered]
                              allocate([AllocateRequest], sent, mark) -> [AllocateResponse]
                                  (mark: an AppMark, the host's idle AMs in one: those whose
                                  ask is unchanged and that release nothing, answered only when
                                  there is news for them; and how long the call may wait for it)
                              finish_apps([(app, attempt)])           -> [str action]
    AppMaster host    -> NM   start_containers([ContainerLaunch])     -> [str]  ("ok" or why not)
    RM (AM launcher)  -> AM   launch_attempts([(app, attempt)])       -> None

Actions (YARN's NodeAction / AMCommand): ``normal``; ``resync`` — the RM does not
know the caller (it restarted, or the node was declared lost): register again;
``shutdown`` — stop; ``fenced`` — the call came from an attempt that is no longer
current, or from a host that does not own the node, and was refused.

Container tokens (YARN's ContainerToken): every ``Allocation`` carries
``container_token(secret, container, app, node)``, an HMAC under a secret the RM and
the NMs share and the AMs never see; an NM starts a container only when the launch
carries the token of that container, app and node, so an AM can start only the
containers the RM granted to its own app, where the RM placed them.

Every call takes exactly the arguments the RM's state applies and journals (its
handler in the RM's table of calls, ``Call`` in rm/service/calls.py, after ``now``): what only the RM
actor reads travels inside a mark (``HostMark.due``, ``AppMark.wait``), so the journal
can keep the bytes a call arrived as (rm/service/channel.py).

Wall times are ``time.time()`` seconds read by the actor that observed the event;
the RM turns them into trace seconds on the replay's ``TraceClock`` (rm/core/clock.py).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

from rayrm.rm.core.model import AppSpec

NORMAL, RESYNC, SHUTDOWN, FENCED = "normal", "resync", "shutdown", "fenced"

#: the Ray namespace of every rayrm actor (``ray.get_actor("rayrm-rm", namespace=NAMESPACE)``)
NAMESPACE = "rayrm"
RM_NAME = "rayrm-rm"


# Container states as the NM reports them (YARN ContainerState) and how a COMPLETE one ended.
RUNNING, COMPLETE = "RUNNING", "COMPLETE"
FINISHED, KILLED, LOST, FAILED = "finished", "killed", "lost", "failed"
#: how a container the RM preempted ended: killed at its deadline (YARN's ContainerExitStatus.PREEMPTED)
PREEMPTED = "preempted"


@functools.lru_cache(maxsize=16)
def _keyed(secret: bytes) -> "hmac.HMAC":
    """HMAC-SHA256 keyed with ``secret`` and fed nothing yet: a token copies it rather than
    hashing the key again (one RM and its NM hosts use one secret)."""
    return hmac.new(secret, digestmod=hashlib.sha256)


def container_token(secret: bytes, container: int, app: str, node: str) -> str:
    """HMAC-SHA256 of (container, app, node) under ``secret``, 128 bits in hex."""
    mac = _keyed(secret).copy()
    mac.update(f"{container}\x1f{app}\x1f{node}".encode())
    return mac.hexdigest()[:32]


def token_valid(secret: bytes, launch: "ContainerLaunch") -> bool:
    """Whether a launch carries the token the RM issued for its container, app and node."""
    want = container_token(secret, launch.container, launch.app, launch.node)
    return hmac.compare_digest(want, launch.token)


class ContainerStatus(NamedTuple):
    """What an NM knows of one container (YARN ContainerStatus).

    ``launched`` is when the NM started it; ``start`` and ``finish`` are when the
    payload itself began and ended (known once it has ended).  ``exit`` says how a
    COMPLETE container ended: finished, killed (cleanup), lost (its node died) or
    failed (the payload raised).
    """

    container: int
    app: str
    task: int
    attempt: int
    node: str
    state: str
    launched: float
    start: float | None = None
    finish: float | None = None
    exit: str = ""
    detail: str = ""


@dataclass(frozen=True)
class NodeRegistration:
    """An NM introduces itself (YARN RegisterNodeManagerRequest)."""

    node: str
    capacity: Mapping[str, float]
    attributes: Mapping[str, str | float]
    ray_node: str
    host: int
    running: tuple[ContainerStatus, ...] = ()


class NodeHeartbeat(NamedTuple):
    """One NM's heartbeat: container statuses not yet acknowledged (YARN NodeStatus).

    ``refused`` lists launches the NM refused since its last heartbeat (fencing: a
    launch without a valid container token) as (container, app, why), so the RM logs them.
    """

    node: str
    statuses: tuple[ContainerStatus, ...] = ()
    refused: tuple[tuple[int, str, str], ...] = ()


@dataclass(frozen=True)
class HostMark:
    """An NM host's liveness mark: every NM it registered and still runs, except ``dead``,
    is alive as of the call's send time.

    The quiet NMs of a host (most of them at paper scale: 1,000 NMs beating every 20 ms
    wall are 50,000 heartbeats a second, nearly all empty) travel as this one mark, so
    neither the host nor the RM does anything per quiet NM per call.  ``dead`` lists the
    NMs the host knows have stopped (crashed, refused, left) so that the RM stops hearing
    them and expires them as silent; ``beats`` is how many NM heartbeats were due in the
    call (the RM's heartbeat count); ``due``, the earliest wall time one of them was due
    (the RM actor's pace meter, rm/runtime/pace.py; the state does not read it).
    """

    dead: tuple[str, ...] = ()
    beats: int = 0
    due: float = 0.0

    def __post_init__(self):
        if self.beats < 0 or not all(isinstance(n, str) for n in self.dead):
            raise ValueError(f"bad host mark: {self!r}")


@dataclass(frozen=True)
class AppMark:
    """An AM host's idle AMs in one mark: every app whose current attempt the RM knows this
    host runs, except those ``left_out``, asks what it asked last, releases nothing and is
    alive as of the call's send time.

    The AM-side twin of ``HostMark``: at paper scale an AM host runs hundreds of AMs, nearly
    all idle in any one call, so neither the host nor the RM does anything per idle AM per
    call.  ``left_out`` names the host's AMs that are not running as such (crashed, fenced,
    registering, launching), so that the RM stops hearing a crashed one and expires it as
    silent; an idle AM is answered only when the RM has something for it (``AppMasters.notice``).
    ``wait``: how long the RM may hold the call when it has nothing for any AM of it (the
    long poll, rm/runtime/polls.py; the state does not read it).
    """

    left_out: tuple[str, ...] = ()
    wait: float = 0.0

    def __post_init__(self):
        if self.wait < 0 or not all(isinstance(a, str) for a in self.left_out):
            raise ValueError(f"bad app mark: {self!r}")


class NodeHeartbeatResponse(NamedTuple):
    """The RM's answer to one NM: what to kill (``cleanup``, YARN's containersToCleanup: a
    container its app gave up or the RM preempted at its deadline), what it recorded (``ack``)."""

    node: str
    action: str = NORMAL
    cleanup: tuple[int, ...] = ()
    ack: tuple[int, ...] = ()


@dataclass(frozen=True)
class AppRegistration:
    """An AM registers its app (YARN RegisterApplicationMasterRequest).

    ``attempt`` is the attempt the RM launched (1 for the first); attempt numbers are
    the RM's, an AM never makes one up.
    """

    spec: AppSpec
    attempt: int = 1
    ray_node: str = ""        # the Ray node of the AM host registering it (events.csv am_host)


@dataclass(frozen=True)
class AppRegistered:
    """The RM's answer (YARN RegisterApplicationMasterResponse).

    For an attempt after the first, or an attempt registering again after a RESYNC,
    it carries what the app already has (YARN's work-preserving AM restart,
    ``keepContainersAcrossApplicationAttempts``): the tasks that finished, and the
    containers still running (RUNNING statuses) with their tasks.
    """

    app: str
    accepted: bool
    reason: str = ""
    action: str = NORMAL
    attempt: int = 1
    finished_tasks: tuple[int, ...] = ()
    running: tuple[ContainerStatus, ...] = ()


class AllocateRequest(NamedTuple):
    """One AM's heartbeat (YARN AllocateRequest).

    ``ask`` is absolute: the number of tasks the AM still wants containers for,
    counted before it sees this call's answer.  The RM subtracts the containers
    it allocated but has not delivered yet, so an ask never double counts.
    ``releases`` are containers the AM got but does not need.
    """

    app: str
    attempt: int
    ask: int
    releases: tuple[int, ...] = ()


class Allocation(NamedTuple):
    """A container granted to an app (YARN Container): where, and when the RM placed it."""

    container: int
    app: str
    node: str
    host: str            # the NodeManager host to send the launch to
    allocated: float
    token: str = ""


class PreemptionMessage(NamedTuple):
    """The RM will take these containers back (YARN's ``PreemptionMessage`` with a
    ``StrictPreemptionContract``): each (container, deadline), the deadline in trace seconds,
    after which its NM kills it unless it has finished.  The AM is told once per container;
    what it does with the warning is its own affair (YARN's AMs mostly ignore it)."""

    containers: tuple[tuple[int, float], ...]


class AllocateResponse(NamedTuple):
    """The RM's answer to one AM (YARN AllocateResponse); ``preemption``, when the RM is taking
    containers of the app back (``PreemptionMessage``)."""

    app: str
    action: str = NORMAL
    allocated: tuple[Allocation, ...] = ()
    completed: tuple[ContainerStatus, ...] = ()
    preemption: PreemptionMessage | None = None


@dataclass(frozen=True)
class ContainerLaunch:
    """An AM asks an NM to start a granted container for one task attempt.

    ``seconds`` is the wall time the payload runs: the task's duration × time_scale.
    """

    container: int
    app: str
    task: int
    attempt: int
    node: str
    seconds: float
    payload: str = "sleep"
    demand: Mapping[str, float] = field(default_factory=dict)
    token: str = ""
