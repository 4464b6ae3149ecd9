"""What follows a fault, step by step: the recovery sequences, written once and clock-free.

``fault_rules`` says what each event means; this module says which event follows which,
and after how long, as a small state machine per fault.  Each machine is fed the step
that is due and answers with what it decided and the next steps, ``Next(at, step, args)``;
the driver applies the decision to its world and runs each next step at its time.

The decisions are ``fault_rules``' functions, which the RM service calls too:
``nm_lost_detail`` (``nm_expired``), ``on_nm_registers`` (``nm_registers``),
``on_late_status`` (``late_statuses``), ``attempt_fails`` (``am_expired``: why, counted or
not, the next attempt or the app failed), ``on_attempt_call`` (``am_heard``: heard again,
or fenced) and ``Resync`` (``rm_recovered``, ``rm_resync``: who is asked to register again,
who is waited for).  The sequence itself is the simulator's alone
(``rayrm.rm.sim.faults`` runs these machines on its heap): in a Ray replay it is real
processes on the wall clock — the supervisor restarts an NM ``nm_restart_after`` its
crash, the RM's liveness monitor notices a silent NM or attempt (``rm/service/liveness.py``,
its own stalls taken out), the AMLauncher starts the next attempt, which registers at its
host's next call — and these machines model those processes with the replay's durations
(``Timing``), so that a simulation's events fall where a replay's would.

With h the heartbeat interval, E_nm and E_am the expiries (``fault_rules.expiry``) and
R the RM's restart time (``Timing``):

* **An NM crashed** at T (``NodeOutage``, ``nm_crashed``): its containers stop; the RM
  declares it LOST at T + E_nm (``Step.NM_LOST``, unless it came back or the RM restarted
  meanwhile); it restarts empty and registers at T + ``NM_RESTART_EXPIRIES``·E_nm
  (``Step.NM_BACK``: ``fault_rules.on_nm_registers`` says whether it rejoins or
  reconciles).  A container the RM places on it meanwhile is refused; its AM releases it
  one heartbeat later (``Step.RELEASE``) and asks again.
* **An AM crashed** at T (``AttemptOutage``, ``am_crashed``): the attempt fails at
  max(T, since + E_am) (``Step.AM_EXPIRE``; ``fault_rules.after_failed_attempt``): the app
  fails, or the next attempt is launched and registers one heartbeat later
  (``Step.AM_REGISTER``: the AM host's allocate long poll returns within one), takes over
  what was allocated meanwhile and asks again for the tasks lost meanwhile.
* **An NM host or AM host cut off** at T for D (``nm_cut``, ``am_cut``): the host is silent
  as a whole, so what it runs is lost after E_host = host_silence · E
  (``fault_rules.silent_host_expiry``), if D outlasts it: an NM is declared LOST at
  T + E_host while its containers run on unheard, and registers again at T + D, when
  ``late_statuses`` says what becomes of each container the RM gave up
  (``fault_rules.on_late_status``); an attempt fails at T + E_host and its successor's
  launch crosses the link at T + D, registering a heartbeat later.  A shorter cut loses
  nothing: at T + D the RM hears what it missed (``Step.NM_BACK``, ``Step.AM_HEARD``).
* **The RM killed** at T (``rm_killed``): it has rebuilt its state at T + R
  (``Step.RM_RECOVERED``) and every NM and AM registers again at T + R + h
  (``Step.RM_RESYNC``); crashed NMs and AMs are waited for and expire E after the resync
  (the restarted RM's liveness clocks start there).  Until the resync, the calls to the RM
  (``RETRIED``) wait for it and liveness expiries (``EXPIRIES``) are void (``gate``).

A step made stale by a later one (an NM back before its expiry, an RM killed again, an
attempt that registered) carries a token and is dropped when the token no longer matches.
"""

from __future__ import annotations

import enum
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from rayrm.rm.core.fault_rules import (NM_RESTART_EXPIRIES, AttemptCall, AttemptFailure, LateStatus, Registration,
                                       Resync, am_host_died, attempt_fails, fenced_detail, nm_lost_detail,
                                       on_attempt_call, on_late_status, on_nm_registers, partition_outlasts,
                                       silent_host_expiry)


class Step(enum.Enum):
    """A step of a fault's recovery (module docstring)."""

    INJECT = "inject"               # the fault itself
    NM_LOST = "nm_lost"             # the NM expiry: the RM declares the NM LOST
    NM_BACK = "nm_back"             # the NM registers again
    RELEASE = "release"             # the AM releases a container a silent NM would not start
    AM_EXPIRE = "am_expire"         # the AM expiry: the attempt fails
    AM_REGISTER = "am_register"     # the next attempt registers
    AM_HEARD = "am_heard"           # a cut AM host's link heals
    RM_RECOVERED = "rm_recovered"   # the restarted RM has rebuilt its state
    RM_RESYNC = "rm_resync"         # every NM and AM registers again


#: calls to the RM: while it is down they wait for its resync
RETRIED = frozenset({Step.NM_BACK, Step.AM_REGISTER, Step.AM_HEARD, Step.RELEASE})
#: liveness expiries: until the RM has resynchronised they are void (the resync sets them again)
EXPIRIES = frozenset({Step.NM_LOST, Step.AM_EXPIRE})


class Gate(enum.Enum):
    """What a step due while the RM is down becomes (``Recovery.gate``)."""

    RUN = "run"
    RETRY = "retry"                 # sent again at the resync
    VOID = "void"                   # dropped: the resync sets it again


def nm_restart_after(nm_expiry: float) -> float:
    """When a crashed NM restarts and registers, after its crash: ``NM_RESTART_EXPIRIES``·E_nm."""
    return NM_RESTART_EXPIRIES * nm_expiry


@dataclass(frozen=True)
class Timing:
    """The protocol's durations on the driver's clock: heartbeat h, expiries E_nm and E_am,
    the RM's restart R, and ``max_attempts``."""

    beat: float
    nm_expiry: float
    am_expiry: float
    rm_restart: float
    max_attempts: int
    host_silence: float = 1.0     # a host silent as a whole is lost after this many expiries


@dataclass(frozen=True)
class Next:
    """A step to run at ``at`` with ``args``."""

    at: float
    step: Step
    args: tuple = ()


@dataclass(eq=False)
class NodeOutage:
    """An NM the RM cannot hear: since when, what its crash stopped, whether it was declared lost."""

    killed: float             # when it died
    since: float              # since when the RM has not heard from it
    containers: dict          # container id -> the driver's record of the attempt it stopped
    token: int
    expiry: float             # the silence after which the RM declares it lost
    lost: bool = False        # declared LOST by the RM (it registers again later)
    heals: float | None = None   # a cut link: when it heals (its containers run on); None: a crash
    finishes: dict = field(default_factory=dict)   # cut: container id -> when it finishes
    held: dict = field(default_factory=dict)       # cut: container id -> container placed meanwhile
    given_up: dict = field(default_factory=dict)   # cut: container id -> (record, finish) the RM lost


@dataclass(eq=False)
class AttemptOutage:
    """An app whose current attempt has no live, registered AM."""

    since: float              # when the RM last heard of the attempt
    token: int
    expiry: float             # the silence after which the attempt fails
    crashed: bool = True      # the attempt's AM is dead (else: launched, about to register)
    launching: bool = False   # the RM launched this attempt and it has not registered
    held: dict = field(default_factory=dict)   # container id -> container allocated meanwhile
    owed: int = 0             # tasks lost meanwhile, asked for when the next attempt registers
    counted: bool = True      # False: lost with its AM host, not held against max_attempts
    heals: float | None = None   # a cut link: when it heals (a launch reaches the host then)
    cut_attempt: int = 0      # a cut link: the attempt cut off (its calls are fenced once superseded)


@dataclass(frozen=True)
class AttemptFailed:
    """An expired attempt: why it failed and what follows (``fault_rules.attempt_fails``),
    and its successor's registration (None when the app fails)."""

    failure: AttemptFailure
    register: Next | None


@dataclass(frozen=True)
class ResyncPlan:
    """The restarted RM's resync: who registers again now, and the expiries set again."""

    nodes: list[str]          # live NMs that register again
    apps: list[str]           # running attempts that register again
    expiries: list[Next]      # crashed NMs, then crashed AMs, expiring E after the resync


class Recovery:
    """The recovery state machines of one run's faults (module docstring), clock-free.

    ``outages`` and ``down`` hold the NMs and apps being recovered, ``silent`` the NMs the RM
    still counts alive although it cannot hear them, ``attempt`` each app's current attempt
    (1 when absent), ``resync`` the restarted RM's wait.  ``seconds`` writes durations on the
    driver's clock; ``am_host`` maps each app to its AM host's index.
    """

    def __init__(self, timing: Timing, am_host: dict[str, int], seconds: Callable[[float], str]):
        self.timing, self.am_host, self.seconds = timing, am_host, seconds
        self.outages: dict[str, NodeOutage] = {}
        self.silent: set[str] = set()
        self.down: dict[str, AttemptOutage] = {}
        self.attempt: dict[str, int] = {}
        self.uncounted: Counter = Counter()     # app -> attempts lost with their AM host
        self.tokens = itertools.count(1)
        self.rm_token = 0
        self.rm_up = 0.0                         # the RM is down until then
        self.am_crashes = 0
        self.resync = Resync(seconds)

    def gate(self, step: Step, t: float) -> Gate:
        """A step due at ``t``: calls to an RM still down wait for its resync, expiries are void."""
        if t < self.rm_up and step in RETRIED:
            return Gate.RETRY
        if t <= self.rm_up and step in EXPIRIES:
            return Gate.VOID
        return Gate.RUN

    def synced(self, key, t: float) -> str | None:
        """``key`` (("node", n), ("app", a) or None) no longer keeps a restarted RM waiting;
        the ``rm_resynced`` detail when nobody does any more."""
        if key is not None:
            self.resync.registered(key)
        return self.resync.check(t)

    # ----- NodeManagers ---------------------------------------------------------------

    def nm_crashed(self, node: str, t: float, containers: dict) -> list[Next]:
        """The NM of ``node`` died at ``t`` with ``containers``: its expiry and its restart."""
        rec = self.outages[node] = NodeOutage(t, t, containers, 0, self.timing.nm_expiry)
        self.silent.add(node)
        return [self._nm_expiry(node, rec, t), Next(t + nm_restart_after(self.timing.nm_expiry), Step.NM_BACK,
                                                     (node, rec))]

    def nm_cut(self, node: str, t: float, duration: float, containers: dict, finishes: dict) -> list[Next]:
        """The link of ``node``'s NM host is cut at ``t`` for ``duration``; ``containers`` run on
        and finish at ``finishes``.  The whole host is silent, so the NM is declared lost at
        t + E_host, E_host = host_silence · E_nm (``fault_rules.silent_host_expiry``), if the
        cut outlasts it (``fault_rules.partition_outlasts``); it registers again at the heal."""
        expiry = silent_host_expiry(self.timing.nm_expiry, self.timing.host_silence)
        rec = self.outages[node] = NodeOutage(t, t, containers, 0, expiry, heals=t + duration, finishes=finishes)
        self.silent.add(node)
        steps = [self._nm_expiry(node, rec, t)] if partition_outlasts(duration, expiry) else []
        return steps + [Next(t + duration, Step.NM_BACK, (node, rec))]

    def _nm_expiry(self, node: str, rec: NodeOutage, t: float) -> Next:
        rec.since, rec.token = t, next(self.tokens)
        return Next(t + rec.expiry, Step.NM_LOST, (node, rec, rec.token))

    def nm_expired(self, node: str, rec: NodeOutage, token: int, t: float) -> str | None:
        """``Step.NM_LOST``: the node-lost detail when the expiry stands (then it is lost), else None."""
        if self.outages.get(node) is not rec or rec.token != token or rec.lost:
            return None
        self.declare_lost(node, rec)
        return nm_lost_detail(t - rec.since, self.seconds)

    def declare_lost(self, node: str, rec: NodeOutage) -> None:
        """The RM declares ``node`` LOST: it is no longer silent, it is gone.  A cut NM's
        containers run on: the RM gave them up (``late_statuses`` at the heal)."""
        rec.lost = True
        self.silent.discard(node)
        if rec.heals is not None:
            rec.given_up = {cid: (entry, rec.finishes[cid]) for cid, entry in rec.containers.items()}
            rec.held = {}

    @staticmethod
    def late_statuses(rec: NodeOutage, t: float) -> list[tuple[int, tuple, LateStatus]]:
        """A cut NM the RM declared lost registers at ``t``: what it says of each container
        the RM gave up, (id, record, ``fault_rules.on_late_status``): one still running is
        killed, one that finished meanwhile is ignored, never its task's finish."""
        return [(cid, entry, on_late_status(finish > t, finish <= t))
                for cid, (entry, finish) in sorted(rec.given_up.items())]

    def nm_registers(self, node: str, rec: NodeOutage) -> Registration | None:
        """``Step.NM_BACK``: what its registration means (``fault_rules.on_nm_registers``);
        None when the NM left the cluster meanwhile."""
        if self.outages.get(node) is not rec:
            return None
        del self.outages[node]
        verdict = on_nm_registers(rec.lost, self.resync.asked(("node", node)))
        if verdict is not Registration.REJOIN:
            self.silent.discard(node)
        return verdict

    def nm_leaves(self, node: str) -> NodeOutage | None:
        """A recovering NM leaves the cluster for good: its outage if the RM still counts it alive."""
        rec = self.outages.pop(node, None)
        return None if rec is None or rec.lost else rec

    # ----- ApplicationMasters ------------------------------------------------------------

    def am_crashed(self, app: str, t: float, counted: bool = True) -> list[Next]:
        """The AM of ``app`` died at ``t`` (``counted``: against max_attempts): the attempt's
        expiry, or nothing if it had crashed already and the RM has not noticed yet."""
        down = self.down.get(app)
        if down is not None and not counted:
            down.counted = False                     # the RM fails it with its host, uncounted
        if down is not None and down.crashed:
            return []
        self.am_crashes += 1
        if down is None:
            down = self.down[app] = AttemptOutage(t, 0, self.timing.am_expiry, counted=counted)
        down.crashed, down.token = True, next(self.tokens)
        return [Next(max(t, down.since + down.expiry), Step.AM_EXPIRE, (app, down, down.token))]

    def am_cut(self, app: str, t: float, duration: float) -> list[Next]:
        """The link of ``app``'s AM host is cut at ``t`` for ``duration``: its attempt fails at
        t + E_host (host_silence · E_am) if the cut outlasts it, and is heard again at the heal.
        Nothing when the attempt is already being recovered."""
        if app in self.down:
            return []
        expiry = silent_host_expiry(self.timing.am_expiry, self.timing.host_silence)
        down = self.down[app] = AttemptOutage(t, next(self.tokens), expiry, heals=t + duration,
                                              cut_attempt=self.attempt.get(app, 1))
        steps = [Next(t + expiry, Step.AM_EXPIRE, (app, down, down.token))] if partition_outlasts(duration, expiry) \
            else []
        return steps + [Next(t + duration, Step.AM_HEARD, (app, down))]

    def am_heard(self, app: str, down: AttemptOutage, ended: bool) -> tuple[AttemptCall, str]:
        """``Step.AM_HEARD``: the cut attempt's first call after the heal, answered as the
        RM answers any attempt's call (``fault_rules.on_attempt_call``; ``ended``: the app
        has ended): CURRENT when it did not fail meanwhile (its outage ends); RESYNC when
        it did not and an RM restarted meanwhile waits for it (it registers again, then
        goes on); FENCED with the ``fenced`` detail when a later attempt replaced it;
        SHUTDOWN when the app ended."""
        current = self.attempt.get(app, 1)
        if self.down.get(app) is down and not down.launching:
            del self.down[app]                       # it did not fail meanwhile
        verdict = on_attempt_call(ended, down.cut_attempt, current, not self.resync.asked(("app", app)))
        return verdict, fenced_detail("allocate", down.cut_attempt, current) if verdict is AttemptCall.FENCED else ""

    def am_expired(self, app: str, down: AttemptOutage, token: int, t: float) -> AttemptFailed | None:
        """``Step.AM_EXPIRE``: the attempt fails; the next is launched or the app fails."""
        if self.down.get(app) is not down or down.token != token:
            return None
        host_lost = None if down.counted else am_host_died(f"am-{self.am_host[app]}")
        failure = attempt_fails(self.attempt.get(app, 1), self.uncounted[app], self.timing.max_attempts,
                                launching=down.launching, silence=t - down.since, seconds=self.seconds,
                                host_lost=host_lost)
        outcome = failure.outcome
        self.uncounted[app] = outcome.uncounted
        down.counted = True                          # the next attempt counts unless lost so too
        if outcome.failed:
            del self.down[app]
            return AttemptFailed(failure, None)
        self.attempt[app] = outcome.attempt
        down.since, down.crashed, down.launching, down.token = t, False, True, next(self.tokens)
        launched = t if down.heals is None else max(t, down.heals)      # across a cut link: at the heal
        register = Next(launched + self.timing.beat, Step.AM_REGISTER, (app, down, down.token))
        return AttemptFailed(failure, register)

    def am_registers(self, app: str, down: AttemptOutage, token: int) -> bool:
        """``Step.AM_REGISTER``: whether the launched attempt registers now (its outage ends)."""
        if self.down.get(app) is not down or down.token != token:
            return False
        del self.down[app]
        return True

    # ----- the ResourceManager ----------------------------------------------------------

    def rm_killed(self, t: float) -> list[Next]:
        """The RM died at ``t``: its recovery R later and the resync a heartbeat after."""
        self.rm_token = token = next(self.tokens)
        self.resync.lost()
        self.rm_up = t + self.timing.rm_restart + self.timing.beat
        return [Next(t + self.timing.rm_restart, Step.RM_RECOVERED, (token,)),
                Next(self.rm_up, Step.RM_RESYNC, (token,))]

    def rm_recovered(self, token: int, t: float) -> str | None:
        """``Step.RM_RECOVERED``: the ``rm_recovered`` detail, or None if killed again since."""
        if token != self.rm_token:
            return None
        return self.resync.recovered(t, f"state rebuilt {self.seconds(self.timing.rm_restart)} after the RM died "
                                        f"(run.rm_restart)")

    def rm_resync(self, token: int, t: float, nodes, apps) -> ResyncPlan | None:
        """``Step.RM_RESYNC`` with the live ``nodes`` and running ``apps``: the RM asks them
        all to register again (``fault_rules.Resync.restart``); the live NMs and AMs do so at
        once, the silent ones are waited for and expire E from now."""
        if token != self.rm_token:
            return None
        self.resync.restart(nodes, [a for a in apps if a not in self.down or not self.down[a].launching])
        plan = ResyncPlan([], [], [])
        for node in nodes:
            rec = self.outages.get(node)
            if rec is not None and not rec.lost:
                plan.expiries.append(self._nm_expiry(node, rec, t))
            else:
                plan.nodes.append(node)
                self.resync.registered(("node", node))
        for app in apps:
            down = self.down.get(app)
            if down is None:
                plan.apps.append(app)
                self.resync.registered(("app", app))
            elif down.crashed:
                down.since, down.token = t, next(self.tokens)
                plan.expiries.append(Next(t + down.expiry, Step.AM_EXPIRE, (app, down, down.token)))
        return plan
