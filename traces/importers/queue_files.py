"""YARN's queue files as rayrm's ``queues:`` list: Fair Scheduler allocations, capacity-scheduler.xml.

:func:`read_yarn_queues` tells the file by its root element and returns the tree in the
config's schema (``rayrm.rm.core.queues.tree``) with the policy the file gives for queues
that set none.

**Fair Scheduler allocation file** (``<allocations>``; Hadoop's FairScheduler.html,
"Allocation file format"), per ``<queue name=...>`` (or the legacy ``<pool>``), nested:

* ``weight`` -> ``weight``; ``maxRunningApps`` -> ``max_apps``;
* ``minResources`` / ``maxResources`` -> ``min`` / ``max``, in any of the file's three forms:
  ``1024 mb, 1 vcores``; ``memory-mb=1024, vcores=1`` (any resource type, percentages
  allowed: ``memory-mb=50%, vcores=50%``); ``50% memory, 25% cpu`` or one ``50%`` for every
  resource.  ``mb``/``memory-mb`` -> ``memory_mb``, ``vcores`` -> ``cpu``, ``yarn.io/gpu`` -> ``gpu``;
* ``schedulingPolicy`` (or the older ``schedulingMode``) -> ``policy``: ``fair`` ->
  ``cmmf-mem`` (YARN's FairSharePolicy is max-min fairness on memory), ``drf`` -> ``drf``,
  ``fifo`` -> ``fifo``, and the policies' class names alike;
* ``minSharePreemptionTimeout``, ``fairSharePreemptionTimeout`` (seconds),
  ``fairSharePreemptionThreshold`` -> ``preemption``; a queue without one inherits its
  parent's, root's from ``defaultMinSharePreemptionTimeout`` etc., as the Fair Scheduler does;
* ``queueMaxAppsDefault`` / ``queueMaxResourcesDefault`` apply to every queue without its own;
  ``defaultQueueSchedulingPolicy`` (or root's ``schedulingPolicy``) is the tree's policy;
* a ``<queue name="root">`` is root itself: its children are the tree.  ``type="parent"``
  without children is a leaf here (rayrm creates no queues while it runs).
* Not modelled, listed in a note: ``maxAMShare``, ACLs, ``<user>`` limits, placement rules,
  reservations and the like.

A ``<configuration>`` naming ``yarn.scheduler.fair.allocation.file`` (SLS's own
``fair-scheduler.xml``) is followed to that file, looked up beside the one given.

**Capacity Scheduler** (``<configuration>`` of ``yarn.scheduler.capacity.*`` properties;
Hadoop's CapacityScheduler.html), from ``root.queues`` down, per queue ``P``:
``P.capacity`` -> ``capacity`` (percent of the parent; ``[memory=1024,vcores=1]`` absolute
resources -> ``min``; ``2w`` -> ``weight``), ``P.maximum-capacity`` -> ``max_capacity`` (-1
and 100 are no cap; absolute -> ``max``), ``P.user-limit-factor`` -> ``user_limit_factor``,
``P.minimum-user-limit-percent`` -> ``min_user_limit_percent``, ``P.maximum-applications``
-> ``max_apps``, ``P.ordering-policy`` ``fifo``/``fair`` -> ``fifo``/``cmmf-mem`` (a parent's
``utilization`` ordering is the Capacity Scheduler's own and is left to the config's policy).

Bad input is one line naming the file and the field: an unreadable XML, a number that is
not one, a percentage over 100, siblings' capacities not summing to 100.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from rayrm.rm.core.errors import InputError
from rayrm.traces.importers.common import SkipReport
from rayrm.traces.importers.sls_nodes import resource_name

#: YARN's scheduling policies by the names the files use -> rayrm policy specs
POLICIES = {"fair": "cmmf-mem", "drf": "drf", "fifo": "fifo",
            "fairsharepolicy": "cmmf-mem", "dominantresourcefairnesspolicy": "drf", "fifopolicy": "fifo"}
CAPACITY_ORDERING = {"fifo": "fifo", "fair": "cmmf-mem", "fifo-with-partitions": "fifo",
                     "fifo-for-pending-updates": "fifo"}
PARENT_ORDERING = {"utilization", "priority-utilization"}
PREEMPTION = {"minSharePreemptionTimeout": "min_share_timeout",
              "fairSharePreemptionTimeout": "fair_share_timeout",
              "fairSharePreemptionThreshold": "fair_share_threshold"}
FAIR_QUEUE_KEYS = {"weight", "minResources", "maxResources", "maxRunningApps", "schedulingPolicy",
                   "schedulingMode", "queue", "pool", *PREEMPTION}
FAIR_TOP_KEYS = {"queue", "pool", "defaultQueueSchedulingPolicy", "queueMaxAppsDefault",
                 "queueMaxResourcesDefault", "defaultMinSharePreemptionTimeout",
                 "defaultFairSharePreemptionTimeout", "defaultFairSharePreemptionThreshold"}
CS = "yarn.scheduler.capacity."
MEMORY_UNITS = {"": 1, "mi": 1, "m": 1, "gi": 1024, "g": 1024, "ti": 1024 ** 2, "t": 1024 ** 2}


@dataclass
class YarnQueues:
    """A queue file's tree: the config's ``queues:`` list and the policy of queues without one."""

    queues: list[dict]
    policy: str | None = None
    kind: str = "fair"                      # fair | capacity
    ignored: set[str] = field(default_factory=set)
    preemption: dict | None = None          # the config's top-level preemption: (site_preemption)


def read_yarn_queues(path: str | Path, report: SkipReport | None = None) -> YarnQueues:
    """The tree of a Fair Scheduler allocation file or a capacity-scheduler.xml."""
    root = parse_xml(path)
    if root.tag == "configuration":
        props = properties(root, path)
        follow = props.get("yarn.scheduler.fair.allocation.file")
        if follow and not any(k.startswith(CS) for k in props):
            out = read_yarn_queues(_beside(path, follow), report)
            out.preemption = site_preemption(props, "fair", str(path))
            return out
        if f"{CS}root.queues" not in props:
            raise InputError("neither a Fair Scheduler allocation file (<allocations>) nor a "
                             f"capacity-scheduler.xml ({CS}root.queues)", file=str(path))
        out = CapacityReader(str(path), props).tree()
        out.preemption = site_preemption(props, "capacity", str(path))
    elif root.tag in ("allocations", "queue", "pool"):
        out = FairReader(str(path)).tree(root)
    else:
        raise InputError(f"<{root.tag}> is neither <allocations> (Fair Scheduler) nor <configuration> "
                         "(capacity-scheduler.xml)", file=str(path))
    if report is not None and out.ignored:
        report.note(f"queue-file settings rayrm does not model (ignored): {', '.join(sorted(out.ignored))}")
    return out


#: yarn-site's preemption switches and waits, by scheduler (Hadoop's FairScheduler.html,
#: "Configuration in yarn-site.xml"; CapacityScheduler.html, "Capacity Scheduler container
#: preemption"), the waits in milliseconds with YARN's defaults
SITE_PREEMPTION = {
    "fair": {"switch": "yarn.scheduler.fair.preemption",
             "grace": "yarn.scheduler.fair.waitTimeBeforeKill"},
    "capacity": {"switch": "yarn.resourcemanager.scheduler.monitor.enable",
                 "grace": "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill",
                 "interval": "yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval"}}
SITE_DEFAULT_MS = {"grace": 15000.0, "interval": 3000.0}
CAPACITY_PREEMPTION_POLICY = "ProportionalCapacityPreemptionPolicy"


def site_preemption(props: dict[str, str], kind: str, file: str) -> dict | None:
    """The config's top-level ``preemption:`` from a ``<configuration>``'s yarn-site
    properties, None when they do not switch it on.

    * Fair Scheduler: ``yarn.scheduler.fair.preemption`` true -> ``enabled``;
      ``yarn.scheduler.fair.waitTimeBeforeKill`` (ms, 15000) -> ``grace``.  The timeouts
      and threshold come from the allocation file (its queues and defaults).
    * Capacity Scheduler: ``yarn.resourcemanager.scheduler.monitor.enable`` true with
      ``...scheduler.monitor.policies`` naming ProportionalCapacityPreemptionPolicy (its
      default) -> ``enabled``; ``...capacity.preemption.max_wait_before_kill`` (ms, 15000) ->
      ``grace``; the monitor acts each ``...monitoring_interval`` (ms, 3000) on any queue below
      its ideal assignment: ``fair_share_timeout`` = that interval, ``fair_share_threshold`` 1
      (docs/preemption.md: the rayrm rule set under yarn-capacity).
    """
    names = SITE_PREEMPTION[kind]
    switch = props.get(names["switch"], "").strip().lower()
    if switch not in ("", "true", "false"):
        raise InputError(f"must be true or false, got {props[names['switch']]!r}", file=file, field=names["switch"])
    if switch != "true":
        return None
    if kind == "capacity":
        monitors = props.get("yarn.resourcemanager.scheduler.monitor.policies", CAPACITY_PREEMPTION_POLICY)
        if CAPACITY_PREEMPTION_POLICY not in monitors:
            return None
    ms = {key: _number(props.get(names[key], SITE_DEFAULT_MS[key]), file, names[key], positive=True)
          for key in ("grace", "interval") if key in names}
    out = {"enabled": True, "grace": ms["grace"] / 1000}
    if kind == "capacity":
        out.update(fair_share_timeout=ms["interval"] / 1000, fair_share_threshold=1.0)
    return out


def parse_xml(path: str | Path) -> ET.Element:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InputError(f"cannot read queue file: {e.strerror}", file=str(path)) from None
    except UnicodeDecodeError:
        raise InputError("not a text file", file=str(path)) from None
    try:
        return ET.fromstring(text)
    except ET.ParseError as e:
        raise InputError(f"malformed XML: {e}", file=str(path)) from None


def properties(root: ET.Element, path) -> dict[str, str]:
    """A Hadoop ``<configuration>``'s ``<property><name>/<value>`` pairs."""
    out = {}
    for k, prop in enumerate(root.findall("property")):
        name = (prop.findtext("name") or "").strip()
        if not name:
            raise InputError("a property without a <name>", file=str(path), field=f"property[{k + 1}]")
        out[name] = (prop.findtext("value") or "").strip()
    return out


def _beside(path, target: str) -> Path:
    """The allocation file a ``<configuration>`` names: as written, beside it, or its name beside it."""
    here = Path(path).parent
    for candidate in (Path(target), here / target, here / Path(target).name):
        if candidate.is_file():
            return candidate
    raise InputError(f"names allocation file {target!r}, not found beside it", file=str(path),
                     field="yarn.scheduler.fair.allocation.file")


def _number(text, file: str, where: str, *, positive=False, at_most=None) -> float:
    try:
        x = float(str(text).strip())
    except ValueError:
        x = float("nan")
    if not (x > 0 if positive else x >= 0) or x == float("inf"):
        raise InputError(f"must be a {'positive' if positive else 'non-negative'} number, got {text!r}",
                         file=file, field=where)
    if at_most is not None and x > at_most:
        raise InputError(f"must be at most {at_most:g}, got {text!r}", file=file, field=where)
    return int(x) if x.is_integer() else x


def _whole(text, file: str, where: str) -> int:
    x = _number(text, file, where)
    if x != int(x) or x < 1:
        raise InputError(f"must be a whole number of at least 1, got {text!r}", file=file, field=where)
    return int(x)


def resources(text: str, file: str, where: str) -> dict:
    """A Fair Scheduler resource value as ``{name: amount or "p%"}`` (see the module docstring)."""
    text = " ".join(str(text).split())
    if not text:
        raise InputError("an empty resource value", file=file, field=where)
    if "=" in text:
        return _resource_pairs(text, file, where)
    single = re.fullmatch(r"([\d.]+)\s*%", text)
    if single:
        p = _percent(single.group(1), file, where)
        return {"cpu": p, "memory_mb": p}
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = re.fullmatch(r"([\d.]+)\s*(%?)\s*(mb|vcores|memory|cpu)", part, re.I)
        if not m:
            raise InputError(f"cannot read {part!r} (write 1024 mb, 1 vcores or memory-mb=1024, vcores=1)",
                             file=file, field=where)
        unit, percent = m.group(3).lower(), bool(m.group(2))
        name = "memory_mb" if unit in ("mb", "memory") else "cpu"
        if percent != (unit in ("memory", "cpu")):         # 50% memory, 25% cpu | 1024 mb, 1 vcores
            raise InputError(f"write 50% memory, 25% cpu or 1024 mb, 1 vcores, got {part!r}", file=file,
                             field=where)
        out[name] = _percent(m.group(1), file, where) if m.group(2) else _number(m.group(1), file, where)
    return out


def _resource_pairs(text: str, file: str, where: str) -> dict:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        m = re.fullmatch(r"([\d.]+)\s*(%|[KMGT]i?)?", value.strip(), re.I) if eq else None
        if not m:
            raise InputError(f"cannot read {part!r} (write memory-mb=1024, vcores=1)", file=file, field=where)
        name, suffix = resource_name(key.strip()), (m.group(2) or "")
        if suffix == "%":
            out[name] = _percent(m.group(1), file, where)
        elif suffix.lower() not in MEMORY_UNITS or (suffix and name != "memory_mb"):
            raise InputError(f"cannot read the unit of {part!r}: memory-mb takes Mi, Gi or Ti, other "
                             "resources none", file=file, field=where)
        else:
            out[name] = _number(m.group(1), file, where) * MEMORY_UNITS[suffix.lower()]
    return out


def _percent(text: str, file: str, where: str) -> str:
    return f"{_number(text, file, where, at_most=100):g}%"


def _policy(text: str, file: str, where: str) -> str:
    name = str(text).strip().rsplit(".", 1)[-1].lower()
    if name not in POLICIES:
        raise InputError(f"unknown scheduling policy {text.strip()!r} (fair, drf or fifo)", file=file,
                         field=where)
    return POLICIES[name]


# ----- the Fair Scheduler's allocation file ----------------------------------------------

class FairReader:
    """``<allocations>`` -> YarnQueues; defaults from the top level go down the tree."""

    def __init__(self, file: str):
        self.file = file
        self.ignored: set[str] = set()

    def tree(self, top: ET.Element) -> YarnQueues:
        if top.tag != "allocations":               # a bare <queue> as the document
            wrap = ET.Element("allocations")
            wrap.append(top)
            top = wrap
        self.ignored |= {e.tag for e in top if e.tag not in FAIR_TOP_KEYS}
        policy = self._text(top, "defaultQueueSchedulingPolicy")
        policy = _policy(policy, self.file, "defaultQueueSchedulingPolicy") if policy is not None else None
        defaults: dict = {}
        apps = self._text(top, "queueMaxAppsDefault")
        if apps is not None:
            defaults["max_apps"] = _whole(apps, self.file, "queueMaxAppsDefault")
        cap = self._text(top, "queueMaxResourcesDefault")
        if cap is not None:
            defaults["max"] = resources(cap, self.file, "queueMaxResourcesDefault")
        inherited = {}
        for tag, key in PREEMPTION.items():
            value = self._text(top, "default" + tag[0].upper() + tag[1:])
            if value is not None:
                inherited[key] = self._preemption(key, value, "default" + tag[0].upper() + tag[1:])
        queues = _queue_elements(top)
        if len(queues) == 1 and queues[0].get("name", "").strip() == "root":
            root = queues[0]
            own = self._text(root, "schedulingPolicy") or self._text(root, "schedulingMode")
            if own is not None:
                policy = _policy(own, self.file, "queue root schedulingPolicy")
            inherited.update(self._preemptions(root, "root"))
            queues = _queue_elements(root)
        if not queues:
            raise InputError("defines no <queue>", file=self.file)
        out = self._children(queues, "root", defaults, inherited)
        return YarnQueues(out, policy, "fair", self.ignored)

    def _children(self, elems, parent: str, defaults: dict, inherited: dict) -> list[dict]:
        out, names = [], set()
        for elem in elems:
            name = elem.get("name", "").strip()
            full = f"{parent}.{name}"
            if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
                raise InputError(f"a queue name is letters, digits, '_' and '-', got {name!r}", file=self.file,
                                 field=f"queue {full} name")
            if name in names:
                raise InputError(f"queue {full} is defined twice", file=self.file, field=f"queue {full}")
            names.add(name)
            out.append(self._queue(elem, name, full, defaults, inherited))
        return out

    def _queue(self, elem, name: str, full: str, defaults: dict, inherited: dict) -> dict:
        self.ignored |= {e.tag for e in elem if e.tag not in FAIR_QUEUE_KEYS}
        q: dict = {"name": name}
        weight = self._text(elem, "weight")
        if weight is not None:
            q["weight"] = _number(weight, self.file, f"queue {full} weight", positive=True)
        for tag, key in (("minResources", "min"), ("maxResources", "max")):
            value = self._text(elem, tag)
            if value is not None:
                q[key] = resources(value, self.file, f"queue {full} {tag}")
            elif key in defaults:
                q[key] = dict(defaults[key])
        apps = self._text(elem, "maxRunningApps")
        if apps is not None:
            q["max_apps"] = _whole(apps, self.file, f"queue {full} maxRunningApps")
        elif "max_apps" in defaults:
            q["max_apps"] = defaults["max_apps"]
        own = self._text(elem, "schedulingPolicy") or self._text(elem, "schedulingMode")
        if own is not None:
            q["policy"] = _policy(own, self.file, f"queue {full} schedulingPolicy")
        preemption = {**inherited, **self._preemptions(elem, full)}
        if preemption:
            q["preemption"] = preemption
        children = _queue_elements(elem)
        if children:
            q["children"] = self._children(children, full, defaults, preemption)
        return q

    def _preemptions(self, elem, full: str) -> dict:
        out = {}
        for tag, key in PREEMPTION.items():
            value = self._text(elem, tag)
            if value is not None:
                out[key] = self._preemption(key, value, f"queue {full} {tag}")
        return out

    def _preemption(self, key: str, value: str, where: str) -> float:
        if key == "fair_share_threshold":
            return _number(value, self.file, where, at_most=1)
        return _number(value, self.file, where, positive=True)

    @staticmethod
    def _text(elem, tag: str) -> str | None:
        found = elem.find(tag)
        return None if found is None else (found.text or "").strip()


def _queue_elements(elem) -> list:
    return [e for e in elem if e.tag in ("queue", "pool")]


# ----- the Capacity Scheduler's capacity-scheduler.xml -----------------------------------

class CapacityReader:
    """``yarn.scheduler.capacity.<path>.*`` properties -> YarnQueues, from root down."""

    def __init__(self, file: str, props: dict[str, str]):
        self.file, self.props = file, props
        self.ignored: set[str] = set()

    def tree(self) -> YarnQueues:
        known = ("queues", "capacity", "maximum-capacity", "user-limit-factor", "minimum-user-limit-percent",
                 "maximum-applications", "ordering-policy")
        out = self._children("root", set())
        for name in self.props:
            if name.startswith(CS + "root.") and not name.endswith(tuple("." + k for k in known)):
                self.ignored.add(name.rsplit(".", 1)[-1])
        return YarnQueues(out, None, "capacity", self.ignored)

    def _get(self, path: str, key: str) -> str | None:
        value = self.props.get(f"{CS}{path}.{key}")
        return value if value not in (None, "") else None

    def _children(self, path: str, seen: set) -> list[dict]:
        listed = self._get(path, "queues")
        if listed is None:
            return []
        names = [n.strip() for n in listed.split(",") if n.strip()]
        where = f"{CS}{path}.queues"
        out = []
        for name in names:
            if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
                raise InputError(f"a queue name is letters, digits, '_' and '-', got {name!r}", file=self.file,
                                 field=where)
            if name in {q["name"] for q in out}:
                raise InputError(f"queue {name!r} is listed twice", file=self.file, field=where)
            out.append(self._queue(f"{path}.{name}", name, seen))
        percents = [q["capacity"] for q in out if "capacity" in q]
        if percents and abs(sum(percents) - 100) > 1e-6:
            given = " + ".join(f"{q.get('capacity', 0):g}" for q in out)
            raise InputError(f"the capacities of {path}'s children must sum to 100, got {given} = "
                             f"{sum(percents):g}", file=self.file, field=f"{CS}{path}.*.capacity")
        for q in out:                # YARN reads an unset capacity beside set ones as 0
            if percents and not q.get("capacity") and "weight" not in q:
                raise InputError(f"queue {path}.{q['name']} has capacity 0 (unset beside set ones); rayrm's "
                                 "tree needs every queue's weight positive: give it a capacity",
                                 file=self.file, field=f"{CS}{path}.{q['name']}.capacity")
        return out

    def _queue(self, path: str, name: str, seen: set) -> dict:
        if path in seen:
            raise InputError("a queue contains itself", file=self.file, field=f"{CS}{path}.queues")
        q: dict = {"name": name}
        where = f"{CS}{path}."
        capacity = self._get(path, "capacity")
        if capacity is not None:
            self._capacity(q, capacity, where + "capacity", "capacity", "min")
        maximum = self._get(path, "maximum-capacity")
        if maximum is not None and maximum.strip() not in ("-1", "100", "100.0"):
            self._capacity(q, maximum, where + "maximum-capacity", "max_capacity", "max")
        factor = self._get(path, "user-limit-factor")
        if factor is not None and factor.strip() != "-1":           # -1: no user limit
            q["user_limit_factor"] = _number(factor, self.file, where + "user-limit-factor", positive=True)
        percent = self._get(path, "minimum-user-limit-percent")
        if percent is not None:
            q["min_user_limit_percent"] = _number(percent, self.file, where + "minimum-user-limit-percent",
                                                  positive=True, at_most=100)
        apps = self._get(path, "maximum-applications")
        if apps is not None:
            q["max_apps"] = _whole(apps, self.file, where + "maximum-applications")
        children = self._children(path, seen | {path})
        ordering = self._get(path, "ordering-policy")
        if ordering is not None:
            key = ordering.strip().lower()
            if key in CAPACITY_ORDERING and not children:
                q["policy"] = CAPACITY_ORDERING[key]
            elif key not in PARENT_ORDERING or not children:
                raise InputError(f"unknown ordering policy {ordering!r} (a leaf's: fifo or fair; a parent's: "
                                 "utilization or priority-utilization)", file=self.file,
                                 field=where + "ordering-policy")
        if children:
            q["children"] = children
        return q

    def _capacity(self, q: dict, text: str, where: str, percent_key: str, absolute_key: str) -> None:
        """A capacity: percent, ``[memory=..,vcores=..]`` absolute, or (capacity only) ``2w`` weight."""
        text = text.strip()
        if text.startswith("[") and text.endswith("]"):
            q[absolute_key] = _resource_pairs(text[1:-1], self.file, where)
        elif percent_key == "capacity" and text.lower().endswith("w"):
            q["weight"] = _number(text[:-1], self.file, where, positive=True)
        else:
            q[percent_key] = _number(text, self.file, where, at_most=100, positive=percent_key != "capacity")
