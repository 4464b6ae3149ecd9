"""Liveness that counts only silence the RM could have heard.

YARN's NMLivelinessMonitor and AMLivelinessMonitor expire an NM or an AM attempt
silent for ``expiry``.  Measured in wall time, that reads slowness as death: while
the RM's loop is blocked (a long GC pause, a slow disk, the ``stall-rm`` fault) or
overloaded, calls wait in its queue and nobody is heard, and on a busy machine a
host may be slow to send.  At paper scale on two cores this turned overload into
the failure of every app.  Two rules replace it.

**Relative to the host.**  Every NM and AM lives in a host actor that makes the
calls (one in flight at a time), and every heartbeat (``node_heartbeat``,
``allocate``) carries the host's wall time of sending it.  The RM keeps, per host,
the latest such send time (``host_sent``) and, per NM or AM, the send time of the
last call that carried it (``last_sent``).  A host sends each live NM at least
once per heartbeat interval and every active AM in each ``allocate``, so if the
host sent for more than ``expiry`` without one of them, that one is silent: its
host could send it and did not — the NM crashed (``kill-nm``) or the AM did
(``kill-am``) — provided the host also sent ``HOST_CALLS`` heartbeats meanwhile
(after a pause, a host's first call leaves out the NMs not quite due yet).  The RM's slowness (queueing, a stall, long round trips) and a
host slow to send delay every call alike and expire nobody: the times compared
are the host's own.  An NM host carries its quiet NMs in one mark
(``HostMark``: all the NMs it runs but those it knows have stopped), which counts
as carrying each of them; the RM keeps the latest mark per host (``Heard.marked``)
and folds it into the NMs' records before reading or changing them
(``NodeManagers.settle``), so a crashed NM, left out of its host's marks, expires
as above, and the RM does nothing per quiet NM per call.  An AM host carries its idle
AMs the same way (``AppMark``, ``Heard.app_marked``, ``AppMasters.settle``).

**The host itself silent.**  A host that makes no call at all (it hung, or has
nothing active) is judged on the RM's own clock with its stalls taken out.  The
monitor ticks every ``period``; a tick that runs L seconds late means the loop
could run nothing for about L seconds (a queued call waited as long).  With
Stall(t) the total lateness up to wall time t, the silence the RM could have heard
since ``last_seen`` is

    heard(now) = (now − last_seen) − (Stall(now) − Stall(last_seen))

and a caller whose host is also silent expires when heard(now) > expiry and its
host's heard silence exceeds ``host_factor`` × expiry (``HOST_FACTOR`` unless the config's
``run.host_silence`` says otherwise): a host that hung, or whose link is cut (one that
died is noticed at once anyway: the driver holds a call open on it).  The factor
is large because an overloaded host is slow to send, not dead.  An attempt the RM
has launched and that has not registered yet is judged by this rule alone: its
host may be slow to start it.

Plain Python, no Ray and no clock reads.  ``Heard`` is the part of the RM's state that
keeps what it has heard from each host; ``Liveness`` is the actor's, fed
``tick(now, planned)``, and asked ``silent_nodes`` / ``silent_apps``; the state applies
what they return (``expire_nodes`` / ``expire_apps`` with the names, journaled as such).
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field

from rayrm.rm.core.fault_rules import silent_host_expiry

#: a caller whose host is silent too expires only once the host has been silent this many expiries
HOST_FACTOR = 30.0
#: ... and relative to its host only once the host has sent this many heartbeats without it (a live
#: NM is in every call of its NM host, by name or in its mark; an AM in every ``allocate``)
HOST_CALLS = 20


@dataclass(eq=False, slots=True)
class Heard:
    """What the RM has heard from each host (a part of ``ResourceManagerState``).

    Contract: ``host_sent[h]`` is the latest send time among host h's heartbeats and
    allocates (never decreasing), ``host_calls[h]`` how many it has sent, ``caller_seen[h]``
    when the RM last applied any call of h.  An NM or AM record's ``last_sent`` and
    ``last_call`` are ``host_sent`` and ``host_calls`` of the last call that carried it, so
    host_sent − last_sent is how long its host went on sending without it.
    """

    host_sent: dict[str, float] = field(default_factory=dict)
    host_calls: dict[str, int] = field(default_factory=dict)
    caller_seen: dict[str, float] = field(default_factory=dict)
    #: host -> (RM time, send time, call count) of its latest ``HostMark`` not yet folded into
    #: its NMs' records (``NodeManagers.settle``), and the NMs that mark left out
    marked: dict[str, tuple[float, float, int]] = field(default_factory=dict)
    dead: dict[str, frozenset[str]] = field(default_factory=dict)
    #: the same for the AM hosts' ``AppMark``s (``AppMasters.settle``): host -> its latest
    #: mark not yet folded into its apps' records, and the apps that mark left out
    app_marked: dict[str, tuple[float, float, int]] = field(default_factory=dict)
    app_left: dict[str, frozenset[str]] = field(default_factory=dict)

    def call(self, caller: str, sent: float) -> None:
        """A heartbeat or allocate of host ``caller`` sent at ``sent`` (0: not stamped)."""
        if sent:
            self.host_sent[caller] = max(sent, self.host_sent.get(caller, 0.0))
            self.host_calls[caller] = self.host_calls.get(caller, 0) + 1

    def carried(self, rec, caller: str, sent: float) -> None:
        """``rec`` (an NM or AM record) was in a call its host sent at ``sent``."""
        if sent:
            rec.last_sent, rec.last_call = sent, self.host_calls.get(caller, 0)

    def mark(self, caller: str, now: float, sent: float, dead: frozenset[str]) -> None:
        """Host ``caller`` vouched, in a call sent at ``sent``, for all its live NMs but
        ``dead``: as if the call had carried each of them (``carried``), kept as one entry
        until ``NodeManagers.settle`` folds it into the records."""
        self.marked[caller] = (now, sent, self.host_calls.get(caller, 0))
        self.dead[caller] = dead

    def app_mark(self, caller: str, now: float, sent: float, left: frozenset[str]) -> None:
        """AM host ``caller`` vouched, in an allocate sent at ``sent``, for every current attempt
        it runs but ``left``: kept as one entry until ``AppMasters.settle`` folds it in."""
        self.app_marked[caller] = (now, sent, self.host_calls.get(caller, 0))
        self.app_left[caller] = left

    @staticmethod
    def fold(rec, mark: tuple[float, float, int]) -> None:
        """``rec`` (an NM or AM record) was carried by ``mark`` (RM time, send time, its host's
        call count), as ``carried``, unless a later call carried it already.  A mark no later
        than the call that last carried it — or than the host's latest call when its silence
        was restarted (``as_of_host``: registered, launched, restarted) — moves nothing back."""
        seen, sent, calls = mark
        if sent and calls > rec.last_call:
            rec.last_seen, rec.last_sent, rec.last_call = seen, sent, calls
        elif seen > rec.last_seen:
            rec.last_seen = seen

    @staticmethod
    def fresh(marked: dict[str, tuple[float, float, int]], now: float, expiry: float) -> set[str]:
        """The hosts whose latest mark (``marked`` or ``app_marked``) came within ``expiry``:
        nothing it covers is silent."""
        return {h for h, (seen, _, _) in marked.items() if now - seen <= expiry}

    def as_of_host(self, rec, host: str, grace: float = 0.0) -> None:
        """Start ``rec``'s silence from its host's latest call (registered, launched,
        restarted), ``grace`` seconds later."""
        rec.last_sent, rec.last_call = self.host_sent.get(host, 0.0) + grace, self.host_calls.get(host, 0)


class Liveness:
    """The RM's lateness over time, and who has been silent for longer than it (module doc)."""

    def __init__(self, host_factor: float = HOST_FACTOR):
        self.host_factor = host_factor
        self._times: list[float] = []      # wall time of each late tick
        self._stall: list[float] = []      # cumulative lateness up to and including it
        self.total = 0.0
        self.last_lag = 0.0
        # the apps not known to be done, in the apps table's order (see ``silent_apps``)
        self._apps: tuple[dict | None, int, list[str]] = (None, 0, [])
        self._hosts: tuple[object, int, frozenset[str]] = (None, -1, frozenset())

    def tick(self, now: float, planned: float) -> float:
        """The monitor woke at ``now`` for a tick due at ``planned``; returns its lateness."""
        late = max(0.0, now - planned)
        self.last_lag = late
        if late > 0:
            self.total += late
            self._times.append(now)
            self._stall.append(self.total)
        return late

    def stalled_since(self, t: float) -> float:
        """Stall(now) − Stall(t): how long the RM's loop was held up after wall time t."""
        i = bisect.bisect_right(self._times, t)
        return self.total - (self._stall[i - 1] if i else 0.0)

    def heard(self, last_seen: float, now: float) -> float:
        """Silence the RM could have heard since ``last_seen``."""
        return (now - last_seen) - self.stalled_since(last_seen)

    def _silent(self, r, state, now: float, expiry: float) -> bool:
        if now - r.last_seen <= expiry:
            return False
        heard = state.liveness
        host_sent = heard.host_sent.get(r.host)
        if r.last_sent and host_sent is not None and host_sent - r.last_sent > expiry \
                and heard.host_calls.get(r.host, 0) - r.last_call >= HOST_CALLS \
                and not getattr(r, "launching", False):
            return True                  # its host went on sending without it
        host_seen = heard.caller_seen.get(r.host, r.last_seen)
        return self.heard(r.last_seen, now) > expiry and \
            self.heard(host_seen, now) > silent_host_expiry(expiry, self.host_factor)

    def live_hosts(self, nodes) -> frozenset[str]:
        """The hosts that run a live NM of ``nodes`` (``NodeManagers``), computed again only
        after a registration or a loss (``nodes.changes``).  Kept here, beside the RM's
        other scan caches, not in the state its snapshots compare."""
        known, at, hosts = self._hosts
        if known is not nodes or at != nodes.changes:
            hosts = frozenset(r.host for r in nodes.table.values() if r.alive)
            self._hosts = (nodes, nodes.changes, hosts)
        return hosts

    def silent_nodes(self, state, now: float, expiry: float) -> list[str]:
        """Live NMs silent for longer than ``expiry`` by the rules of the module docstring.

        An NM its host's latest mark covers was heard when that mark was: if the mark came
        within the expiry, the NM is not silent, whatever its record says before the mark is
        folded in.  So the records are settled (``NodeManagers.settle``, a write to every NM)
        only when some NM may be silent, not at every scan."""
        heard, table = state.liveness, state.nodes.table
        fresh, dead = heard.fresh(heard.marked, now, expiry), heard.dead
        if all(h in fresh and not dead.get(h) for h in self.live_hosts(state.nodes)):
            return []                    # every live NM is in a fresh mark: none is read
        # ``_silent``'s first test inlined: most NMs were heard within the expiry
        maybe = [n for n, r in table.items() if r.alive and now - r.last_seen > expiry
                 and (r.host not in fresh or n in dead.get(r.host, ()))]
        if not maybe:
            return []
        state.nodes.settle()
        return [n for n in maybe if self._silent(table[n], state, now, expiry)]

    def silent_apps(self, state, now: float, expiry: float) -> list[str]:
        """Current AM attempts silent for longer than ``expiry`` (module docstring).

        Only the apps not done are read: the apps table only grows, in insertion order, and
        an app once done stays done, so the open ones are kept from scan to scan (the
        table's new entries added, those done since dropped) — not all 4,500 of the paper's
        trace ten times per expiry."""
        table = state.apps.table
        known, seen, open_ = self._apps
        if known is not table:
            seen, open_ = 0, []
        if len(table) > seen:
            open_ += itertools.islice(table, seen, None)
        open_ = [a for a in open_ if not table[a].done]
        self._apps = (table, len(table), open_)
        # as for the NMs: an attempt its host's mark covers, the mark within the expiry, is
        # not silent; the apps' records are settled only when some attempt may be
        heard = state.liveness
        fresh = heard.fresh(heard.app_marked, now, expiry)
        maybe = [a for a in open_ if now - table[a].last_seen > expiry and not (
            table[a].host in fresh and table[a].active and a not in heard.app_left.get(table[a].host, ()))]
        if not maybe:
            return []
        state.apps.settle()
        return [a for a in maybe if self._silent(table[a], state, now, expiry)]
