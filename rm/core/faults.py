"""Fault specs for ``rayrm replay --fault SPEC`` and the config's ``faults:`` list.

::

    kill-nm:NODE@T         the NodeManager NODE crashes at trace time T: its containers die
                           and it stops heartbeating; the RM finds out by heartbeat expiry
                           (nm_expiry heartbeats); the NM restarts empty after twice that
                           and registers again
    kill-nm-host:I@T       the NodeManager host actor nm-I dies (every NM it runs); Ray
                           restarts it, the driver sees it die and declares its NMs lost,
                           and they register again
    kill-am-host:I@T       the ApplicationMaster host actor am-I dies (every AM it runs); Ray
                           restarts it, the RM fails those attempts (not counted against
                           max_attempts) and launches new ones there, which keep their
                           apps' finished tasks and running containers
    kill-am:APP@T          APP's ApplicationMaster crashes (its memory is lost, its
                           containers run on); the RM finds out by AM expiry and starts
                           the next attempt (run.max_attempts)
    kill-rm@T              the ResourceManager actor is killed; Ray restarts it and it
                           recovers from its snapshot and journal; NMs and AMs RESYNC
    kill-ray-node:I@T      Ray node I (0 is the driver's node, which cannot be killed) loses
                           its raylet: every NM host there dies and its NMs are lost;
                           needs a multi-node cluster (--address, or ray.cluster_utils)
    stall-rm:SECONDS@T     the ResourceManager's loop blocks for SECONDS wall seconds (a long
                           GC pause, a slow disk); calls queue meanwhile.  The RM counts
                           only silence it could have heard, so no NM is lost and no AM
                           expires because of it (rm/service/liveness.py)
    partition-nm-host:I@T+D  NM host nm-I stays up, its containers run on, but for D trace
                           seconds no call of its reaches the RM and no answer reaches it;
                           past the expiry its NMs are LOST (their tasks asked for again); on
                           healing they register again and kill what the RM gave up
    partition-am-host:I@T+D  the same for AM host am-I: past the AM expiry its attempts are
                           fenced and new ones start; the old attempts' calls are refused
    slow-nm-host:I@T+D:MS  every call of NM host nm-I takes MS wall milliseconds longer
    slow-am-host:I@T+D:MS  the same for AM host am-I
    drop:P@T+D             each call of any host to the RM is lost with probability P (the
                           call or its answer); the host repeats it with the same request id

T and D are in trace seconds (T >= 0, D > 0).  Instead of a time T, a fault may wait for an
event of the run (``TRIGGERS``): ``@EVENT`` fires it at the first such event, ``@EVENT+S``
S trace seconds after it (S >= 0), e.g. ``kill-rm@preempt_warned+1``; a lasting fault then
takes its duration after that: ``partition-nm-host:0@node_lost+30`` from the event,
``partition-nm-host:0@node_lost+2+30`` from 2 s after it.  It is injected at most once, and
not at all if the event never comes.  What a partition, a slow or a lossy link
means is ``rayrm.rm.core.fault_rules`` (``LinkFault``).  ``parse_fault`` checks the form;
``check_targets`` that NODE and APP exist in the config; the replay checks
Ray-node and host indexes against the cluster it runs on.  Errors are one-line
``InputError``s.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from rayrm.rm.core.errors import InputError

#: kind -> what its target names (None: no target)
KINDS = {"kill-nm": "NODE", "kill-nm-host": "INDEX", "kill-am": "APP", "kill-rm": None,
         "kill-ray-node": "INDEX", "stall-rm": "SECONDS", "kill-am-host": "INDEX",
         "partition-nm-host": "INDEX", "partition-am-host": "INDEX", "slow-nm-host": "INDEX",
         "slow-am-host": "INDEX", "drop": "P"}
#: kinds that last D trace seconds (``@T+D``), and those that also take ``:MS``
LASTING = ("partition-nm-host", "partition-am-host", "slow-nm-host", "slow-am-host", "drop")
SLOW = ("slow-nm-host", "slow-am-host")
#: the kinds on an NM host's and on an AM host's index
NM_HOST_KINDS = ("kill-nm-host", "partition-nm-host", "slow-nm-host")
AM_HOST_KINDS = ("kill-am-host", "partition-am-host", "slow-am-host")
EXAMPLE = ("e.g. kill-nm:n30@60, kill-am:job2@50, kill-rm@100, kill-ray-node:1@30, "
           "partition-nm-host:0@40+30, slow-am-host:0@10+20:50, drop:0.1@0+60, kill-rm@preempt_warned+1")
#: the events a fault may wait for (``@EVENT[+S]``): the first row of that kind in events.csv,
#: logged alike by the replay's RM and the simulator
TRIGGERS = {"preempt_warned": "a container is warned of its preemption",
            "node_lost": "an NM is declared LOST (or a node leaves, as the trace says)",
            "am_expired": "an ApplicationMaster attempt fails",
            "rm_recovered": "a restarted ResourceManager serves again"}
_FORM = re.compile(r"^(?P<kind>[a-z-]+)(?::(?P<target>[^@]*))?@(?P<time>[^+]*)"
                   r"(?:\+(?P<dur>[^:]*))?(?::(?P<ms>.*))?$")


def _positive_number(text: str) -> bool:
    try:
        return math.isfinite(float(text)) and float(text) > 0
    except ValueError:
        return False


@dataclass(frozen=True)
class Fault:
    """One fault to inject: ``kind`` at trace time ``time`` on ``target``; with ``after``
    (an event of ``TRIGGERS``) ``delay`` trace seconds after the first such event, its
    ``time`` infinite until then (``fired``)."""

    kind: str
    target: str
    time: float
    text: str
    duration: float = 0.0     # trace seconds a partition, slow or lossy link lasts
    ms: float = 0.0           # wall milliseconds a slow link adds to each call
    after: str = ""           # the event it waits for ("": none, it is due at ``time``)
    delay: float = 0.0        # trace seconds from that event to the fault

    def fired(self, at: float) -> "Fault":
        """The fault its event, seen at trace time ``at``, makes due: at ``at + delay``."""
        return replace(self, time=at + self.delay)

    @property
    def index(self) -> int:
        return int(self.target)

    @property
    def seconds(self) -> float:
        return float(self.target)

    @property
    def end(self) -> float:
        """When the fault is over (its time for an instant one)."""
        return self.time + self.duration


def _number(spec: str, what: str, text: str | None) -> float:
    if text is None or not text.strip():
        raise InputError(f"fault {spec!r}: missing {what}")
    try:
        x = float(text)
    except ValueError:
        raise InputError(f"fault {spec!r}: {what} must be a number, got {text!r}") from None
    if not math.isfinite(x):
        raise InputError(f"fault {spec!r}: {what} must be a finite number, got {text!r}")
    return x


def _lasting(spec: str, kind: str, dur: str | None, ms: str | None) -> tuple[float, float]:
    """The duration D (and MS of a slow link) of a lasting fault; errors say what is wrong."""
    form = f"{kind}:I@T+D:MS" if kind in SLOW else ("drop:P@T+D" if kind == "drop" else f"{kind}:I@T+D")
    if dur is None:
        raise InputError(f"fault {spec!r}: {kind} needs a duration (write {form})")
    d = _number(spec, "the duration after '+' (trace seconds)", dur)
    if d <= 0:
        raise InputError(f"fault {spec!r}: the duration must be > 0 trace seconds, got {dur!r}")
    if kind not in SLOW:
        if ms is not None:
            raise InputError(f"fault {spec!r}: {kind} takes no ':MS' (write {form})")
        return d, 0.0
    x = _number(spec, "the delay after the last ':' (wall milliseconds)", ms)
    if x <= 0:
        raise InputError(f"fault {spec!r}: the delay must be > 0 wall milliseconds, got {ms!r}")
    return d, x


def _trigger(spec: str, kind: str, event: str, dur: str | None) -> tuple[float, str | None]:
    """``@EVENT[+S]`` (a lasting fault's ``+D`` after it): the delay S and what is left, D."""
    if event not in TRIGGERS:
        raise InputError(f"fault {spec!r}: the time after '@' must be a number of trace seconds or an event "
                         f"to wait for ({', '.join(TRIGGERS)}), got {event!r}")
    parts = [] if dur is None else dur.split("+")
    lasting = kind in LASTING
    if len(parts) > 1 + lasting or (lasting and not parts):
        form = f"{kind}{':' + KINDS[kind] if KINDS[kind] else ''}@{event}" + ("[+S]+D" if lasting else "[+S]")
        raise InputError(f"fault {spec!r}: write {form} (S: trace seconds after the event)")
    delay = parts.pop(0) if len(parts) > lasting else None
    s = 0.0 if delay is None else _number(spec, "the delay after the event (trace seconds)", delay)
    if s < 0:
        raise InputError(f"fault {spec!r}: the delay after {event} must be >= 0 trace seconds, got {delay!r}")
    return s, (parts[0] if parts else None)


def parse_fault(text: str) -> Fault:
    """A Fault from ``KIND[:TARGET]@T`` (or ``@EVENT[+S]``, module docstring); raises
    InputError saying what is wrong."""
    spec = str(text).strip()
    m = _FORM.match(spec)
    if not m:
        raise InputError(f"cannot read fault {spec!r}: write KIND[:TARGET]@T ({EXAMPLE})")
    kind, target, when = m["kind"], (m["target"] or "").strip(), m["time"].strip()
    if kind not in KINDS:
        raise InputError(f"unknown fault kind {kind!r} in {spec!r} (choose from {', '.join(KINDS)})")
    want = KINDS[kind]
    if want is None and m["target"] is not None:
        raise InputError(f"fault {spec!r}: {kind} takes no target (write {kind}@T)")
    if want is not None and not target:
        raise InputError(f"fault {spec!r}: {kind} needs a {want} (write {kind}:{want}@T)")
    if want == "INDEX" and not target.isdigit():
        raise InputError(f"fault {spec!r}: the {kind} index must be a whole number >= 0, got {target!r}")
    if want == "SECONDS" and not _positive_number(target):
        raise InputError(f"fault {spec!r}: {kind} needs a positive number of wall seconds, got {target!r}")
    if want == "P" and not 0 <= _number(spec, "the probability P", target) <= 1:
        raise InputError(f"fault {spec!r}: the probability must be in [0, 1], got {target!r}")
    event, delay, dur = "", 0.0, m["dur"]
    if when[:1].isalpha():
        event = when
        delay, dur = _trigger(spec, kind, event, dur)
    duration, ms = _lasting(spec, kind, dur, m["ms"]) if kind in LASTING else (0.0, 0.0)
    if kind not in LASTING and (dur is not None or m["ms"] is not None):
        raise InputError(f"fault {spec!r}: {kind} is instant and takes no '+D' (write {kind}"
                         f"{':' + want if want else ''}@T)")
    if event:
        return Fault(kind, target, math.inf, spec, duration, ms, after=event, delay=delay)
    try:
        t = float(when)
    except ValueError:
        raise InputError(f"fault {spec!r}: the time after '@' must be a number of trace seconds or an event "
                         f"to wait for ({', '.join(TRIGGERS)}), got {when!r}") from None
    if not math.isfinite(t) or t < 0:
        raise InputError(f"fault {spec!r}: the time must be >= 0 trace seconds, got {when!r}")
    return Fault(kind, target, t, spec, duration, ms)


def check_targets(faults: list[Fault], nodes: set[str], apps: set[str]) -> None:
    """Every NODE and APP named must exist in the config."""
    for f in faults:
        if f.kind == "kill-nm" and f.target not in nodes:
            raise InputError(f"fault {f.text!r}: no node named {f.target!r} in the cluster")
        if f.kind == "kill-am" and f.target not in apps:
            raise InputError(f"fault {f.text!r}: no job named {f.target!r} in the workload")


def parse_faults(specs, nodes: set[str], apps: set[str], where: str | None = None) -> list[Fault]:
    """Parse and check a list of specs; errors name ``where[i]`` (e.g. the config field)."""
    out = []
    for i, spec in enumerate(specs):
        try:
            f = parse_fault(spec)
            check_targets([f], nodes, apps)
        except InputError as e:
            raise e.at(field=f"{where}[{i}]" if where else None) from None
        out.append(f)
    return sorted(out, key=lambda f: f.time)


def check_cluster(faults: list[Fault], ray_nodes: int, nm_hosts: int, am_hosts: int = 1) -> None:
    """Indexes against the Ray cluster the replay runs on (``ray_nodes`` nodes, ``nm_hosts``
    NM hosts, ``am_hosts`` AM hosts)."""
    for f in faults:
        if f.kind == "kill-ray-node":
            if ray_nodes < 2:
                raise InputError(f"fault {f.text!r}: kill-ray-node needs a multi-node Ray cluster and this "
                                 f"one has 1 node; join one started with `ray start` (--address), or "
                                 f"build one with ray.cluster_utils.Cluster")
            if f.index == 0:
                raise InputError(f"fault {f.text!r}: Ray node 0 is the driver's node (it runs the RM "
                                 f"and the AMs); pick 1..{ray_nodes - 1}")
            if f.index >= ray_nodes:
                raise InputError(f"fault {f.text!r}: the Ray cluster has {ray_nodes} nodes (0..{ray_nodes - 1})")
    check_hosts(faults, nm_hosts, am_hosts, "the replay")


def check_hosts(faults: list[Fault], nm_hosts: int, am_hosts: int, who: str = "the run") -> None:
    """Host indexes against ``nm_hosts`` NM hosts and ``am_hosts`` AM hosts (of ``who``)."""
    for f in faults:
        for kinds, hosts, what in ((AM_HOST_KINDS, am_hosts, "ApplicationMaster"), (NM_HOST_KINDS, nm_hosts,
                                                                                     "NodeManager")):
            if f.kind in kinds and f.index >= hosts:
                many = f"s (0..{hosts - 1})" if hosts > 1 else " (0)"
                raise InputError(f"fault {f.text!r}: {who} has {hosts} {what} host{many}")


def am_host_of(apps, hosts: int) -> dict[str, int]:
    """Which AM host (0..hosts-1) runs each app's AM: the apps by (submit, app id), dealt
    in turn, the k-th to host k mod ``hosts``.  The replay deals its AM hosts' jobs so
    (rm/runtime/driver.py) and the simulator's kill-am-host follows it (rm/sim/faults.py).
    ``apps``: AppSpecs."""
    n = max(1, int(hosts))
    ordered = sorted(apps, key=lambda a: (a.submit, a.app_id))
    return {a.app_id: k % n for k, a in enumerate(ordered)}


def nm_host_of(config, hosts: int) -> dict[str, int]:
    """Which NM host (0..hosts-1) runs each NM: the config's nodes, then those joining
    later, the k-th to host k mod ``hosts`` — as ``rayrm.nodes.placement.place_nodes``
    deals them over that many unlabelled Ray nodes of equal CPUs (the fewest NMs per CPU,
    ties to the first), the replay's NM host nm-i running the i-th Ray node's NMs."""
    n = max(1, int(hosts))
    names = [s.name for s in config.nodes]
    initial = set(names)
    names += list(dict.fromkeys(e.node for e in config.node_events if e.spec is not None and e.node not in initial))
    return {name: k % n for k, name in enumerate(names)}


def config_faults(config, extra=()) -> list[Fault]:
    """The config's ``faults:`` and the ``extra`` specs (``--fault``), checked against its
    nodes (joining ones too) and jobs, by time."""
    if not config.faults and not extra:
        return []
    nodes = {n.name for n in config.nodes} | {e.node for e in config.node_events if e.spec is not None}
    apps = {j.job_id for j in config.jobs}
    both = parse_faults(list(config.faults), nodes, apps) + parse_faults(list(extra), nodes, apps)
    return sorted(both, key=lambda f: f.time)


def earliest_end(config) -> float:
    """The earliest trace time the config's trace can end: max over jobs of submit + its
    longest task (drawn with the run's seed), a lower bound of the makespan."""
    return max((j.app.submit + float(max(j.task_durations(config.seed), default=0.0)) for j in config.jobs),
               default=0.0)


def check_times(faults: list[Fault], until: float | None, earliest: float) -> list[str]:
    """Faults after the trace's end.  With ``until`` the end is known and a fault at or
    after it is an InputError; else the makespan is known only once the trace has run, and
    a fault after ``earliest`` (the trace cannot end sooner) gets a warning, returned.  One
    waiting for an event has no time yet: it is injected if the event comes in time."""
    warnings = []
    for f in faults:
        if f.after:
            continue
        if until is not None and f.time >= until:
            raise InputError(f"fault {f.text!r}: at trace time {f.time:g}, at or after the end of the run "
                             f"(--until {until:g})")
        if until is None and f.time > earliest:
            warnings.append(f"fault {f.text!r} may come after the trace's end: it can end as early as "
                            f"trace time {earliest:g}, and its makespan is known only once it has run")
    return warnings
