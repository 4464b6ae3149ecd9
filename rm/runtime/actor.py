"""The ResourceManager Ray actor: ``ResourceManagerState`` driven by the wall clock.

One async actor per replay, named ``rayrm-rm`` in the ``rayrm`` namespace so tools
can find it (``ray.get_actor("rayrm-rm", namespace="rayrm")``).  Its calls are the
RM's table (``Call``, rm/service/calls.py: each call's handler, arguments and callers;
rm/service/protocol.py has the messages), every one served by ``serve``: the NM and AM
hosts make theirs on the RM's channel (``rm/service/channel.py``: one TCP stream per
host, its address and key from ``channel()``); the driver's are Ray calls,
``rm.call.remote(Call.LOSE_HOST, caller, request_id, host, detail)``.

Node heartbeats are YARN's NODE_UPDATE: statuses are applied and the scheduler
runs.  ``allocate`` is the AM heartbeat; with ``AppMark.wait > 0`` it is a long poll —
when nothing is waiting for the caller's apps it holds the answer until a
NODE_UPDATE queues something for them or ``wait`` passes, so a container freed on
one NM reaches the next task's AM without a heartbeat interval in between
(``LongPolls``, rm/runtime/polls.py).

Each call runs the state machine synchronously (no await inside), so calls never
interleave inside the state, and is journaled (``rm/service/store.py``) before its
answer leaves: the actor runs with ``max_restarts``, and a restarted actor finds
the snapshot and journal in ``state_dir``, rebuilds the state, and tells every NM
and AM to RESYNC (``ResourceManagerState.recovered``).

The monitor — one tick per heartbeat interval, run on a call the RM wakes for anyway
when one comes near it, else on its own timer (``Ticker``, rm/runtime/ticker.py) — runs
the actor's rooms (rm/runtime/rmactor): the liveness expiries it decides (``Expiries``:
NMs silent for ``nm_expiry`` heartbeats are LOST, AM attempts silent for ``am_expiry``
FAIL, both at least ``MIN_EXPIRY_WALL`` seconds), the AMLauncher (``AMLauncher``), the
journal's snapshots (``RMJournal``) and the Ray metrics (``RMMetrics``).
"""

from __future__ import annotations

import asyncio
import functools
import os
import pickle
import resource
import time

import ray

from rayrm.rm.core.config import MIN_EXPIRY_WALL
from rayrm.rm.core.fault_rules import expiry
from rayrm.rm.core.policies import PolicyError
from rayrm.rm.service.calls import DRIVER_CALLS, Call
from rayrm.rm.service.protocol import AllocateRequest, AllocateResponse, AppMark, HostMark, NodeHeartbeat
from rayrm.rm.service.channel import ChannelServer
from rayrm.rm.service.store import StateStore
from rayrm.rm.runtime.pace import PaceMeter
from rayrm.rm.runtime.polls import LongPolls
from rayrm.rm.runtime.rmactor.expiries import Expiries
from rayrm.rm.runtime.rmactor.journal import RMJournal
from rayrm.rm.runtime.rmactor.launcher import AMLauncher
from rayrm.rm.runtime.rmactor.metrics import RMMetrics
from rayrm.rm.runtime.rmactor.preemption import preemption_due
from rayrm.rm.runtime.ticker import Ticker
from rayrm.rm.service.heap import quiet_gc
from rayrm.rm.service.liveness import HOST_FACTOR, Liveness
from rayrm.rm.service.state import ResourceManagerState
from rayrm.rm.ui.snapshot import rm_snapshot

#: Ray restarts of the RM actor (each recovers from the snapshot and journal).
RM_MAX_RESTARTS = 5
#: after a restart, NMs and AMs have this many wall seconds more than their expiry to
#: RESYNC: a call that was out when the RM died fails only about a second after the
#: restart, and the caller retries then.
RESYNC_GRACE_WALL = 3.0

def _halts(method):
    """A protocol call that, once the policy has failed (``PolicyError``), changes nothing
    more: it waits unanswered until the driver, which sees ``policy_error`` in the next
    ``progress()``, ends the replay and kills the hosts; the state is not scheduled half-broken."""
    @functools.wraps(method)
    async def call(self, *args, **kwargs):
        if self.policy_error is None:
            try:
                return await method(self, *args, **kwargs)
            except PolicyError as e:
                self.policy_error = self.policy_error or str(e)
        await asyncio.Event().wait()
    return call


class _Pickled:
    """A view's answer, pickled on the RM's event loop; it unpickles as the object itself.

    Ray serialises an actor's answer in its main thread while the event loop goes on
    running the hosts' channel calls (rm/service/channel.py), which change the state the
    answer may share (the run log, the records); pickled here, the answer is the state as
    of the call."""

    __slots__ = ("data",)

    def __init__(self, answer):
        self.data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)

    def __reduce__(self):
        return pickle.loads, (self.data,)


@ray.remote(num_cpus=0, max_concurrency=10_000)
class ResourceManager:
    """The central RM (see the module docstring for the calls)."""

    def __init__(self, *, dims, nodes, policy, policy_name: str, time_scale: float,
                 heartbeat_interval: float, nm_expiry: int, am_expiry: int = 10, max_attempts: int = 2,
                 state_dir: str | None = None, secret: bytes = b"", name: str = "",
                 seed: int | None = None, metrics: bool = True, host_silence: float = HOST_FACTOR,
                 keep_state: bool = False, queues=None, preemption=None):
        self.interval_wall = heartbeat_interval * time_scale
        expiry_wall = expiry(nm_expiry, self.interval_wall, MIN_EXPIRY_WALL)
        am_expiry_wall = expiry(am_expiry, self.interval_wall, MIN_EXPIRY_WALL)
        self.polls = LongPolls()                         # the AM hosts' long polls held
        self._ticker: Ticker | None = None               # the monitor (``_tick``)
        # liveness and launches are looked at ten times per expiry, not every tick: a scan
        # reads every NM and app record
        self._scan_every = min(expiry_wall, am_expiry_wall) / 10
        self._last_scan = 0.0
        self.calls = 0
        self._channel = ChannelServer(self, os.urandom(32))  # the hosts' calls (rm/service/channel.py)
        self.policy_error: str | None = None           # set when the policy failed: the RM halts
        self.ui_memo: dict = {}                        # what ui_snapshot has sent (rm_snapshot)
        self.liveness = Liveness(host_silence)
        self.expiries = Expiries(self.liveness, expiry_wall, am_expiry_wall)
        self.launcher = AMLauncher(am_expiry_wall)
        self.pace = PaceMeter(self.interval_wall)
        self.journal = RMJournal(StateStore(state_dir, keep=keep_state) if state_dir else None, self._channel)
        restored = self.journal.restore(trusted={type(policy).__module__})   # its own code
        if restored is not None:
            self.state, detail, stats = restored
        else:
            self.state = ResourceManagerState(dims=dims, nodes=nodes, policy=policy, policy_name=policy_name,
                                              name=name, seed=seed, max_attempts=max_attempts, secret=secret,
                                              queues=queues, preemption=preemption)
            self.journal.begin(self.state)
        self._metrics = RMMetrics(policy_name, self.state) if metrics else None
        if restored is not None:
            self._apply(Call.RECOVERED, (detail, RESYNC_GRACE_WALL, stats))
            self._start_monitor()
        quiet_gc()

    # ----- the protocol --------------------------------------------------------

    async def call(self, call: Call, *args):
        """One of the driver's calls (``DRIVER_CALLS``, rm/service/calls.py), made by Ray."""
        if call not in DRIVER_CALLS:
            raise ValueError(f"the driver makes no call {call!r} on the RM")
        return await self.serve(call, *args)

    @_halts
    async def serve(self, call: Call, *args):
        """Any call of the table (rm/service/calls.py), the hosts' from the channel: its handler
        applies it to the state at the wall time now and it is journaled before its answer
        leaves (``_apply``).  A node heartbeat also feeds the pace meter and may run the
        monitor's tick; an allocate may long-poll; ``start_clock`` starts the monitor."""
        if call is Call.ALLOCATE:
            return await self._allocate(*args)
        now, out = self._apply(call, args)
        if call is Call.NODE_HEARTBEAT:
            self._paced(now, *args)
            self._nudge()
        elif call is Call.START_CLOCK:
            self._start_monitor()
        return out

    def _apply(self, call: Call, args: tuple) -> tuple[float, object]:
        """(now, the answer): ``call`` applied at the wall time now, then journaled with the
        arguments it took (``_journal``)."""
        now = self._now()
        out = call.apply(self.state, now, *args)
        if call.spec.journaled:
            self._journal(call, now, args)
        return now, out

    def _paced(self, now: float, caller: str, request_id: int, beats: list[NodeHeartbeat],
               idle: tuple[str, ...] = (), sent: float = 0.0, mark: HostMark | None = None) -> None:
        """A node heartbeat's batch, the earliest due at ``mark.due``, is handled ``now`` (the pace)."""
        if mark is not None and mark.due:
            self.pace.heartbeat_due(now, mark.due)

    async def _allocate(self, caller: str, request_id: int, requests: list[AllocateRequest],
                        sent: float = 0.0, mark: AppMark | None = None) -> list[AllocateResponse]:
        """The AM heartbeat; with ``mark.wait`` a long poll: when it has nothing for the caller's
        apps it waits for news (``LongPolls``) and delivers it as a ``poll``, journaled only
        when it delivers something (a poll that delivers nothing changes nothing)."""
        now, out = self._apply(Call.ALLOCATE, (caller, request_id, requests, sent, mark))
        wait = mark.wait if mark is not None else 0.0
        if wait > 0 and not any(r.allocated or r.completed or r.preemption or r.action != "normal" for r in out):
            await self.polls.hold(caller, now, wait, self._ticker)
            now = self._now()
            out = Call.POLL.apply(self.state, now, caller, request_id, requests, mark)
            if any(r.allocated or r.completed or r.preemption for r in out):
                self._journal(Call.POLL, now, (caller, request_id, requests, mark))
        self._nudge()
        return out

    def _nudge(self) -> None:
        """A call is done: the monitor's tick runs now if it is due (``Ticker.nudge``)."""
        if self._ticker is not None:
            self._ticker.nudge()

    async def channel(self) -> tuple[str, int, bytes]:
        """Where the hosts' channel to this RM listens, and its key: (address, port, key)."""
        host, port = await self._channel.start(ray.util.get_node_ip_address())
        return host, port, self._channel.key

    def _now(self) -> float:
        """The wall time of the call about to run (counted); once the policy has failed, no
        call runs."""
        if self.policy_error is not None:
            raise PolicyError("the ResourceManager", "halted", self.policy_error)
        self.calls += 1
        return time.time()

    def _journal(self, call: Call, now: float, args: tuple) -> None:
        """The call just applied at ``now``: journal it before its answer leaves
        (``RMJournal.record``), and wake the long polls it gave news."""
        self.journal.record(call, now, args, self.state)
        self._wake()

    def _wake(self) -> None:
        """Wake the long polls of AM hosts that have something to collect."""
        news = self.state.apps.news
        self.polls.wake(news)
        news.clear()

    # ----- the replay's clock, liveness and the AM launcher -----------------------

    def _start_monitor(self) -> None:
        """From t = 0 (``start_clock``) on, silent NMs and AMs expire."""
        if self._ticker is None and self.state.clock is not None:
            period = min(max(self.interval_wall, 0.01), 1.0)
            self._scan_every = max(period, self._scan_every)
            if self._metrics is not None:
                self._metrics.start(self.state)
            self._ticker = Ticker(period, period / 2, self._tick)

    def _tick(self, now: float, planned: float) -> None:
        """The monitor (``Ticker``: once per heartbeat interval, on a wake-up the RM has
        anyway): the loop's lateness and the pace, the long polls whose wait is up, every
        ``_scan_every`` the expiries and the launches, the journal's snapshots, the metrics.
        A policy failure (expiring a node rekeys every app) ends it."""
        try:
            late = self.liveness.tick(now, planned)
            self.pace.tick(now, late)
            self.polls.end(now + self._ticker.slack)
            if now > self.state.clock.start and now - self._last_scan >= self._scan_every:
                self._last_scan = now
                for call, args in self.expiries.due(self.state, now):
                    self._apply(call, args)
                self.launcher.launch_due(self.state)
            if now > self.state.clock.start:
                for call, args in preemption_due(self.state, now):
                    self._apply(call, args)
            self.journal.tick(now, self.state)
            if self._metrics is not None:
                self._metrics.tick(now, self.state)
        except PolicyError as e:
            self.policy_error = self.policy_error or str(e)
            self._ticker.stop()
            self._ticker = None

    async def stall(self, seconds: float) -> None:
        """The ``stall-rm`` fault: block the RM's loop for ``seconds`` (a long GC pause, a slow disk)."""
        time.sleep(seconds)

    # ----- views -----------------------------------------------------------------

    # Each view's answer is ``_Pickled`` on the loop: the state goes on changing meanwhile.

    async def progress(self) -> dict:
        lag, behind = self.pace.current()
        return _Pickled(self.state.progress(time.time()) | {"calls": self.calls, "lag": round(lag, 3),
                                                            "behind": behind, "policy_error": self.policy_error})

    async def first_event(self, kind: str) -> float:
        """The trace time of the run's first event of ``kind``, once there is one
        (``RunLog.watch``): a fault waiting for that event (``@EVENT``, rm/core/faults.py)
        is due from then.  A restarted RM answers from the log it rebuilt."""
        seen = asyncio.get_running_loop().create_future()
        self.state.log.watch(kind, lambda t: seen.done() or seen.set_result(t))
        return await seen

    async def ui_snapshot(self) -> dict:
        """The compact view the driver's web UI polls, at most once per heartbeat interval
        (``rayrm.rm.ui.snapshot``); ended apps cross once."""
        self.state.nodes.settle()
        return _Pickled(rm_snapshot(self.state, time.time(), self.ui_memo, self.pace))

    async def export(self) -> dict:
        """The run log and the RM's measurements, for the driver to write out."""
        if self._metrics is not None:
            self._metrics.update(self.state)
        s = self.state
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return _Pickled({
            "log": s.log, "alloc_to_running": list(s.records.alloc_to_running),
            "alloc_to_launch": list(s.records.alloc_to_launch), "progress": s.progress(time.time()),
            "calls": self.calls, "pace": self.pace.export(),
            "cpu_seconds": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024,
            "recoveries": list(s.recoveries), "policy_error": self.policy_error, **self.journal.export(),
            "preemption": s.preemptions.counts() if s.preemptions.rules is not None else None,
            "preemption_summary": s.preemptions.summary(time.time()) if s.preemptions.rules is not None else None,
            "channel": self._channel.stats()})

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        self.polls.end(float("inf"))
        self.journal.close()
