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

T is in trace seconds (a number >= 0).  ``parse_fault`` checks the form;
``check_targets`` that NODE and APP exist in the config; the replay checks
Ray-node and host indexes against the cluster it runs on.  Errors are one-line
``InputError``s.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rayrm.rm.core.errors import InputError

#: kind -> what its target names (None: no target)
KINDS = {"kill-nm": "NODE", "kill-nm-host": "INDEX", "kill-am": "APP", "kill-rm": None,
         "kill-ray-node": "INDEX", "stall-rm": "SECONDS", "kill-am-host": "INDEX"}
EXAMPLE = "e.g. kill-nm:n30@60, kill-am:job2@50, kill-rm@100, kill-ray-node:1@30"
_FORM = re.compile(r"^(?P<kind>[a-z-]+)(?::(?P<target>[^@]*))?@(?P<time>.*)$")


def _positive_number(text: str) -> bool:
    try:
        return math.isfinite(float(text)) and float(text) > 0
    except ValueError:
        return False


@dataclass(frozen=True)
class Fault:
    """One fault to inject: ``kind`` at trace time ``time`` on ``target``."""

    kind: str
    target: str
    time: float
    text: str

    @property
    def index(self) -> int:
        return int(self.target)

    @property
    def seconds(self) -> float:
        return float(self.target)


def parse_fault(text: str) -> Fault:
    """A Fault from ``KIND[:TARGET]@T``; raises InputError saying what is wrong."""
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
    try:
        t = float(when)
    except ValueError:
        raise InputError(f"fault {spec!r}: the time after '@' must be a number of trace seconds, "
                         f"got {when!r}") from None
    if not math.isfinite(t) or t < 0:
        raise InputError(f"fault {spec!r}: the time must be >= 0 trace seconds, got {when!r}")
    return Fault(kind, target, t, spec)


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
        if f.kind == "kill-am-host" and f.index >= am_hosts:
            many = f"s (0..{am_hosts - 1})" if am_hosts > 1 else " (0)"
            raise InputError(f"fault {f.text!r}: the replay has {am_hosts} ApplicationMaster host{many}")
        if f.kind == "kill-nm-host" and f.index >= nm_hosts:
            many = f"s (0..{nm_hosts - 1})" if nm_hosts > 1 else " (0)"
            raise InputError(f"fault {f.text!r}: the replay has {nm_hosts} NodeManager host{many}")


def am_host_of(apps, hosts: int) -> dict[str, int]:
    """Which AM host (0..hosts-1) runs each app's AM: the apps by (submit, app id), dealt
    in turn, the k-th to host k mod ``hosts``.  The replay deals its AM hosts' jobs so
    (rm/runtime/driver.py) and the simulator's kill-am-host follows it (rm/sim/faults.py).
    ``apps``: AppSpecs."""
    n = max(1, int(hosts))
    ordered = sorted(apps, key=lambda a: (a.submit, a.app_id))
    return {a.app_id: k % n for k, a in enumerate(ordered)}


def config_faults(config, extra=()) -> list[Fault]:
    """The config's ``faults:`` and the ``extra`` specs (``--fault``), checked against its
    nodes (joining ones too) and jobs, by time."""
    if not config.faults and not extra:
        return []
    nodes = {n.name for n in config.nodes} | {e.node for e in config.node_events if e.spec is not None}
    apps = {j.job_id for j in config.jobs}
    both = parse_faults(list(config.faults), nodes, apps) + parse_faults(list(extra), nodes, apps)
    return sorted(both, key=lambda f: f.time)
