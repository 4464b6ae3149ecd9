"""The driver's side of a running replay: progress, NM host supervision, fault injection.

``Supervisor.run`` waits for the ApplicationMaster host to finish and meanwhile:

* **watches the NodeManager hosts.**  Each host's ``lifeline()`` call is held
  open; Ray fails it as soon as the host actor dies, so a dead host is noticed at
  once rather than after ``nm_expiry`` heartbeats.  The driver then tells the RM
  (``lose_host``: every NM of that host is LOST, its containers reported lost to
  their AMs) and calls ``resume`` on the host, which Ray is restarting
  (``max_restarts``): the restarted host registers its NMs again.  A host whose
  Ray node is gone cannot restart; its NMs stay lost.  An AM host whose node is gone
  is made again on another node (``rayrm.nodes.placement``).
* **injects faults** (``rayrm.rm.core.faults``) at their trace times, or after the first
  event they wait for (``FaultInjector``), each first logged by the RM as a ``fault`` event
  so recovery can be measured from events.csv.
* **shows progress** on stderr: on a terminal one line rewritten every second;
  otherwise (CI, ``ray job logs``, nohup) a plain line every ``PLAIN_EVERY`` wall
  seconds — trace time, running, finished, pending, and how far the RM is behind
  (``lag``, wall seconds) — and raises when nothing moves for ``stall_after``
  seconds.  Every RM call tolerates the RM restarting (it is retried).
"""

from __future__ import annotations

import sys
import time

from rayrm.rm.core.clock import TraceClock
from rayrm.rm.core.fault_rules import LinkFault, am_host_died
from rayrm.rm.core.faults import Fault
from rayrm.nodes.placement import Homes, host_gone_errors
from rayrm.rm.service.calls import Call
from rayrm.rm.service.client import BUDGET, MAX_DELAY

NM_HOST_RESTARTS = 3          # Ray restarts of one NodeManager host actor
AM_HOST_RESTARTS = 3          # Ray restarts of one ApplicationMaster host actor
RESUME_RETRY = 0.2            # wall seconds before asking a restarting NM host to resume again
#: how a replay that cannot go on is ended (its interrupt reason starts so; the CLI exits 1)
STUCK = "the replay cannot go on"
PLAIN_EVERY = 10.0            # wall seconds between progress lines when stderr is not a terminal


def rm_call(method, *args):
    """``ray.get(method.remote(*args))`` for a method of the RM actor, retried while it
    restarts (as ``rayrm.rm.service.client`` does)."""
    import ray  # noqa: PLC0415
    deadline, delay = time.time() + BUDGET, 0.05
    while True:
        try:
            return ray.get(method.remote(*args), timeout=BUDGET)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            if time.time() > deadline:
                raise
            time.sleep(delay)
            delay = min(MAX_DELAY, delay * 2)


class FaultInjector:
    """Injects ``faults`` at their trace times on ``clock`` (see rm.faults).  One waiting for
    an event (``Fault.after``) is due once the RM has logged the first such event: the
    injector asks the RM for its time (``first_event``, a call answered then, whose ref the
    supervisor waits on with the hosts': ``watches``, ``seen``) and asks again when the RM
    died meanwhile, the restarted one answering from its rebuilt log."""

    def __init__(self, faults: list[Fault], *, clock: TraceClock, rm, am, hosts: dict,
                 am_hosts: dict | None = None,
                 host_of_node: dict[str, str], ray_nodes: list, nms_on_ray_node: dict[str, list[str]],
                 nm_restart_after: float, kill_ray_node=None):
        self.todo = sorted((f for f in faults if not f.after), key=lambda f: f.time)
        self.waiting = [f for f in faults if f.after]          # for their event, in order given
        self._watch: dict = {}                                 # first_event ref -> event kind
        self._rewatch: dict[str, float] = {}                   # kind -> when to ask again
        self.clock = clock
        self.rm, self.am, self.hosts, self.am_hosts = rm, am, hosts, am_hosts or {}
        self.host_of_node, self.ray_nodes, self.nms_on = host_of_node, ray_nodes, nms_on_ray_node
        self.restart_after = nm_restart_after
        self.kill_ray_node = kill_ray_node or kill_raylet
        self.done: list[tuple[Fault, float]] = []
        self._rid = 0

    def seconds_to_next(self) -> float:
        if not self.todo:
            return float("inf")
        return max(0.0, self.clock.wall(self.todo[0].time) - time.time())

    def watches(self) -> list:
        """The refs of the RM's ``first_event`` calls for the events faults wait for, asked
        now for those not out (again ``RESUME_RETRY`` after one failed with the RM)."""
        now = time.time()
        out = set(self._watch.values())
        for kind in dict.fromkeys(f.after for f in self.waiting):
            if kind not in out and self._rewatch.get(kind, 0.0) <= now:
                self._watch[self.rm.first_event.remote(kind)] = kind
        return list(self._watch)

    def seen(self, ref) -> None:
        """A ``first_event`` call answered: the faults waiting for its event are due from
        its trace time (``Fault.fired``); a call the RM died under is asked again."""
        import ray  # noqa: PLC0415
        kind = self._watch.pop(ref)
        try:
            at = ray.get(ref)
        except ray.exceptions.RayError:
            self._rewatch[kind] = time.time() + RESUME_RETRY
            return
        self.todo = sorted(self.todo + [f.fired(at) for f in self.waiting if f.after == kind], key=lambda f: f.time)
        self.waiting = [f for f in self.waiting if f.after != kind]

    def seconds_to_watch(self) -> float:
        """Wall seconds until a failed ``first_event`` call is asked again (inf: none is)."""
        asked = [at for kind, at in self._rewatch.items() if kind not in self._watch.values()
                 and any(f.after == kind for f in self.waiting)]
        return max(0.0, min(asked) - time.time()) if asked else float("inf")

    def inject_due(self) -> None:
        import ray  # noqa: PLC0415
        while self.todo and self.seconds_to_next() <= 0:
            f = self.todo.pop(0)
            try:
                self._inject(f)
            except ray.exceptions.RayActorError as e:     # its target is already gone
                print(f"rayrm replay: fault {f.text} not injected: {type(e).__name__}", file=sys.stderr)
            self.done.append((f, time.time()))

    def _log(self, f: Fault, node: str = "", app: str = "", extra: str = "") -> None:
        self._rid += 1
        detail = f.text + (f" ({extra})" if extra else "")
        rm_call(self.rm.call, Call.FAULT, "driver", self._rid, detail, node, app)

    def _inject(self, f: Fault) -> None:
        import ray  # noqa: PLC0415
        if f.kind == "kill-nm":
            self._log(f, node=f.target)
            host = self.hosts[self.host_of_node[f.target]]
            ray.get(host.kill_nm.remote(f.target, self.restart_after))
        elif f.kind == "kill-nm-host":
            host_id = f"nm-{f.index}"
            nodes = sorted(n for n, h in self.host_of_node.items() if h == host_id)
            self._log(f, extra=f"{host_id}: {' '.join(nodes)}")
            ray.kill(self.hosts[host_id], no_restart=False)
        elif f.kind == "kill-am-host":
            host_id = f"am-{f.index}"
            self._log(f, extra=host_id)
            ray.kill(self.am_hosts[host_id], no_restart=False)
        elif f.kind == "kill-am":
            self._log(f, app=f.target)
            ray.get(self.am[f.target].kill_am.remote(f.target))
        elif f.kind == "kill-rm":
            self._log(f)
            ray.kill(self.rm, no_restart=False)
        elif f.kind == "stall-rm":
            self._log(f, extra=f"{f.seconds:g} wall seconds")
            self.rm.stall.remote(f.seconds)              # not awaited: it holds the RM's loop
        elif f.kind in LINK_KINDS:
            self._link(f)
        elif f.kind == "kill-ray-node":
            target = self.ray_nodes[f.index]
            self._log(f, extra=f"ray node {target.node_id[:12]}: {' '.join(self.nms_on.get(target.node_id, []))}")
            self.kill_ray_node(target.node_id)


    def _link(self, f: Fault) -> None:
        """A partition, slow or lossy link: the hosts behind it get a ``LinkFault`` on the wall
        clock, from now for D trace seconds (every host for ``drop``)."""
        import ray  # noqa: PLC0415
        now = time.time()
        end = now + self.clock.wall_seconds(f.duration)
        kind, family = LINK_KINDS[f.kind]
        fault = LinkFault(kind, now, end, delay=f.ms / 1000.0, p=float(f.target) if kind == "drop" else 0.0)
        if family == "all":
            targets = {**self.hosts, **self.am_hosts}
        else:
            hid = f"{family}-{f.index}"
            targets = {hid: (self.hosts if family == "nm" else self.am_hosts)[hid]}
        if family == "nm":
            behind = sorted(n for n, h in self.host_of_node.items() if h in targets)
        else:                                    # the apps whose AMs the host runs
            ids = {h._actor_id for h in targets.values()}
            behind = sorted(a for a, h in self.am.items() if h._actor_id in ids) if family == "am" else []
        # detail "(until wall +Ds; HOST: NMs or apps)": recovery.affected_nodes reads the list
        self._log(f, extra=f"until wall +{end - now:.3f}s; {' '.join(sorted(targets))}: {' '.join(behind)}")
        ray.get([h.link_fault.remote(fault) for h in targets.values()], timeout=BUDGET)


#: link fault kind -> (LinkFault kind, the hosts it is on: nm, am or all)
LINK_KINDS = {"partition-nm-host": ("partition", "nm"), "partition-am-host": ("partition", "am"),
              "slow-nm-host": ("slow", "nm"), "slow-am-host": ("slow", "am"), "drop": ("drop", "all")}


def kill_raylet(node_id: str) -> None:
    """Take a Ray node down as a machine failure would: a task pinned there kills the
    node's raylet (the worker's parent) and every process it started, itself last.

    Killing the raylet alone is not enough: actors there keep running and calling
    each other directly for a while.  Linux (/proc); elsewhere only the raylet dies.
    """
    import ray  # noqa: PLC0415
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415

    @ray.remote(num_cpus=0, max_retries=0)
    def _kill_node():
        import os  # noqa: PLC0415
        import signal  # noqa: PLC0415
        raylet, me = os.getppid(), os.getpid()
        doomed = _descendants(raylet)              # before the kill: then they are re-parented
        os.kill(raylet, signal.SIGKILL)
        for pid in doomed:
            if pid != me:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        os.kill(me, signal.SIGKILL)

    _kill_node.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, theirs, ...) from /proc; [] without /proc."""
    import os  # noqa: PLC0415
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for d in entries:
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def progress_line(label: str, p: dict, total: int) -> str:
    """One progress line from the RM's ``progress()``; says so when the RM is behind."""
    lag = p.get("lag", 0.0)
    line = (f"rayrm replay [{label}] t={p['time']:8.1f}s  running {p['running']:5d}  "
            f"finished {p['finished']}/{total}  pending {p['pending']}  lag {lag:.2f}s")
    return line + ("  BEHIND" if p.get("behind") else "")


def merge_outcomes(outcomes: list[dict]) -> dict:
    """The AM hosts' outcomes as one: apps merged, counts and samples summed."""
    merged = {"apps": {}, "calls": 0, "crashes": 0, "delivery": [], "link_lost": {"request": 0, "answer": 0}}
    for o in outcomes:
        for leg, n in o.get("link_lost", {}).items():
            merged["link_lost"][leg] += n
        merged["apps"].update(o.get("apps", {}))
        merged["calls"] += o.get("calls", 0)
        merged["crashes"] += o.get("crashes", 0)
        merged["delivery"] += o.get("delivery", [])
        merged.setdefault("warned", []).extend(o.get("warned", []))
    return merged


class StopSignal:
    """Turns SIGINT and SIGTERM into a request to end the replay (``reason``) instead of
    killing it, so the driver still writes what happened and cleans up its actors.

    Installed for the whole replay (setup too) and ``restore``d after; a second signal
    of the same kind while stopping takes the default action.
    """

    def __init__(self, install: bool = True):
        import signal  # noqa: PLC0415
        import threading  # noqa: PLC0415
        self.reason = ""
        self._old: dict = {}
        if install and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)

    def set(self, reason: str) -> None:
        self.reason = self.reason or reason

    def _handle(self, signum, frame) -> None:
        import signal  # noqa: PLC0415
        name = signal.Signals(signum).name
        if self.reason.startswith(name):
            signal.signal(signum, self._old.get(signum, signal.SIG_DFL))
            signal.raise_signal(signum)
        self.set(f"{name} received")
        print(f"\nrayrm replay: {name}: stopping, writing what ran so far (again to force)",
              file=sys.stderr, flush=True)

    def restore(self) -> None:
        import signal  # noqa: PLC0415
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()


class Supervisor:
    """Waits for the AMs while watching hosts and injecting faults (module docstring)."""

    def __init__(self, rm, hosts: dict, injector: FaultInjector | None, *, ams: dict | None = None,
                 homes: Homes | None = None,
                 clock: TraceClock, total: int, label: str, progress: bool | None, stall_after: float,
                 until: float | None = None, stop: "StopSignal | None" = None):
        self.rm, self.hosts, self.injector = rm, hosts, injector
        self.clock = clock
        self.total, self.label, self.stall_after = total, label, stall_after
        self.show = True if progress is None else progress
        self.dead_hosts: set[str] = set()
        self.host_restarts = 0
        self._resume_since: dict[str, float] = {}       # NM host -> first resume that found it restarting
        self.ams = ams or {}
        self.homes = homes or Homes({})
        self.am_host_restarts = 0
        self._rid = 10_000_000        # driver request ids apart from the injector's
        self.until_wall = None if until is None else clock.wall(until)
        self.stop = stop or StopSignal(install=False)

    def run(self, done_refs: dict) -> dict:
        """The AM hosts' outcomes merged, or ``{"interrupted": reason}`` when the run was
        stopped (a signal, or trace time ``until`` reached) before every AM was done."""
        import ray  # noqa: PLC0415
        waiting, outcomes = dict(done_refs), []         # AM host run() ref -> host id
        lifelines = {h.lifeline.remote(): hid for hid, h in self.hosts.items()}
        resuming: dict = {}
        retry: dict[str, float] = {}                     # NM host -> when its resume is asked again
        tty = sys.stderr.isatty()
        last_change, last_key, last_print, last_poll = time.time(), None, 0.0, 0.0
        p = {"time": 0.0, "running": 0, "finished": 0, "pending": 0, "allocations": 0}
        while True:
            watches = self.injector.watches() if self.injector else []
            wait = min(1.0, self.injector.seconds_to_next(), self.injector.seconds_to_watch()) \
                if self.injector else 1.0
            now = time.time()
            for hid in [h for h, at in retry.items() if at <= now]:
                del retry[hid]
                resuming[self.hosts[hid].resume.remote(self.clock)] = hid
            if retry:
                wait = max(0.0, min(wait, min(retry.values()) - now))
            if self.until_wall is not None:
                wait = max(0.0, min(wait, self.until_wall - time.time()))
            ready, _ = ray.wait([*waiting, *lifelines, *resuming, *watches], num_returns=1, timeout=wait)
            for ref in ready:
                if ref in waiting:
                    hid = waiting.pop(ref)
                    try:
                        outcomes.append(ray.get(ref))
                    except host_gone_errors() as e:
                        waiting[self._am_host_down(hid, e)] = hid
                elif ref in lifelines:
                    self._host_down(lifelines.pop(ref), ref, resuming)
                elif ref in resuming:
                    self._resumed(resuming.pop(ref), ref, lifelines, retry)
                else:
                    self.injector.seen(ref)
            if self.injector is not None:
                self.injector.inject_due()
            now = time.time()
            done = not waiting
            if now - last_poll >= 1.0 or done:
                last_poll = now
                try:
                    p = ray.get(self.rm.progress.remote(), timeout=5.0)
                except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                    pass                                 # the RM is restarting
                if p.get("policy_error"):               # the RM stopped scheduling: end the replay
                    self.stop.set(f"policy error: {p['policy_error']}")
                key = (p["finished"], p["allocations"], p["running"])
                if key != last_key:
                    last_key, last_change = key, now
                if self.show and (tty or now - last_print >= PLAIN_EVERY or done):
                    line = progress_line(self.label, p, self.total)
                    print(("\r" + line) if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)
                    last_print = now
            if not done and self.until_wall is not None and now >= self.until_wall:
                self.stop.set(f"--until {self.clock.trace(self.until_wall):g} reached")
            if self.stop.reason and not done:
                if self.show and tty:
                    print(file=sys.stderr)
                return {"interrupted": self.stop.reason}
            if done:
                if self.show and tty:
                    print(file=sys.stderr)
                return merge_outcomes(outcomes)
            if now - last_change > self.stall_after:
                # it cannot go on: end it as an interrupt does, so the run directory says why
                self.stop.set(f"{STUCK}: no progress for {self.stall_after:.0f}s (finished {p['finished']}/"
                              f"{self.total}, running {p['running']}, pending {p['pending']})")

    def _resumed(self, hid: str, ref, lifelines: dict, retry: dict) -> None:
        """NM host ``hid``'s resume answered: watch its new lifeline, or ask again shortly
        while Ray is still restarting it (the RM loses a host's NMs in one quick call, so
        resume can arrive first), or give the host up after ``BUDGET`` seconds."""
        import ray  # noqa: PLC0415
        try:
            ray.get(ref)
            lifelines[self.hosts[hid].lifeline.remote()] = hid
            self.host_restarts += 1
            self._resume_since.pop(hid, None)
        except ray.exceptions.ActorUnavailableError:
            since = self._resume_since.setdefault(hid, time.time())
            if time.time() - since < BUDGET:
                retry[hid] = time.time() + RESUME_RETRY
            else:
                self._host_lost(hid, f"still unavailable after {BUDGET:.0f}s")
        except ray.exceptions.RayError as e:
            self._host_lost(hid, f"{type(e).__name__}: {str(e)[:200]}")

    def _am_host_down(self, hid: str, error) -> object:
        """An AM host died: the RM fails its attempts (uncounted) and launches new ones, and
        the host — restarted by Ray with its jobs, or made again on another node when its
        own is gone (``Homes.rehome_am_host``) — runs again; returns its new run() ref."""
        import ray  # noqa: PLC0415
        if self.am_host_restarts >= AM_HOST_RESTARTS * max(1, len(self.ams)) or hid not in self.ams:
            raise RuntimeError(f"ApplicationMaster host {hid} died: {error}")
        self.am_host_restarts += 1
        self._rid += 1
        node_gone = isinstance(error, ray.exceptions.ActorUnschedulableError) or self.homes.am_node_gone(hid)
        rm_call(self.rm.call, Call.LOSE_AM_HOST, "driver-am-hosts", self._rid, hid,
                am_host_died(hid, type(error).__name__), self.homes.am[hid] if node_gone else "")
        if node_gone:
            self.ams[hid] = self.homes.rehome_am_host(hid, self.ams[hid])
        else:
            try:
                rm_call(self.ams[hid].outcome_now)       # returns once Ray has restarted the host
            except host_gone_errors():                  # its node was declared dead meanwhile
                self.ams[hid] = self.homes.rehome_am_host(hid, self.ams[hid])
        return self.ams[hid].run.remote(self.clock)

    def _host_lost(self, hid: str, why: str) -> None:
        """The NM host could not be resumed (its Ray node is gone): its NMs stay lost, and
        the RM hears they left for good (a job only they could run is rejected from now on)."""
        self.dead_hosts.add(hid)
        self._resume_since.pop(hid, None)
        host_of_node = self.injector.host_of_node if self.injector is not None else {}
        for name in sorted(n for n, h in host_of_node.items() if h == hid):
            rm_call(self.rm.call, Call.LOSE_NODE, name, f"NM host {hid} is gone ({why})", True)
        print(f"\nrayrm replay: NodeManager host {hid} not restarted, its NMs stay lost ({why})",
              file=sys.stderr, flush=True)
        if self.dead_hosts >= set(self.hosts):
            self.stop.set(f"{STUCK}: every NodeManager host is lost for good")

    def _host_down(self, hid: str, ref, resuming: dict) -> None:
        """A lifeline returned: the host was stopped, its heartbeat loop failed, or it died."""
        import ray  # noqa: PLC0415
        try:
            error = ray.get(ref)
        except host_gone_errors() as e:
            why = type(e).__name__
        else:
            if error:
                raise RuntimeError(f"a NodeManager host failed: {error}")
            return
        self._rid += 1
        rm_call(self.rm.call, Call.LOSE_HOST, "driver-hosts", self._rid, hid, f"NM host {hid} died ({why})")
        resuming[self.hosts[hid].resume.remote(self.clock)] = hid

    def stop_hosts(self, timeout: float = 10.0, ask_rm: bool = True) -> list[dict]:
        """Stop every host that still runs a live NM; returns their measurements.

        A host on a Ray node that died may not be known dead yet; the RM, which lost
        its NMs, says which hosts are worth asking (``ask_rm``; an interrupted replay
        does not wait for a busy RM and asks every host, each within ``timeout``).
        """
        import ray  # noqa: PLC0415
        alive = set(rm_call(self.rm.progress)["hosts_alive"]) if ask_rm else set(self.hosts)
        refs = [h.stop.remote() for hid, h in self.hosts.items() if hid in alive and hid not in self.dead_hosts]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        out = []
        for ref in ready:
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayError:
                pass
        return out


def link_losses(outcome: dict, host_stats: list) -> dict:
    """Calls ("request") and answers ("answer") the faulty links lost, AM and NM hosts together."""
    out = dict(outcome.get("link_lost") or {"request": 0, "answer": 0})
    for s in host_stats:
        for leg, n in (s.get("link_lost") or {}).items():
            out[leg] = out.get(leg, 0) + n
    return out
