"""What a lost or returning NodeManager, ApplicationMaster or ResourceManager means: the
fault rules, written once for both drivers.

The RM service (``rayrm.rm.service``) applies them to the replay on the wall clock; the
simulator (``rayrm.rm.sim``) to its model of the replay on a virtual clock.  Nothing here
reads a clock: every duration comes in as an argument, and each driver says how it writes
one (``wall_seconds``: "1.250s"; ``trace_seconds``: "20 trace s").  As SimPy's real-time
environment differs from its virtual one only in ``step()``, the two drivers differ only
in their clock and in how they learn that something died (a heartbeat that stops, an
actor call that fails; an event on the simulator's heap).

**Expiry** (YARN's NMLivelinessMonitor and AMLivelinessMonitor).  An NM silent for
E_nm and an AM attempt silent for E_am are lost, with

    E = max(k · h, floor)        (``expiry``)

k the config's ``nm_expiry`` / ``am_expiry`` heartbeats of h seconds, and the floor one
wall second (``MIN_EXPIRY_WALL``; on the trace clock 1 / ``time_scale``).

**A lost NM.**  The node leaves the scheduler and each container it had meets the fate of
``fate_on_node_lost``: one the AM never received is *withdrawn* (its resources go back
and its task is asked for again, as though never placed); one the AM received and never
started is *reported* lost to the AM, which asks again; a running one is *lost*: its
attempt ends ``lost`` and its task is asked for again as a new attempt.  An NM that comes
back registers (``on_nm_registers``): one declared lost *rejoins* empty; one the RM never
declared lost *reconciles* — whatever it no longer runs is lost (``not_reported``,
``NOT_REPORTED``).  An NM host lost is every NM it runs lost at once, in one batch;
restarted, it registers them again and they rejoin.

**A lost AM** (its process, or its whole host).  When the attempt expires or its host
is declared dead, the attempt FAILS (``attempt_fails``: why, and what
``after_failed_attempt`` decides): the next attempt is launched — keeping the app's
finished tasks and running containers (YARN's work-preserving AM restart; each container
meets ``on_attempt_failed``: running ones are kept, those never delivered go to the next
attempt, those it received and never started are withdrawn) — or, once ``max_attempts``
attempts failed, the app fails and its containers are killed.  An attempt lost with its AM
host is not held against ``max_attempts`` (as in YARN, an AM container lost with its node
does not count).  The next attempt registering is ``am_registered``, one registering again
for a restarted RM ``am_resync`` (``on_am_registers``).

**A container delivered and never reported running** for ``ALLOCATION_EXPIRIES`` NM
expiries (counted from its allocation or the RM's last recovery, whichever is later) is
released and reported lost to its AM (fate *reported*), which asks again; an NM that
reports it running later is told to kill it.

**A restarted RM** (``Resync``).  The RM rebuilds its state and tells every NM and every
registered AM attempt to RESYNC (``Resync.restart``): each registers again.  Its liveness clocks start again at
the resync (its own downtime is nobody's silence); a lost NM or a failed attempt stops
being waited for; ``rm_resynced`` is logged once nobody is waited for.

**A partitioned, slow or lossy link** (``LinkFault``, ``link_passage``).  A host whose link
to the RM is cut keeps running — its NMs' containers run on and finish — but no call of
its reaches the RM and no answer reaches it: the RM hears silence, and past the host's
expiry (``silent_host_expiry``) the host's NMs are LOST and its AM attempts fail as above.
The host repeats each call with the same request id until the link heals (the RM answers a repeated id as it did
the first time).  On healing an NM the RM declared lost is told to RESYNC and registers
again (*rejoin*); it reports what it runs and what finished meanwhile, and
``on_late_status`` says what each means: a container the RM gave up that still runs is
killed, and one that finished is ignored and logged (``ignored_finish``), never counted
as its task's finish — the task was asked for again when its node was lost.  An old
attempt's calls are refused (fenced); an attempt a restarted RM waits for registers again
first (``on_attempt_call``: RESYNC).  A slow link adds its delay to every call; a lossy
one loses each call, or its answer, with probability P.

**Fencing.**  A call of an AM attempt is answered by ``on_attempt_call``: applied if the
attempt is the app's current, registered one; RESYNC if it must register (again) first;
FENCED (refused, ``fenced_detail``) if a later attempt replaced it; SHUTDOWN once the app
ended.  The simulator's stale callers are the attempts behind a cut link, heard again at
the heal.  A call for a node another host runs is refused too (the service's alone: the
simulator's NMs have no hosts to confuse).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable

#: the detail of a task attempt lost because its NM registered again without it
NOT_REPORTED = "not reported by its NM when it registered again"
#: a crashed NM restarts (empty) and registers again this many NM expiries after its crash
NM_RESTART_EXPIRIES = 2
#: a container delivered to its AM and not reported running for this many NM expiries is
#: released and reported lost to its AM, which asks again (YARN's ContainerAllocationExpirer):
#: its launch, or the NM that ran it, was lost where the RM could not see (an NM that crashed
#: while the RM was down)
ALLOCATION_EXPIRIES = 3


def expiry(beats: int, interval: float, floor: float) -> float:
    """E = max(beats · interval, floor): the silence after which an NM or an AM is lost."""
    return max(beats * interval, floor)


def wall_seconds(x: float) -> str:
    """A duration on the replay's wall clock, as its events write it."""
    return f"{x:.3f}s"


def trace_seconds(x: float) -> str:
    """A duration on the simulator's trace clock, as its events write it."""
    return f"{round(x, 6):g} trace s"


# ----- NodeManagers --------------------------------------------------------------------

class Fate(enum.Enum):
    """What becomes of a container when its node is lost (module docstring)."""

    WITHDRAWN = "withdrawn"     # the AM never received it: as though never placed
    REPORTED = "reported"       # received, never started: the AM is told it is lost
    LOST = "lost"               # running: its attempt ends lost, its task is asked again


def fate_on_node_lost(delivered: bool, started: bool) -> Fate:
    """The fate of a container on a lost node, by what its AM knew of it."""
    if started:
        return Fate.LOST
    return Fate.REPORTED if delivered else Fate.WITHDRAWN


def nm_lost_detail(silence: float, seconds: Callable[[float], str]) -> str:
    """Why an expired NM is lost: ``no heartbeat for <silence>``."""
    return f"no heartbeat for {seconds(silence)}"


class Registration(enum.Enum):
    """What an NM registering means to the RM (``on_nm_registers``)."""

    REJOIN = "node_join"            # declared lost: it joins again, empty
    RESYNC = "node_resync"          # the restarted RM asked it to register again
    RECONNECT = "node_reconnect"    # its NM restarted unnoticed: reconcile what it runs


def on_nm_registers(declared_lost: bool, resync_asked: bool) -> Registration:
    """An NM registers: a lost one rejoins; else it reconciles, as a resync when the
    restarted RM asked for one and as a reconnect when the RM never noticed it went."""
    if declared_lost:
        return Registration.REJOIN
    return Registration.RESYNC if resync_asked else Registration.RECONNECT


def nm_registered_detail(reported: int) -> str:
    """The detail of an NM that resyncs or reconnects: how many containers it reported."""
    return f"{reported} containers reported"


def not_reported(verdict: Registration, running, reported) -> list:
    """What an NM registering loses: nothing when it rejoins (its containers were lost with
    it), else each container the RM has RUNNING there (``running``, ids) that the NM does
    not report (``reported``, ids): its attempt ends lost (``NOT_REPORTED``) and its task
    is asked for again.  The ids, in ``running``'s order."""
    if verdict is Registration.REJOIN:
        return []
    return [cid for cid in running if cid not in reported]


# ----- ApplicationMasters ----------------------------------------------------------------

def am_expired_detail(attempt: int, launching: bool, silence: float, seconds: Callable[[float], str]) -> str:
    """Why an expired attempt fails: it was silent, or it never registered, for ``silence``."""
    what = "never registered" if launching else "silent"
    return f"attempt {attempt} {what} for {seconds(silence)}"


def am_host_lost_detail(attempt: int, why: str) -> str:
    """Why an attempt fails with its AM host: ``attempt k: <why>``."""
    return f"attempt {attempt}: {why}"


@dataclass(frozen=True)
class AttemptOutcome:
    """After a failed attempt: the app's attempt numbers, and why the app failed ("" if it did not)."""

    attempt: int
    uncounted: int
    failed: str = ""


def after_failed_attempt(attempt: int, uncounted: int, counted: bool, max_attempts: int) -> AttemptOutcome:
    """Attempt ``attempt`` failed; ``uncounted`` earlier ones were lost with their AM host.

    Counted failures are attempt − uncounted (this one too unless ``counted`` is False);
    when they reach ``max_attempts`` the app fails ("c of m attempts failed"), else
    attempt + 1 is launched.
    """
    if not counted:
        uncounted += 1
    failures = attempt - uncounted
    if failures >= max_attempts:
        return AttemptOutcome(attempt, uncounted, f"{failures} of {max_attempts} attempts failed")
    return AttemptOutcome(attempt + 1, uncounted)


@dataclass(frozen=True)
class AttemptFailure:
    """An attempt failed: ``why`` (the ``am_expired`` detail) and what follows."""

    why: str
    outcome: AttemptOutcome

    @property
    def launch(self) -> str:
        """The ``am_launch`` detail of the next attempt ("" when the app fails instead)."""
        return "" if self.outcome.failed else f"attempt {self.outcome.attempt}"


def attempt_fails(attempt: int, uncounted: int, max_attempts: int, *, launching: bool = False,
                  silence: float = 0.0, seconds: Callable[[float], str] = wall_seconds,
                  host_lost: str | None = None) -> AttemptFailure:
    """Attempt ``attempt`` fails: it expired (silent, or never registered when
    ``launching``, for ``silence``; counted against ``max_attempts``) or was lost with its
    AM host (``host_lost``: why the host died; not counted).  What follows is
    ``after_failed_attempt``'s; the caller keeps ``outcome.uncounted`` and, unless the app
    failed, makes ``outcome.attempt`` current and launches it."""
    why = am_expired_detail(attempt, launching, silence, seconds) if host_lost is None \
        else am_host_lost_detail(attempt, host_lost)
    return AttemptFailure(why, after_failed_attempt(attempt, uncounted, host_lost is None, max_attempts))


def am_host_died(host: str, cause: str = "") -> str:
    """Why an AM host's attempts fail with it: ``AM host <host> died`` and the cause if known."""
    return f"AM host {host} died" + (f" ({cause})" if cause else "")


class Handover(enum.Enum):
    """What becomes of an app's container when its attempt fails (YARN's work-preserving
    AM restart, ``on_attempt_failed``)."""

    KEPT = "kept"                   # running: it runs on, and the next attempt takes it over
    TAKEN_OVER = "taken_over"       # allocated, not yet delivered: the next attempt receives it
    WITHDRAWN = "withdrawn"         # delivered, never started: only the failed attempt knew its task


def on_attempt_failed(delivered: bool, started: bool) -> Handover:
    """The handover of a container whose app's attempt failed, by what that attempt knew:
    a running one is kept, one it never received goes to the next attempt, and one it
    received and did not start is withdrawn (killed if it ever starts) and asked for again."""
    if started:
        return Handover.KEPT
    return Handover.WITHDRAWN if delivered else Handover.TAKEN_OVER


class AmRegistration(enum.Enum):
    """What an AM attempt registering means (``on_am_registers``)."""

    LAUNCHED = "am_registered"      # the attempt the RM launched registers for the first time
    RESYNC = "am_resync"            # a running attempt registers again for the restarted RM


def on_am_registers(launching: bool) -> AmRegistration:
    """An attempt registers: the one the RM launched, or one registering again after a resync."""
    return AmRegistration.LAUNCHED if launching else AmRegistration.RESYNC


class AttemptCall(enum.Enum):
    """The RM's answer to a call of an AM attempt (``on_attempt_call``); the values are
    the protocol's actions."""

    CURRENT = "normal"              # the app's current, registered attempt: the call is applied
    RESYNC = "resync"               # current, but to register (again) first
    FENCED = "fenced"               # an attempt another replaced: refused
    SHUTDOWN = "shutdown"           # the app has ended


def on_attempt_call(done: bool, attempt: int, current: int, registered: bool) -> AttemptCall:
    """A call of attempt ``attempt`` of an app whose current attempt is ``current``
    (``registered``: it registered and no restarted RM waits for it again)."""
    if done:
        return AttemptCall.SHUTDOWN
    if attempt != current:
        return AttemptCall.FENCED
    return AttemptCall.CURRENT if registered else AttemptCall.RESYNC


def fenced_detail(what: str, attempt: int, current: int) -> str:
    """Why a call of a stale attempt is refused (``fenced``)."""
    return f"{what} from attempt {attempt}; the current attempt is {current}"


def am_registered_detail(attempt: int, finished: int, running: int) -> str:
    """An attempt registers (or registers again): what it takes over."""
    return f"attempt {attempt}: {finished} tasks finished, {running} running"


# ----- the ResourceManager's restart --------------------------------------------------------

@dataclass(slots=True)
class Resync:
    """Who a restarted RM waits for, and when everyone has registered again.

    ``epoch`` counts recoveries; ``since`` is the last one's time; ``waiting`` holds the
    ("node", name) and ("app", id) keys of NMs and AM attempts still to register again,
    None when the RM waits for nobody (before any restart, and once ``rm_resynced`` is
    logged).  ``seconds`` writes durations on the driver's clock.
    """

    seconds: Callable[[float], str] = wall_seconds
    epoch: int = 0
    since: float = 0.0
    waiting: set[tuple[str, str]] | None = field(default=None)

    def lost(self) -> None:
        """The RM died: until it has recovered it waits for nobody."""
        self.waiting = None

    def recovered(self, now: float, detail: str) -> str:
        """The RM has rebuilt its state at ``now``: the ``rm_recovered`` detail."""
        self.epoch += 1
        self.since = now
        self.waiting = None
        return f"epoch {self.epoch}; {detail}".rstrip("; ")

    def wait_for(self, keys) -> None:
        """The NMs and attempts that must register again (("node", n) / ("app", a) keys)."""
        self.waiting = set(keys)

    def restart(self, nodes, apps) -> None:
        """The restarted RM asks every NM it counts alive (``nodes``, names) and every
        registered current attempt (``apps``, ids of apps not ended whose attempt is not
        being launched: a launching one registers anyway) to register again, and waits
        for each until it does, is lost or ends."""
        self.wait_for([("node", n) for n in nodes] + [("app", a) for a in apps])

    def asked(self, key: tuple[str, str]) -> bool:
        """Whether ``key`` is still to register again."""
        return self.waiting is not None and key in self.waiting

    def registered(self, key: tuple[str, str]) -> None:
        """``key`` registered again, was lost or ended: it is waited for no more."""
        if self.waiting is not None:
            self.waiting.discard(key)

    def check(self, now: float) -> str | None:
        """The ``rm_resynced`` detail when the RM waited and now waits for nobody, else None."""
        if self.waiting is None or self.waiting:
            return None
        self.waiting = None
        return (f"epoch {self.epoch}: every NM and AM registered again "
                f"{self.seconds(now - self.since)} after recovery")


# ----- links: partitions, slow and lossy links ------------------------------------------------

@dataclass(frozen=True)
class LinkFault:
    """A fault on the link between one host and the RM from ``start`` to ``end`` (the
    driver's clock): ``partition`` (nothing passes), ``slow`` (each call ``delay`` seconds
    longer) or ``drop`` (each call or its answer lost with probability ``p``)."""

    kind: str
    start: float
    end: float
    delay: float = 0.0
    p: float = 0.0

    def active(self, now: float) -> bool:
        return self.start <= now < self.end


@dataclass(frozen=True)
class Passage:
    """What the link does to one call sent at ``now``: it is held ``delay`` seconds, then
    ``lost`` ("request": never reaches the RM; "answer": applied, its answer lost; "": not
    lost); a lost call is sent again no sooner than ``retry_at``."""

    delay: float = 0.0
    lost: str = ""
    retry_at: float = 0.0


def link_passage(faults, now: float, draw: float, leg_draw: float) -> Passage:
    """The passage of a call sent at ``now`` through ``faults`` (LinkFaults).

    A partition loses it until it heals (retry_at = its end); slow links add their
    delays, Σ delay; drop links lose it with probability 1 − Π(1 − p) (``draw`` uniform in
    [0, 1)), the request or the answer alike (``leg_draw`` < 1/2: the answer)."""
    active = [f for f in faults if f.active(now)]
    cut = [f.end for f in active if f.kind == "partition"]
    if cut:
        return Passage(0.0, "request", max(cut))
    delay = sum(f.delay for f in active if f.kind == "slow")
    keep = 1.0
    for f in active:
        if f.kind == "drop":
            keep *= 1.0 - f.p
    if draw < 1.0 - keep:
        return Passage(delay, "answer" if leg_draw < 0.5 else "request", now + delay)
    return Passage(delay)


def silent_host_expiry(expiry_: float, host_silence: float) -> float:
    """The silence after which the RM loses what a host runs when the whole host goes
    silent (it hung, or its link is cut): ``host_silence`` expiries (``run.host_silence``;
    rm/service/liveness.py), since a host that sends nothing may be slow, not dead."""
    return host_silence * expiry_


def partition_outlasts(duration: float, expiry_: float) -> bool:
    """Whether a partition of ``duration`` makes the RM lose what is behind it: it hears
    silence for the whole partition, so when duration > the expiry."""
    return duration > expiry_


class LateStatus(enum.Enum):
    """What a status for a container the RM already gave up (lost, released) means."""

    KILL = "cleanup"                    # it still runs: the NM is told to kill it
    IGNORED = "ignored_finish"          # it finished: logged, never counted as its task's finish
    ACK = "ack"                         # it ended otherwise: acknowledged, nothing else


def on_late_status(running: bool, finished: bool) -> LateStatus:
    """A reported status of a container the RM gave up (``on_late_status`` in the module doc)."""
    if running:
        return LateStatus.KILL
    return LateStatus.IGNORED if finished else LateStatus.ACK


def late_status_detail(late: LateStatus, state: str) -> str:
    """The detail of a late status's event (``cleanup`` or ``ignored_finish``) for a
    container the RM holds in ``state``."""
    if late is LateStatus.KILL:
        return f"the NM runs a container the RM holds {state}"
    return f"finished after the RM gave it up ({state})"
