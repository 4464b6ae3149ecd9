"""The simulator's fault injector (the config's ``faults:``, ``simulate --fault``).

Which recovery step follows a fault, and when, is ``rayrm.rm.core.recovery``; what each
means is ``rayrm.rm.core.fault_rules``, which the RM service calls too (its sequence is
the replay's real processes, which ``recovery`` models).  Here each fault and
each step is a heap event (priority ``FAULT``: after the instant's completions) that
``Recovery`` decides and a handler (``FaultModel.steps``) applies through the engine's
public methods, with the replay's durations in trace seconds (``timing``; docs/failures.md
describes each kind).  Simulated: kill-nm, kill-am, kill-am-host, kill-rm,
partition-nm-host and partition-am-host (the NMs ``nm_host_of`` and the apps ``am_host_of``
deal to host I, as the replay does).  Not simulated (a ``fault_not_simulated`` event; the
run goes on): kill-nm-host and kill-ray-node name Ray processes and machines; stall-rm
holds the RM's loop, which takes no time here; slow-nm-host, slow-am-host and drop act on
the wall time and delivery of actor calls, and the simulated RM applies each event once,
at its trace time, with no call to slow down or lose (``fault_rules.link_passage`` needs
a wall clock and real calls).  Records are the replay RM's, durations in trace seconds.
A fault waiting for an event (``@EVENT[+S]``) goes on the heap when the run log logs the
first one (``RunLog.watch``), S trace seconds after it.
"""

from __future__ import annotations

from collections import Counter

from rayrm.rm.core import fault_rules as rules
from rayrm.rm.core.config import MIN_EXPIRY_WALL, NodeEvent, RunSettings
from rayrm.rm.core.fault_rules import (AttemptCall, Fate, Registration, fate_on_node_lost, nm_registered_detail,
                                       not_reported, on_am_registers, trace_seconds)
from rayrm.rm.core.faults import Fault, am_host_of, check_hosts, nm_host_of
from rayrm.rm.core.recovery import Gate, Next, NodeOutage, Recovery, Step, Timing

_NO_WALL = "a simulation's calls take no wall time, so a slower one changes nothing it models"
NOT_SIMULATED = {
    "kill-nm-host": "an NM host is a Ray actor and a simulation has none (kill-nm crashes one NM)",
    "kill-ray-node": "a simulation has no Ray nodes (kill-nm crashes one NM)",
    "stall-rm": "the simulated RM takes no time, so a stall of its loop changes nothing it models",
    "slow-nm-host": _NO_WALL,
    "slow-am-host": _NO_WALL,
    "drop": "a simulation makes no calls to lose: its RM applies each event once",
}


def expiry(beats: int, run: RunSettings) -> float:
    """The replay's expiry in trace seconds (``fault_rules.expiry``): ``beats`` heartbeats, at
    least MIN_EXPIRY_WALL wall seconds."""
    return rules.expiry(beats, run.heartbeat_interval, MIN_EXPIRY_WALL / run.time_scale)


def timing(run: RunSettings) -> Timing:
    """The recovery's durations on the trace clock (module docstring)."""
    return Timing(run.heartbeat_interval, expiry(run.nm_expiry, run), expiry(run.am_expiry, run),
                  run.rm_restart * run.heartbeat_interval, run.max_attempts, run.host_silence)


class FaultModel:
    """The faults of one ``Simulation`` (module docstring): ``Recovery`` decides each step,
    the handlers (``steps``, one per ``Step``; ``inject``, one per fault kind) apply it."""

    def __init__(self, sim, faults: list[Fault]):
        self.sim = sim
        run = sim.config.run
        self.am_host = am_host_of([j.app for j in sim.config.jobs], run.am_hosts)
        self.nm_host = nm_host_of(sim.config, run.nm_hosts)
        check_hosts([f for f in faults if f.kind not in NOT_SIMULATED], max(1, run.nm_hosts), max(1, run.am_hosts))
        self.timing = timing(run)
        self.rec = Recovery(self.timing, self.am_host, trace_seconds)
        self.simulated: list[str] = []
        self.not_simulated: dict[str, str] = {}
        self.steps = {Step.INJECT: self._inject, Step.NM_LOST: self._nm_lost, Step.NM_BACK: self._nm_back,
                      Step.RELEASE: self._release, Step.AM_EXPIRE: self._am_expire, Step.AM_REGISTER: self._am_register,
                      Step.AM_HEARD: self._am_heard, Step.RM_RECOVERED: self._rm_recovered,
                      Step.RM_RESYNC: self._rm_resync}
        self.inject = {"kill-nm": self._kill_nm, "kill-am": self._kill_am, "kill-am-host": self._kill_am_host,
                       "kill-rm": self._kill_rm, "partition-nm-host": self._partition_nm_host,
                       "partition-am-host": self._partition_am_host}
        self.waiting = [f for f in faults if f.after]     # for their event (``fired``)
        self.triggers = bool(self.waiting)
        for f in faults:
            if f.after:
                sim.log.watch(f.after, lambda t, f=f: self.fired(f, t))
            else:
                self._push([Next(f.time, Step.INJECT, (f,))])

    def fired(self, fault: Fault, t: float) -> None:
        """The first event ``fault`` waits for, logged at ``t``: it is due ``fault.delay`` later."""
        self.waiting.remove(fault)
        due = fault.fired(t)
        self._push([Next(due.time, Step.INJECT, (due,))])

    def _push(self, steps) -> None:
        for step in steps:
            self.sim.schedule_fault(step.at, (step.step, *step.args))

    @property
    def intercepting(self) -> bool:
        """Whether a container placed now may not start (a silent NM, an app without its AM)."""
        return bool(self.rec.down) or bool(self.rec.silent)

    def intercept(self, c, t: float) -> bool:
        """A container placed at ``t`` that does not start now: held for the app's next
        attempt (no attempt receives it, so it is ``Handover.TAKEN_OVER``:
        ``fault_rules.on_attempt_failed``) or a cut NM's heal, or refused by a dead NM
        (released a heartbeat later)."""
        down = self.rec.down.get(c.app_id)
        out = self.rec.outages.get(c.node) if down is None and c.node in self.rec.silent else None
        if down is not None or (out is not None and out.heals is not None):
            (down or out).held[c.container_id] = c
        elif out is not None:
            self._push([Next(t + self.timing.beat, Step.RELEASE, (c.container_id, c.app_id))])
        return down is not None or out is not None

    def handle(self, event: tuple, t: float, changed: dict) -> None:
        """One step at ``t``; calls to an RM that is down wait for its resync (``Recovery.gate``)."""
        gate = self.rec.gate(event[0], t)
        if gate is Gate.RETRY:
            self.sim.schedule_fault(self.rec.rm_up, event)
        elif gate is Gate.RUN:
            self.steps[event[0]](t, changed, *event[1:])

    def summary(self) -> dict:
        out = {"simulated": list(self.simulated), "not_simulated": dict(self.not_simulated),
               "rm_restarts": self.rec.resync.epoch, "am_crashes": self.rec.am_crashes}
        if self.triggers:
            out["not_triggered"] = [f.text for f in self.waiting]
        return out

    def _synced(self, key, t: float) -> None:
        detail = self.rec.synced(key, t)
        if detail is not None:
            self.sim.log.event("rm_resynced", t, detail=detail)

    # ----- injection ---------------------------------------------------------------

    def _inject(self, t: float, changed: dict, fault: Fault) -> None:
        if fault.kind in NOT_SIMULATED:
            self.not_simulated[fault.text] = NOT_SIMULATED[fault.kind]
            self.sim.log.event("fault_not_simulated", t, detail=f"{fault.text}: {NOT_SIMULATED[fault.kind]}")
            return
        self.simulated.append(fault.text)
        self.inject[fault.kind](t, fault)

    def _kill_nm(self, t: float, fault: Fault) -> None:
        self.sim.log.event("fault", t, node=fault.target, detail=fault.text)
        ran = None if fault.target in self.rec.outages else self.sim.crash_node(fault.target)
        if ran is not None:                          # else down already, or no NM runs there
            self._push(self.rec.nm_crashed(fault.target, t, ran))

    def _partition_nm_host(self, t: float, fault: Fault) -> None:
        """Each NM of host I that runs now is cut off for D: its containers run on unheard."""
        self.sim.log.event("fault", t, detail=f"{fault.text} (nm-{fault.index})")
        for node in (n for n, i in self.nm_host.items() if i == fault.index and n not in self.rec.outages):
            ran = self.sim.crash_node(node)
            if ran is not None:
                finishes = {cid: self.sim.finish_of(entry) for cid, entry in ran.items()}
                self._push(self.rec.nm_cut(node, t, fault.duration, ran, finishes))

    def _kill_am(self, t: float, fault: Fault) -> None:
        self.sim.log.event("fault", t, app=fault.target, detail=fault.text)
        if fault.target in self.sim.jobs and fault.target in self.sim.cluster.apps:   # else no AM runs
            self._push(self.rec.am_crashed(fault.target, t))

    def _kill_am_host(self, t: float, fault: Fault) -> None:
        """kill-am of each app whose AM host I runs now, uncounted (module docstring)."""
        self.sim.log.event("fault", t, detail=f"{fault.text} (am-{fault.index})")
        for app in self._apps_on(fault.index):
            self._push(self.rec.am_crashed(app, t, counted=False))

    def _partition_am_host(self, t: float, fault: Fault) -> None:
        """Each AM of host I is cut off for D: unheard, past E_host its attempt fails."""
        self.sim.log.event("fault", t, detail=f"{fault.text} (am-{fault.index})")
        for app in self._apps_on(fault.index):
            self._push(self.rec.am_cut(app, t, fault.duration))

    def _apps_on(self, host: int) -> list[str]:
        """The apps whose AM host ``host`` runs now (arrived, not ended)."""
        sim = self.sim
        return sorted(a for a, i in self.am_host.items() if i == host and a in sim.jobs and a in sim.cluster.apps)

    def _kill_rm(self, t: float, fault: Fault) -> None:
        self.sim.log.event("fault", t, detail=fault.text)
        steps = self.rec.rm_killed(t)
        self.sim.rm_up = self.rec.rm_up
        self._push(steps)

    # ----- NodeManagers ---------------------------------------------------------------

    def _nm_lost(self, t: float, changed: dict, node: str, out: NodeOutage, token: int) -> None:
        detail = self.rec.nm_expired(node, out, token, t)
        if detail is not None:
            self._lose(node, out, t, changed, detail)

    def _lose(self, node: str, out: NodeOutage, t: float, changed: dict, detail: str) -> None:
        """The node is LOST: every container the RM had there meets its
        ``fault_rules.fate_on_node_lost``: a started one's attempt ends lost; one not
        started (held for the next attempt: withdrawn; refused by the dead NM: reported)
        leaves no attempt; every task is asked for again."""
        sim = self.sim
        released = sim.scheduler.remove_node(node)
        sim.log.remove_node(node, t, detail=detail)
        unstarted = [c for c in released if fate_on_node_lost(c.app_id not in self.rec.down,
                                                              c.container_id in out.containers) is not Fate.LOST]
        self._end_dead(out, t, changed, detail)
        for c in unstarted:
            self.lost_unstarted(c)
        sim.cluster_changed(changed)
        self._synced(("node", node), t)

    def _end_dead(self, out: NodeOutage, t: float, changed: dict, detail: str, release: bool = False,
                  ids=None) -> None:
        """The silent NM's attempts (``ids``, default all) end lost at ``t``; tasks of apps
        still running are asked again."""
        crashed = out.killed if out.heals is None else t     # a cut NM's containers ran on
        for cid in out.containers if ids is None else ids:
            entry = out.containers[cid]
            if self.sim.end_lost(cid, entry, t, changed, detail, crashed=crashed, release=release):
                self._ask(entry[0].app_id, 1)
        out.containers = {}

    def _nm_back(self, t: float, changed: dict, node: str, out: NodeOutage) -> None:
        """The NM registers again (``fault_rules.on_nm_registers``): a lost one rejoins; one
        the restarted RM never declared lost reconciles; a cut one is heard again."""
        verdict = self.rec.nm_registers(node, out)
        if verdict is not None and out.heals is not None:
            self._healed(t, changed, node, out, verdict)
        elif verdict is Registration.REJOIN:
            self._rejoin(node, t, changed)
        elif verdict is not None:                    # restarted empty, it reports nothing
            self.sim.log.event(verdict.value, t, node=node, detail=nm_registered_detail(0))
            self._end_dead(out, t, changed, rules.NOT_REPORTED, release=True,
                           ids=not_reported(verdict, out.containers, ()))
            self._synced(("node", node), t)

    def _rejoin(self, node: str, t: float, changed: dict) -> None:
        cluster = self.sim.cluster
        index = cluster.node_index[node]
        if not cluster.nodes[index].alive:
            self.sim.join(NodeEvent(t, node, cluster.nodes[index].spec), t, changed)

    def _healed(self, t: float, changed: dict, node: str, out: NodeOutage, verdict: Registration) -> None:
        """A cut NM heard again.  Declared lost, it rejoins and what it ran for attempts the RM
        gave up is killed or, finished, ignored (``Recovery.late_statuses``); else the RM hears
        now the finishes of the cut, the rest runs on, and what waited for the heal starts."""
        sim = self.sim
        if verdict is Registration.REJOIN:
            self._rejoin(node, t, changed)
            for cid, (job, task, _), late in self.rec.late_statuses(out, t):
                sim.log.event(late.value, t, app=job.app_id, task=task, container=cid, node=node,
                              detail=rules.late_status_detail(late, "COMPLETE"))
            return
        for cid, entry in out.containers.items():
            if sim.jobs.get(entry[0].app_id) is not entry[0]:
                sim.end_lost(cid, entry, t, changed, "its application ended", crashed=t)
            elif out.finishes[cid] <= t:
                sim.complete(cid, entry, out.finishes[cid], t, changed)
            else:
                sim.running[cid] = entry
        if verdict is Registration.RESYNC:
            sim.log.event(verdict.value, t, node=node, detail=nm_registered_detail(len(out.containers)))
            self._synced(("node", node), t)
        held = [c for cid, c in out.held.items() if cid in sim.cluster.containers]
        if held:
            sim.place(held, t, changed)

    def leaves(self, node: str, t: float, changed: dict) -> bool:
        """A config leave of a silent NM the RM counts alive: it is lost now.  True when handled here."""
        out = self.rec.nm_leaves(node)
        if out is not None:
            self.rec.declare_lost(node, out)
            self._lose(node, out, t, changed, f"node {node} left")
        return out is not None

    def lost_unstarted(self, c) -> None:
        """A container gone with its node before it started (held for a new attempt, or
        refused by a dead NM): its task is asked for again."""
        down = self.rec.down.get(c.app_id)
        if down is not None:
            down.held.pop(c.container_id, None)
        self._ask(c.app_id, 1)

    def _release(self, t: float, changed: dict, cid: int, app: str) -> None:
        """The AM releases a container the dead NM would not start, and asks again."""
        c = self.sim.cluster.containers.get(cid)
        if c is not None:                            # else lost with its node, or its app ended
            self.sim.scheduler.release(cid)
            self.sim.log.event("release", t, app=app, container=cid, node=c.node,
                               detail=f"the NM refused the launch: {c.node} is down")
            self._ask(app, 1)
            changed[app] = self.sim.jobs[app]

    def _ask(self, app: str, count: int) -> None:
        down = self.rec.down.get(app)
        if down is not None:
            down.owed += count                       # the next attempt asks
        else:
            self.sim.scheduler.ask(app, count)

    # ----- ApplicationMasters ------------------------------------------------------------

    def _am_expire(self, t: float, changed: dict, app: str, down, token: int) -> None:
        failed = self.rec.am_expired(app, down, token, t)
        if failed is None:
            return
        sim = self.sim
        sim.log.event("am_expired", t, app=app, detail=failed.failure.why)
        self._synced(("app", app), t)
        if failed.register is not None:
            sim.log.event("am_launch", t, app=app, detail=failed.failure.launch)
            self._push([failed.register])
        elif app in sim.cluster.apps:
            sim.fail_app(app, t, changed, failed.failure.outcome.failed)

    def _am_register(self, t: float, changed: dict, app: str, down, token: int) -> None:
        """The new attempt registers: it takes over what was allocated meanwhile and asks again."""
        launching = down.launching
        if self.rec.am_registers(app, down, token):
            detail = rules.am_registered_detail(self.rec.attempt[app], self.sim.jobs[app].done,
                                                self._running_per_app()[app])
            self.sim.log.event(on_am_registers(launching).value, t, app=app, detail=detail)
            self._take_over(app, down, t, changed)

    def _am_heard(self, t: float, changed: dict, app: str, down) -> None:
        """A cut AM heard again: it takes over (registering again first if a restarted RM
        waits for it), or its calls are refused if replaced."""
        verdict, fenced = self.rec.am_heard(app, down, app not in self.sim.cluster.apps)
        if verdict is AttemptCall.RESYNC:
            self.sim.log.event(on_am_registers(launching=False).value, t, app=app, detail=rules.am_registered_detail(
                self.rec.attempt.get(app, 1), self.sim.jobs[app].done, self._running_per_app()[app]))
            self._synced(("app", app), t)
        if verdict in (AttemptCall.CURRENT, AttemptCall.RESYNC):
            self._take_over(app, down, t, changed)
        elif verdict is AttemptCall.FENCED:
            self.sim.log.event("fenced", t, app=app, detail=fenced)

    def _take_over(self, app: str, down, t: float, changed: dict) -> None:
        if app in self.sim.cluster.apps:
            if down.held:
                self.sim.place(list(down.held.values()), t, changed)
            if down.owed:
                self.sim.scheduler.ask(app, down.owed)

    def _running_per_app(self) -> Counter:
        """app -> containers the RM counts RUNNING (those on silent NMs not yet lost too)."""
        per = Counter(entry[0].app_id for entry in self.sim.running.values())
        for out in self.rec.outages.values():
            per.update(entry[0].app_id for entry in out.containers.values())
        return per

    # ----- the ResourceManager ----------------------------------------------------------

    def _rm_recovered(self, t: float, changed: dict, token: int) -> None:
        detail = self.rec.rm_recovered(token, t)
        if detail is not None:
            self.sim.log.event("rm_recovered", t, detail=detail)

    def _rm_resync(self, t: float, changed: dict, token: int) -> None:
        """Every live NM and AM registers again; the silent ones expire E from now."""
        sim = self.sim
        apps = [a for a in sim.jobs if a in sim.cluster.apps]
        plan = self.rec.rm_resync(token, t, [n.name for n in sim.cluster.nodes if n.alive], apps)
        if plan is None:
            return
        on_node = Counter(sim.cluster.containers[cid].node for cid in sim.running)
        for node in plan.nodes:
            sim.log.event(Registration.RESYNC.value, t, node=node, detail=nm_registered_detail(on_node[node]))
        per_app = self._running_per_app()
        for app in plan.apps:
            sim.log.event(on_am_registers(launching=False).value, t, app=app, detail=rules.am_registered_detail(
                self.rec.attempt.get(app, 1), sim.jobs[app].done, per_app[app]))
        self._push(plan.expiries)
        self._synced(None, t)
