"""The simulator's model of the replay's faults (the config's ``faults:``, ``simulate --fault``).

What a lost NM, AM or RM means is written once, in ``rayrm.rm.core.fault_rules``, which
the RM service follows too; this module injects the faults and steps through their
recovery on the simulator's clock, through the engine's public methods.  Each fault is an
ordinary heap event at its trace time T (priority ``sim.FAULT``: after the completions of
the instant), and so is each step of its recovery, at the time the replay's protocol
takes in trace seconds.  With h the heartbeat interval,

    E_nm = max(nm_expiry · h, 1 / time_scale)      E_am = max(am_expiry · h, 1 / time_scale)

the replay's expiries (``fault_rules.expiry``): that many heartbeats, but at least
``rayrm.rm.core.config.MIN_EXPIRY_WALL`` = 1 wall second at the config's ``run.time_scale``
(20 trace seconds at paper-micro's 0.05).

* **kill-nm:NODE@T** — the NM's containers die at T and it goes silent.  The RM has not
  noticed: their resources stay in use, and a container it still places there is refused
  by the dead NM, released by its AM a heartbeat later (``release``) and asked for again.
  At T + E_nm the node is LOST (``node_lost``, rm/service/nodes.py ``expire_nodes``): each
  attempt it ran ends ``lost`` then and its task is asked for again.  The NM restarts
  empty and registers at T + 2·E_nm (``fault_rules.NM_RESTART_EXPIRIES``; the replay's
  ``nm_restart_after``).
* **kill-am:APP@T** — the AM crashes; its containers run on and finish as usual.  The RM
  still allocates up to the app's last ask, but nobody starts those containers: they hold
  their resources until the next attempt registers.  At T + E_am the attempt FAILS
  (``am_expired``) and the RM launches the next (``am_launch``) — or, after
  ``run.max_attempts``, fails the app and kills its containers.  The new attempt registers
  one heartbeat later (``am_registered``: the AM host's allocate long poll returns within
  one), starts the held containers and asks again for tasks lost meanwhile.  Finished tasks
  stay finished (rm/service/apps.py ``fail_attempt``): nothing runs twice.
* **kill-rm@T** — nothing is scheduled from T.  The restarted RM has rebuilt its state
  ``run.rm_restart`` heartbeats later (``rm_recovered``; in the replay this is Ray restarting
  the actor and reading its snapshot and journal — wall time, so take it from a replay's
  bench_recovery figures), and every NM and AM registers again at its next heartbeat, one
  later (``node_resync``, ``am_resync``, ``rm_resynced``).  Meanwhile containers run and
  finish; arrivals, node joins and leaves, registrations and releases wait for the resync.
  The restarted RM's liveness clocks start at the resync (``fault_rules.Resync``;
  rm/service/state.py ``recovered``), so a crashed NM or AM expires E after it, and
  ``rm_resynced`` waits for that.
* **kill-am-host:I@T** — kill-am of every AM the host runs (the apps
  ``rayrm.rm.core.faults.am_host_of`` deals to host I of ``run.am_hosts`` (0 counts as 1:
  a local Ray is one node), as the replay deals them), with one difference: those
  attempts are not counted against ``run.max_attempts`` (the RM fails them uncounted, as
  YARN does for an AM lost with its node).  The replay notices the host's death when the
  driver's call on it fails, about E_am later at 1,000 nodes (the fault is logged once).
* **kill-nm-host:I**, **kill-ray-node:I** name Ray processes and machines, which a
  simulation does not have; partitions, slow and lossy links (``fault_rules.LinkFault``)
  are on calls between actors, which it does not make either: a ``fault_not_simulated``
  event says so and the run goes on.

Records are the replay RM's: events.csv ``fault`` first, then the events above; tasks.csv
``lost`` (finish: when the RM declared it) and ``killed``.  Durations in details are trace
seconds, as the simulator has no wall clock.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field

from rayrm.rm.core import fault_rules as rules
from rayrm.rm.core.config import MIN_EXPIRY_WALL, NodeEvent, RunSettings
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.fault_rules import Registration, Resync, trace_seconds
from rayrm.rm.core.faults import Fault, am_host_of


NOT_SIMULATED = {
    "kill-nm-host": "an NM host is a Ray actor and a simulation has none (kill-nm crashes one NM)",
    "kill-ray-node": "a simulation has no Ray nodes (kill-nm crashes one NM)",
    "stall-rm": "the simulated RM takes no time, so a stall of its loop changes nothing it models",
    "partition-nm-host": "an NM host is a Ray actor and a simulation has none (kill-nm crashes one NM)",
    "slow-nm-host": "a simulation's calls take no wall time, so a slower one changes nothing it models",
    "slow-am-host": "a simulation's calls take no wall time, so a slower one changes nothing it models",
    "drop": "a simulation makes no calls to lose: its RM applies each event once",
    "partition-am-host": "the simulator has no links between its AMs and its RM (kill-am-host fails "
                         "a host's attempts)",
}
#: RM calls that fail while the RM is down and are retried until it has resynchronised
RETRIED = ("nm_back", "am_register", "release")
#: liveness expiries; until the RM has resynchronised they are void (the resync sets them again)
EXPIRIES = ("nm_lost", "am_expire")


def expiry(beats: int, run: RunSettings) -> float:
    """The replay's expiry in trace seconds (``fault_rules.expiry``): ``beats`` heartbeats, at
    least MIN_EXPIRY_WALL wall seconds."""
    return rules.expiry(beats, run.heartbeat_interval, MIN_EXPIRY_WALL / run.time_scale)


@dataclass
class _DeadNM:
    """A crashed NM: when it died, since when the RM has not heard from it, what it ran."""

    killed: float
    since: float
    containers: dict          # container id -> (job, task, attempt), as Simulation.running had them
    token: int
    lost: bool = False        # declared LOST by the RM (it restarts later)


@dataclass
class _DownAM:
    """An app whose current attempt has no live, registered AM."""

    since: float              # when the RM last heard of the attempt
    token: int
    crashed: bool = True      # the attempt's AM is dead (else: launched, about to register)
    launching: bool = False   # the RM launched this attempt and it has not registered
    held: dict = field(default_factory=dict)   # container id -> Container allocated meanwhile
    owed: int = 0             # tasks lost meanwhile, asked for when the next attempt registers
    counted: bool = True      # False: lost with its AM host, not held against max_attempts


class FaultModel:
    """The faults of one ``Simulation`` (see the module docstring).

    Its events are tuples (kind, *args) on the engine's heap (``Simulation.schedule_fault``);
    ``handle`` runs each through ``_HANDLERS``.  A step that a later one makes stale (an NM
    that came back, an AM that registered, an RM killed again) carries a token and is
    dropped when the token no longer matches.
    """

    def __init__(self, sim, faults: list[Fault]):
        self.sim = sim
        run = sim.config.run
        self.beat = run.heartbeat_interval
        self.nm_expiry = expiry(run.nm_expiry, run)
        self.am_expiry = expiry(run.am_expiry, run)
        self.max_attempts = run.max_attempts
        self.rm_restart = run.rm_restart * self.beat
        self.dead: dict[str, _DeadNM] = {}
        self.silent_nodes: set[str] = set()     # dead NMs the RM still counts alive
        self.down: dict[str, _DownAM] = {}
        self.attempt: dict[str, int] = {}
        self.tokens = itertools.count(1)
        self.rm_token = 0
        self.resync = Resync(trace_seconds)     # RM restarts, and who the restarted RM waits for
        self.simulated: list[str] = []
        self.not_simulated: dict[str, str] = {}
        self.am_crashes = 0
        self.uncounted: Counter = Counter()     # app -> attempts lost with their AM host
        hosts = max(1, run.am_hosts)
        self.am_host = am_host_of([j.app for j in sim.config.jobs], hosts)
        for f in faults:
            if f.kind == "kill-am-host" and f.index >= hosts:
                raise InputError(f"fault {f.text!r}: the run has {hosts} ApplicationMaster host"
                                 f"{'s' if hosts > 1 else ''} (run.am_hosts, simulate --am-hosts)")
        for f in faults:
            self._push(f.time, ("inject", f))

    def _push(self, t: float, event: tuple) -> None:
        self.sim.schedule_fault(t, event)

    @property
    def intercepting(self) -> bool:
        """Whether a container placed now may not start (a dead NM, an app without its AM)."""
        return bool(self.down) or bool(self.silent_nodes)

    def intercept(self, c, t: float) -> bool:
        """A container the scheduler placed at ``t`` that does not start now: held for the
        app's next attempt, or refused by a dead NM (released a heartbeat later)."""
        down = self.down.get(c.app_id)
        if down is not None:
            down.held[c.container_id] = c
            return True
        if c.node in self.silent_nodes:
            self._push(t + self.beat, ("release", c.container_id, c.app_id))
            return True
        return False

    def handle(self, event: tuple, t: float, changed: dict) -> None:
        """One fault event at ``t``; calls to an RM that is down wait for its resync."""
        kind = event[0]
        if t < self.sim.rm_up and kind in RETRIED:
            self._push(self.sim.rm_up, event)
            return
        if t <= self.sim.rm_up and kind in EXPIRIES:
            return                                   # the resync at rm_up sets them again
        _HANDLERS[kind](self, t, changed, *event[1:])

    def summary(self) -> dict:
        return {"simulated": list(self.simulated), "not_simulated": dict(self.not_simulated),
                "rm_restarts": self.resync.epoch, "am_crashes": self.am_crashes}

    # ----- injection ---------------------------------------------------------------

    def _inject(self, t: float, changed: dict, fault: Fault) -> None:
        if fault.kind in NOT_SIMULATED:
            self.not_simulated[fault.text] = NOT_SIMULATED[fault.kind]
            self.sim.log.event("fault_not_simulated", t, detail=f"{fault.text}: {NOT_SIMULATED[fault.kind]}")
            return
        self.simulated.append(fault.text)
        _INJECT[fault.kind](self, t, fault)

    def _kill_nm(self, t: float, fault: Fault) -> None:
        node = fault.target
        self.sim.log.event("fault", t, node=node, detail=fault.text)
        if node in self.dead:
            return                                   # crashed already: nothing to crash
        ran = self.sim.crash_node(node)
        if ran is None:
            return                                   # no NM runs there now
        rec = self.dead[node] = _DeadNM(t, t, ran, next(self.tokens))
        self.silent_nodes.add(node)
        self._push(t + self.nm_expiry, ("nm_lost", node, rec, rec.token))
        self._push(t + rules.NM_RESTART_EXPIRIES * self.nm_expiry, ("nm_back", node, rec))

    def _kill_am(self, t: float, fault: Fault) -> None:
        self.sim.log.event("fault", t, app=fault.target, detail=fault.text)
        self._crash_am(t, fault.target)

    def _kill_am_host(self, t: float, fault: Fault) -> None:
        """kill-am of each app whose AM host I runs now, uncounted (module docstring)."""
        self.sim.log.event("fault", t, detail=f"{fault.text} (am-{fault.index})")
        for app in sorted(a for a, i in self.am_host.items() if i == fault.index):
            self._crash_am(t, app, counted=False)

    def _crash_am(self, t: float, app: str, counted: bool = True) -> None:
        sim = self.sim
        if app not in sim.jobs or app not in sim.cluster.apps:
            return                                   # not arrived, rejected or ended: no AM runs
        down = self.down.get(app)
        if down is not None and not counted:
            down.counted = False                     # the RM fails it with its host, uncounted
        if down is not None and down.crashed:
            return                                   # crashed already, not noticed yet
        self.am_crashes += 1
        if down is None:
            down = self.down[app] = _DownAM(t, 0, counted=counted)
        down.crashed, down.token = True, next(self.tokens)
        self._push(max(t, down.since + self.am_expiry), ("am_expire", app, down, down.token))

    def _kill_rm(self, t: float, fault: Fault) -> None:
        self.sim.log.event("fault", t, detail=fault.text)
        self.rm_token = token = next(self.tokens)
        self.resync.lost()
        self.sim.rm_up = t + self.rm_restart + self.beat
        self._push(t + self.rm_restart, ("rm_recovered", token))
        self._push(self.sim.rm_up, ("rm_resync", token))

    # ----- NodeManagers ---------------------------------------------------------------

    def _nm_lost(self, t: float, changed: dict, node: str, rec: _DeadNM, token: int) -> None:
        """NM expiry: the node is LOST, its attempts end lost and are asked for again."""
        if self.dead.get(node) is not rec or rec.token != token or rec.lost:
            return
        self._lose(node, rec, t, changed, rules.nm_lost_detail(t - rec.since, trace_seconds))

    def _lose(self, node: str, rec: _DeadNM, t: float, changed: dict, detail: str) -> None:
        sim = self.sim
        rec.lost = True
        self.silent_nodes.discard(node)
        released = sim.scheduler.remove_node(node)  # every container the RM had there
        sim.log.remove_node(node, t, detail=detail)
        unstarted = [c for c in released if c.container_id not in rec.containers]
        self._end_dead(rec, t, changed, detail)
        for c in unstarted:
            self.lost_unstarted(c)
        sim.cluster_changed(changed)
        self._synced(("node", node), t)

    def _end_dead(self, rec: _DeadNM, t: float, changed: dict, detail: str, release: bool = False) -> None:
        """The crashed NM's attempts end lost at ``t`` (``Fate.LOST``); tasks of apps still
        running are asked for again."""
        for cid, entry in rec.containers.items():
            if self.sim.end_lost(cid, entry, t, changed, detail, crashed=rec.killed, release=release):
                self._ask(entry[0].app_id, 1)
        rec.containers = {}

    def _nm_back(self, t: float, changed: dict, node: str, rec: _DeadNM) -> None:
        """The NM restarts empty and registers again (``fault_rules.on_nm_registers``)."""
        if self.dead.get(node) is not rec:
            return                                   # it left the cluster meanwhile
        del self.dead[node]
        sim = self.sim
        verdict = rules.on_nm_registers(rec.lost, self.resync.asked(("node", node)))
        if verdict is Registration.REJOIN:
            index = sim.cluster.node_index[node]
            if not sim.cluster.nodes[index].alive:
                sim.join(NodeEvent(t, node, sim.cluster.nodes[index].spec), t, changed)
            return
        # the restarted RM never declared it lost: what it no longer runs is lost
        self.silent_nodes.discard(node)
        sim.log.event(verdict.value, t, node=node, detail="0 containers reported")
        self._end_dead(rec, t, changed, rules.NOT_REPORTED, release=True)
        self._synced(("node", node), t)

    def leaves(self, node: str, t: float, changed: dict) -> bool:
        """A config leave of a crashed NM: it will not restart; if the RM still counts it
        alive, it is lost now, as any node leaving is.  True when handled here."""
        rec = self.dead.pop(node, None)
        if rec is None or rec.lost:
            return False
        self._lose(node, rec, t, changed, f"node {node} left")
        return True

    def lost_unstarted(self, c) -> None:
        """A container gone with its node before it started (``Fate.WITHDRAWN``: held for a
        new AM attempt; ``Fate.REPORTED``: refused by a dead NM): its task is asked for again."""
        down = self.down.get(c.app_id)
        if down is not None:
            down.held.pop(c.container_id, None)
        self._ask(c.app_id, 1)

    def _release(self, t: float, changed: dict, cid: int, app: str) -> None:
        """The AM releases a container the dead NM would not start, and asks again."""
        sim = self.sim
        c = sim.cluster.containers.get(cid)
        if c is None:
            return                                   # lost with its node, or its app ended
        sim.scheduler.release(cid)
        sim.log.event("release", t, app=app, container=cid, node=c.node,
                      detail=f"the NM refused the launch: {c.node} is down")
        self._ask(app, 1)
        changed[app] = sim.jobs[app]

    def _ask(self, app: str, count: int) -> None:
        down = self.down.get(app)
        if down is not None:
            down.owed += count                       # the next attempt asks
        else:
            self.sim.scheduler.ask(app, count)

    # ----- ApplicationMasters ------------------------------------------------------------

    def _am_expire(self, t: float, changed: dict, app: str, down: _DownAM, token: int) -> None:
        """AM expiry: the attempt FAILS; the next is launched, or the app fails
        (``fault_rules.after_failed_attempt``)."""
        if self.down.get(app) is not down or down.token != token:
            return
        sim = self.sim
        k = self.attempt.get(app, 1)
        why = (rules.am_host_lost_detail(k, f"AM host am-{self.am_host[app]} died") if not down.counted
               else rules.am_expired_detail(k, down.launching, t - down.since, trace_seconds))
        sim.log.event("am_expired", t, app=app, detail=why)
        self._synced(("app", app), t)
        outcome = rules.after_failed_attempt(k, self.uncounted[app], down.counted, self.max_attempts)
        if not down.counted:
            self.uncounted[app] = outcome.uncounted
            down.counted = True                      # the next attempt counts unless lost so too
        if outcome.failed:
            del self.down[app]
            if app in sim.cluster.apps:
                sim.fail_app(app, t, changed, outcome.failed)
            return
        self.attempt[app] = outcome.attempt
        sim.log.event("am_launch", t, app=app, detail=f"attempt {outcome.attempt}")
        down.since, down.crashed, down.launching, down.token = t, False, True, next(self.tokens)
        self._push(t + self.beat, ("am_register", app, down, down.token))

    def _am_register(self, t: float, changed: dict, app: str, down: _DownAM, token: int) -> None:
        """The new attempt registers: it starts the containers held for it and asks again."""
        if self.down.get(app) is not down or down.token != token:
            return
        del self.down[app]
        sim = self.sim
        job = sim.jobs[app]
        running = self._running_per_app()[app]
        sim.log.event("am_registered", t, app=app, detail=rules.am_registered_detail(self.attempt[app], job.done,
                                                                                    running))
        if app in sim.cluster.apps:
            if down.held:
                sim.place(list(down.held.values()), t, changed)
            if down.owed:
                sim.scheduler.ask(app, down.owed)

    def _running_per_app(self) -> Counter:
        """app -> containers the RM counts RUNNING (those on crashed NMs not yet lost too)."""
        per = Counter(entry[0].app_id for entry in self.sim.running.values())
        for rec in self.dead.values():
            per.update(entry[0].app_id for entry in rec.containers.values())
        return per

    # ----- the ResourceManager ----------------------------------------------------------

    def _rm_recovered(self, t: float, changed: dict, token: int) -> None:
        if token != self.rm_token:
            return                                   # killed again before it came back
        detail = self.resync.recovered(t, f"state rebuilt {trace_seconds(self.rm_restart)} after the RM died "
                                          f"(run.rm_restart)")
        self.sim.log.event("rm_recovered", t, detail=detail)

    def _rm_resync(self, t: float, changed: dict, token: int) -> None:
        """Every live NM and AM registers again; the crashed ones expire E from now."""
        if token != self.rm_token:
            return
        sim = self.sim
        on_node = Counter(sim.cluster.containers[cid].node for cid in sim.running)
        per_app = self._running_per_app()
        waiting = set()
        for n in sim.cluster.nodes:
            rec = self.dead.get(n.name)
            if not n.alive:
                continue
            if rec is not None and not rec.lost:
                rec.since, rec.token = t, next(self.tokens)
                self._push(t + self.nm_expiry, ("nm_lost", n.name, rec, rec.token))
                waiting.add(("node", n.name))
            else:
                sim.log.event(Registration.RESYNC.value, t, node=n.name,
                              detail=f"{on_node[n.name]} containers reported")
        for app, job in sim.jobs.items():
            if app not in sim.cluster.apps:
                continue
            down = self.down.get(app)
            if down is None:
                sim.log.event("am_resync", t, app=app,
                              detail=rules.am_registered_detail(self.attempt.get(app, 1), job.done, per_app[app]))
            elif down.crashed:
                down.since, down.token = t, next(self.tokens)
                self._push(t + self.am_expiry, ("am_expire", app, down, down.token))
                if not down.launching:
                    waiting.add(("app", app))
        self.resync.wait_for(waiting)
        self._synced(None, t)

    def _synced(self, key, t: float) -> None:
        """``key`` (("node", n) or ("app", a)) no longer keeps the restarted RM waiting."""
        if key is not None:
            self.resync.registered(key)
        detail = self.resync.check(t)
        if detail is not None:
            self.sim.log.event("rm_resynced", t, detail=detail)


#: fault event kind -> its step (``FaultModel.handle``)
_HANDLERS = {
    "inject": FaultModel._inject,
    "nm_lost": FaultModel._nm_lost,
    "nm_back": FaultModel._nm_back,
    "release": FaultModel._release,
    "am_expire": FaultModel._am_expire,
    "am_register": FaultModel._am_register,
    "rm_recovered": FaultModel._rm_recovered,
    "rm_resync": FaultModel._rm_resync,
}
#: simulated fault kind -> its injection
_INJECT = {"kill-nm": FaultModel._kill_nm, "kill-am": FaultModel._kill_am, "kill-am-host": FaultModel._kill_am_host,
           "kill-rm": FaultModel._kill_rm}
assert set(RETRIED + EXPIRIES) <= set(_HANDLERS)
