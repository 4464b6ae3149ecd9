"""The ApplicationMaster side of the ResourceManager's protocol (a part of ``ResourceManagerState``).

In YARN's words (ApplicationMasterService, RMAppAttempt, AMLivelinessMonitor):

* ``register_apps`` — RegisterApplicationMaster.  A new app is accepted (or
  rejected with the reason when no live node could ever run it) as attempt 1.
  An attempt the RM launched registers with its number; an attempt registering
  again after a RESYNC (the RM restarted) is accepted as well.  Either way the
  answer lists the app's finished tasks and its running containers.
* ``allocate`` — the AM heartbeat: releases of unused containers, the absolute
  ask, and what was allocated and completed since the last call.  ``poll``
  finishes a long-polled ``allocate``.  An AM host's idle AMs travel as one
  ``AppMark``: the RM keeps it per host (``Heard.app_marked``, folded into the apps'
  records by ``settle``) and answers only the apps it has something for (``notice``).
* ``finish_apps`` — FinishApplicationMaster: the app is done; containers it
  still holds are killed.
* ``expire`` (``expire_apps``; ``lose_host``: ``lose_am_host``) — an attempt silent for
  ``am_expiry``, or lost with its AM host, FAILS (``fail_attempt``).  Work-preserving
  AM restart (YARN's ``keepContainersAcrossApplicationAttempts``): the app's
  finished tasks stay finished and its RUNNING containers keep running and are
  handed to the next attempt; containers the failed attempt had acquired but
  not started are released and killed if they ever start, since only that
  attempt knew which task each was for.  The RM then launches attempt k+1
  (``pending_launches``; the actor asks the AM host to start it) — or, when
  ``max_attempts`` attempts have failed, the app FAILS and its containers are killed
  (``fault_rules.after_failed_attempt``; an attempt lost with its host does not count).

Fencing (an AM acts only on its own app's containers and only in its current
attempt): ``allocate``, ``finish_apps`` and ``register_apps`` from any other
attempt are answered FENCED and logged (``fenced``); a release naming another
app's container is refused and logged (``refused``).  A registration from a Ray node
the driver reported gone with an AM host (``lose_host``) is fenced too: that host's
processes may outlive Ray's verdict for a moment (a link cut past Ray's health check
delivers what they sent once it heals) and register an app the RM had not heard of,
as the attempt its replacement runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rayrm.rm.core.fault_rules import (AttemptCall, AttemptFailure, Handover, Resync, am_registered_detail,
                                       attempt_fails, fenced_detail, on_am_registers, on_attempt_call,
                                       on_attempt_failed, wall_seconds)
from rayrm.rm.core.scheduler import OnlineScheduler
from rayrm.rm.service.containers import Containers
from rayrm.rm.service.liveness import Heard
from rayrm.rm.service.protocol import (FENCED, NORMAL, RESYNC, RUNNING, SHUTDOWN, AllocateRequest, AllocateResponse,
                                      AppMark, AppRegistered, AppRegistration, ContainerStatus, PreemptionMessage)
from rayrm.rm.service.records import ACQUIRED, ALLOCATED, RELEASED, AppRecord, NodeRecord
from rayrm.rm.service.runrecords import RunRecords

assert {a.value for a in AttemptCall} == {NORMAL, RESYNC, SHUTDOWN, FENCED}, "an attempt's answer is an action"


@dataclass(eq=False, slots=True)
class AppMasters:
    """The apps and their current attempts, and the calls of the AM hosts (module docstring).

    Contract: ``table`` holds every app the RM accepted; an app not ``done`` is in the
    scheduler, and only its current attempt (``AppRecord.attempt``), registered and not
    waiting to resync, may allocate or finish.  ``launching`` holds the apps whose next
    attempt the RM started and that has not registered (the actor's AM launcher reads
    ``pending_launches``), ``failed`` those that ended with tasks unfinished; ``news`` the
    AM hosts with something to deliver (a long poll wakes for them); ``notice`` per AM host
    the apps the RM has, or may have, something for (their idle AMs are answered from it);
    ``hosted`` per AM host the apps not done it runs (those its ``AppMark`` covers).
    ``nodes`` is the ``NodeManagers``' table (a killed container goes on its node's cleanup
    list).
    """

    table: dict[str, AppRecord]
    news: set[str]
    notice: dict[str, set[str]]
    nodes: dict[str, NodeRecord] = field(repr=False)
    containers: Containers = field(repr=False)
    scheduler: OnlineScheduler = field(repr=False)
    records: RunRecords = field(repr=False)
    liveness: Heard = field(repr=False)
    resync: Resync = field(repr=False)
    max_attempts: int = 2
    launching: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    hosted: dict[str, set[str]] = field(default_factory=dict)
    gone_nodes: set[str] = field(default_factory=set)

    def register(self, now: float, caller: str, regs: list[AppRegistration]) -> list[AppRegistered]:
        """Apps arrive or attempts (re-)register; see the module docstring."""
        out = []
        records = self.records
        for reg in regs:
            spec = reg.spec
            app = self.table.get(spec.app_id)
            if reg.ray_node in self.gone_nodes:
                records.refuse(now, "fenced", app=spec.app_id,
                               detail=f"registration of attempt {reg.attempt} from Ray node {reg.ray_node}, gone")
                out.append(AppRegistered(spec.app_id, False, "its Ray node is gone", FENCED,
                                         app.attempt if app is not None else 0))
                continue
            if app is None:
                out.append(self._new_app(now, caller, reg))
                continue
            verdict = on_attempt_call(app.done, reg.attempt, app.attempt, registered=True)
            if verdict is AttemptCall.SHUTDOWN:   # with its finished tasks: an AM host restarted after it ended
                out.append(AppRegistered(spec.app_id, False, "the application has ended", SHUTDOWN,
                                         app.attempt, tuple(sorted(app.finished_tasks))))
                continue
            if verdict is AttemptCall.FENCED:
                records.refuse(now, "fenced", app=spec.app_id,
                               detail=f"registration of attempt {reg.attempt}; the current attempt is {app.attempt}")
                out.append(AppRegistered(spec.app_id, False, "not the current attempt", FENCED, app.attempt))
                continue
            kind = on_am_registers(app.launching).value
            app.launching, app.resync, app.last_seen = False, False, now
            self._rehost(app, caller)
            self.containers.tell(app, wake=False)     # what waits for it, at its host's next allocate
            self.launching.discard(spec.app_id)
            self.liveness.as_of_host(app, caller)
            self.resync.registered(("app", spec.app_id))
            running = tuple(ContainerStatus(c.container, c.app, c.task, c.attempt, c.node, RUNNING,
                                            c.launched if c.launched is not None else now)
                            for c in self.containers.live(app=spec.app_id) if c.state == RUNNING)
            records.event(now, kind, app=spec.app_id,
                          detail=am_registered_detail(app.attempt, len(app.finished_tasks), len(running)))
            out.append(AppRegistered(spec.app_id, True, "", NORMAL, app.attempt,
                                     tuple(sorted(app.finished_tasks)), running))
        records.resynced(self.resync, now)
        return out

    def _new_app(self, now: float, caller: str, reg: AppRegistration) -> AppRegistered:
        spec = reg.spec
        records = self.records
        if reg.attempt != 1:
            records.refuse(now, "fenced", app=spec.app_id,
                           detail=f"registration of attempt {reg.attempt} of an app the RM does not know")
            return AppRegistered(spec.app_id, False, "unknown application", FENCED, 0)
        state, reason = self.scheduler.submit(spec, pending=0)
        t = records.trace(now)
        if state is None:
            records.log.reject(spec, reason, t, records.wall(now))
            return AppRegistered(spec.app_id, False, reason)
        self.table[spec.app_id] = AppRecord(spec, caller, 1, t, last_seen=now)
        self.hosted.setdefault(caller, set()).add(spec.app_id)
        self.liveness.as_of_host(self.table[spec.app_id], caller)
        records.total_tasks += spec.num_tasks
        records.log.submit(spec, t, records.wall(now))
        if reg.ray_node:
            records.event(now, "am_host", app=spec.app_id, detail=f"AM host {caller} on Ray node {reg.ray_node}")
        return AppRegistered(spec.app_id, True)

    def _current(self, now: float, req_app: str, attempt: int, what: str):
        """The app record if ``attempt`` is its current, registered attempt; else the answer."""
        app = self.table.get(req_app)
        if app is None:
            return None, AllocateResponse(req_app, RESYNC)
        verdict = on_attempt_call(app.done, attempt, app.attempt, not (app.resync or app.launching))
        if verdict is AttemptCall.CURRENT:
            return app, None
        if verdict is AttemptCall.FENCED:
            self.records.refuse(now, "fenced", app=req_app, detail=fenced_detail(what, attempt, app.attempt))
        return None, AllocateResponse(req_app, verdict.value)     # RESYNC: register (again) first

    # ----- the AM heartbeat ----------------------------------------------------------------

    def allocate(self, now: float, caller: str, requests: list[AllocateRequest], sent: float,
                 mark: AppMark | None) -> list[AllocateResponse]:
        """AM heartbeats: releases, absolute asks, and what is waiting for each app.

        ``sent``: the host's wall time sending the call (liveness, ``rm/service/liveness.py``).
        ``mark`` (``AppMark``) stands for the host's idle AMs: those whose ask is the one they
        sent last and that release nothing.  It is kept as one entry (``Heard.app_mark``), each
        idle AM counts as its full request again, and only the apps of the host in ``notice``
        are looked at: answered, after the ``requests``' answers, when there is something for
        them (containers, statuses, an action).  Most AMs are idle most of the time, and the
        call's size and the RM's work then follow the AMs with news, not the AMs.
        """
        self.liveness.call(caller, sent)
        out = []
        for req in requests:
            app, refusal = self._current(now, req.app, req.attempt, "allocate")
            if app is None:
                out.append(refusal)
                continue
            app.last_seen = now
            self._rehost(app, caller)
            self.liveness.carried(app, caller, sent)
            for cid in req.releases:
                self._release_unused(now, app, cid)
            app.last_ask = req.ask
            self._set_ask(app, req.ask - len(app.undelivered))
            out.append(self._deliver(app))
        if mark is not None:
            left = frozenset(mark.left_out)
            if self.liveness.app_left.get(caller, frozenset()) != left:
                self.settle((caller,))           # the earlier marks covered apps this one does not
            self.liveness.app_mark(caller, now, sent, left)
            out += self._news(now, caller, {r.app for r in requests}, left)
        return out

    def _news(self, now: float, caller: str, asked: set[str], left: frozenset[str]) -> list[AllocateResponse]:
        """Answers for the idle AMs of ``caller`` the RM has something for (``notice``): what
        waits for it, or why it may not go on (as ``_current`` would answer its request).  An
        app the call asked for by request was answered there; one ``left`` out stays in
        ``notice`` for a later call."""
        names = self.notice.pop(caller, None)
        if not names:
            return []
        later = names & left
        if later:
            self.notice[caller] = later
        out, table, pending = [], self.table, self.scheduler.cluster.apps
        for app_id in sorted(names - asked - left):
            app = table.get(app_id)
            if app is None or app.host != caller:
                continue                         # another host runs it now: nothing to say here
            if not app.active:
                # an earlier attempt, idle while the RM launches the next, is fenced; an
                # attempt a restarted RM waits for registers again; an ended app stops
                action = SHUTDOWN if app.done else RESYNC if app.resync else FENCED
                if action == FENCED:
                    self.records.refuse(now, "fenced", app=app_id,
                                        detail=f"allocate from an idle AM; the current attempt is {app.attempt}")
                out.append(AllocateResponse(app_id, action))
                continue
            # its ask is the one it sent last: less what waits undelivered (an allocation
            # withdrawn meanwhile leaves it one short)
            if max(0, app.last_ask - len(app.undelivered)) != pending[app_id].pending:
                self._set_ask(app, app.last_ask - len(app.undelivered))
            if app.undelivered or app.completed or app.warnings:
                out.append(self._deliver(app))
        return out

    def settle(self, hosts=None) -> None:
        """Fold each AM host's latest mark (of ``hosts``, or all) into the records of the
        attempts it covered, as if the call had carried each (``Heard.carried``): run before
        the records are read (liveness scans, expiry, a restart) or a host's marks change
        what they leave out, so a mark only covers the attempts it was sent for.  An app
        leaving the marks (ending) takes its host's latest mark alone (``_fold``); an attempt
        registering or failing restarts its record from its host's latest call, which a later
        fold never moves back (``Heard.fold``), so neither needs a settle first."""
        marked, left = self.liveness.app_marked, self.liveness.app_left
        if hosts is not None:
            marks = {h: marked.pop(h) for h in hosts if h in marked}
        else:
            marks, self.liveness.app_marked = marked, {}
        table, fold = self.table, self.liveness.fold
        for host, mark in marks.items():
            out = left.get(host, ())
            for app_id in self.hosted.get(host, ()):
                rec = table[app_id]
                if rec.active and app_id not in out:
                    fold(rec, mark)

    def _fold(self, app: AppRecord) -> None:
        """Its host's latest mark, into ``app``'s record alone (it is about to leave the marks)."""
        mark = self.liveness.app_marked.get(app.host)
        if mark is not None and app.active and app.spec.app_id not in self.liveness.app_left.get(app.host, ()):
            self.liveness.fold(app, mark)

    def _rehost(self, app: AppRecord, caller: str) -> None:
        """``caller`` runs ``app``'s AM (registered or heard from there)."""
        if app.host != caller:
            self.settle((app.host,))             # its old host's marks covered it until now
            hosted = self.hosted.get(app.host)
            if hosted is not None:
                hosted.discard(app.spec.app_id)
            app.host = caller
        if not app.done:
            self.hosted.setdefault(caller, set()).add(app.spec.app_id)

    def poll(self, now: float, caller: str, requests: list[AllocateRequest],
             mark: AppMark | None) -> list[AllocateResponse]:
        """Deliver what arrived since ``allocate`` answered the same request (the long poll).
        The idle AMs (``mark``) are answered only when something arrived for them; they stay
        in ``notice`` (the next allocate looks at their asks and says why one may not go on).

        Only a delivery changes the state: the AMs were heard when the call arrived
        (``allocate``), not when the RM answers, so a poll with nothing to deliver
        changes nothing and is not journaled."""
        out = []
        for req in requests:
            app = self.table.get(req.app)
            if app is None or not app.active or app.attempt != req.attempt:
                out.append(AllocateResponse(req.app))     # the next allocate says why
                continue
            out.append(self._deliver(app))
        names = self.notice.get(caller) if mark is not None else None
        if names:
            skip = {r.app for r in requests} | set(mark.left_out)
            for app_id in sorted(names - skip):
                app = self.table.get(app_id)
                if app is None or app.host != caller or not app.active:
                    continue                               # the next allocate says why
                if app.undelivered or app.completed or app.warnings:
                    out.append(self._deliver(app))
        return out

    def _deliver(self, app: AppRecord) -> AllocateResponse:
        allocated, app.undelivered = tuple(app.undelivered), []
        completed, app.completed = tuple(app.completed), []
        table = self.containers.table
        for a in allocated:
            c = table[a.container]
            if c.state == ALLOCATED:
                self.containers.set_state(c, ACQUIRED)
        warned = None
        if app.warnings:
            warned, app.warnings = PreemptionMessage(tuple(app.warnings)), []
        return AllocateResponse(app.spec.app_id, NORMAL, allocated, completed, warned)

    def _set_ask(self, app: AppRecord, wanted: int) -> None:
        state = self.scheduler.cluster.apps[app.spec.app_id]
        wanted = max(0, wanted)
        if wanted > state.pending:
            self.scheduler.ask(app.spec.app_id, wanted - state.pending)
        elif wanted < state.pending:
            self.scheduler.cancel(app.spec.app_id, state.pending - wanted)

    def _release_unused(self, now: float, app: AppRecord, cid: int) -> None:
        c = self.containers.table.get(cid)
        if c is not None and c.app != app.spec.app_id:
            self.records.refuse(now, "refused", app=app.spec.app_id, container=cid, node=c.node,
                                detail=f"release of a container of app {c.app}")
            return
        if c is None or c.state not in (ALLOCATED, ACQUIRED):
            return
        self.containers.withdraw(c)
        self.records.event(now, "release", app=c.app, container=cid, node=c.node)

    # ----- apps ending ---------------------------------------------------------------------

    def finish(self, now: float, items: list[tuple[str, int]]) -> list[str]:
        """AMs unregister (YARN FinishApplicationMaster); containers left are cleaned up."""
        out = []
        for app_id, attempt in items:
            app = self.table.get(app_id)
            if app is not None and app.done:
                out.append(NORMAL)
                continue
            if app is not None and app.resync and attempt == app.attempt:
                app.resync = False                 # finishing is as good as registering again
                self.resync.registered(("app", app_id))
            app, refusal = self._current(now, app_id, attempt, "finish")
            if app is None:
                out.append(refusal.action)
                continue
            self._finish_app(now, app)
            out.append(NORMAL)
        return out

    def _finish_app(self, now: float, app: AppRecord, reason: str = "") -> None:
        """The app ends: finished if every task finished once, else failed."""
        app_id = app.spec.app_id
        self._fold(app)                          # its host's latest mark covered it until now
        app.done = True
        hosted = self.hosted.get(app.host)
        if hosted is not None:
            hosted.discard(app_id)
        self.resync.registered(("app", app_id))
        containers, records = self.containers, self.records
        for c in self.scheduler.finish_app(app_id):
            rec = containers.table[c.container_id]
            if rec.state == RUNNING:           # still running: the NM kills it
                self.nodes[rec.node].cleanup.append(c.container_id)
            else:
                containers.set_state(rec, RELEASED)
        records.touched.add(app_id)
        status = "finished" if len(app.finished_tasks) == app.spec.num_tasks else "failed"
        self.launching.discard(app_id)
        if status == "failed":
            self.failed.add(app_id)
        t = app.last_finish if app.last_finish is not None and status == "finished" else records.trace(now)
        records.log.app_done(app_id, t, records.wall(now), status=status)
        if reason:
            records.log.mark(app_id, status, reason)
            self.containers.tell(app, wake=False)     # an AM of it still idle is told to stop
        records.resynced(self.resync, now)

    # ----- AM liveness and attempts ----------------------------------------------

    def expire(self, now: float, expiry_wall: float, names: list[str] | None = None) -> list[str]:
        """Attempts silent for longer than ``expiry_wall`` seconds fail; returns their apps.

        ``names``: the apps whose attempt the RM decided is silent (``rm/service/liveness.py``);
        without it, wall-clock silence.
        """
        table = self.table
        if names is None:
            self.settle()
        gone = [a for a, r in table.items() if not r.done and now - r.last_seen > expiry_wall] \
            if names is None else [a for a in names if a in table and not table[a].done]
        for a in gone:
            app = table[a]
            self.fail_attempt(now, a, attempt_fails(app.attempt, app.uncounted, self.max_attempts,
                                                    launching=app.launching, silence=now - app.last_seen,
                                                    seconds=wall_seconds))
        return gone

    def fail_attempt(self, now: float, app_id: str, failure: AttemptFailure) -> None:
        """The app's current attempt FAILED (``fault_rules.attempt_fails``): keep its work,
        start the next attempt or fail the app.  Its containers meet
        ``fault_rules.on_attempt_failed``: running ones are kept, undelivered ones stay
        for the next attempt, those delivered and not started are withdrawn."""
        app = self.table[app_id]
        self.records.event(now, "am_expired", app=app_id, detail=failure.why)
        for c in self.containers.live(app=app_id):
            if on_attempt_failed(c.state != ALLOCATED, c.state == RUNNING) is Handover.WITHDRAWN:
                self.containers.withdraw(c)
                node = self.nodes.get(c.node)
                if node is not None and node.alive:
                    node.cleanup.append(c.container)
        self.resync.registered(("app", app_id))
        self.records.resynced(self.resync, now)
        outcome = failure.outcome
        app.uncounted = outcome.uncounted
        if outcome.failed:
            self._finish_app(now, app, reason=outcome.failed)
            return
        app.attempt = outcome.attempt
        app.launching, app.resync, app.last_seen = True, False, now
        self.containers.tell(app, wake=False)    # its AM, if still idle on its host, is fenced
        self.launching.add(app_id)
        self.liveness.as_of_host(app, app.host)              # the new attempt's silence starts now
        self.records.event(now, "am_launch", app=app_id, detail=failure.launch)

    def lose_host(self, now: float, host: str, detail: str, ray_node: str = "") -> list[str]:
        """The AM host ``host`` died: every current attempt it ran fails, uncounted, and the
        RM starts the next (YARN's work-preserving AM restart: finished tasks stay
        finished, running containers are handed over, those granted but not started are
        released).  ``ray_node``: the host's Ray node, gone with it (fenced from now on).
        Returns the apps."""
        if ray_node:
            self.gone_nodes.add(ray_node)
        gone = sorted(a for a, r in self.table.items() if r.host == host and not r.done)
        for a in gone:
            app = self.table[a]
            self.fail_attempt(now, a, attempt_fails(app.attempt, app.uncounted, self.max_attempts, host_lost=detail))
        return gone

    def pending_launches(self) -> list[tuple[str, str, int]]:
        """(AM host, app, attempt) of every attempt the RM started that has not registered."""
        table = self.table
        return [(table[a].host, a, table[a].attempt) for a in sorted(self.launching)
                if table[a].launching and not table[a].done]

    def failed_apps(self) -> list[tuple[str, str]]:
        """(AM host, app) of every app that ended without all its tasks finished."""
        return [(self.table[a].host, a) for a in sorted(self.failed)]
