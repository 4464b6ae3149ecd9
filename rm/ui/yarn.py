"""YARN's ResourceManager REST API (read-only) over a ``ClusterView``.

Paths, JSON shapes, field names, types and state names follow Hadoop's "ResourceManager
REST API's" page: ``/ws/v1/cluster`` (and ``/info``), ``/metrics``, ``/scheduler`` (the
queue tree in the Fair Scheduler's shape, or the Capacity Scheduler's for a tree with
capacities; ``schedulingPolicy`` a queue's rayrm policy), ``/apps`` with
``states``, ``state``, ``finalStatus``, ``user``, ``queue``, ``applicationTypes``,
``limit``, ``startedTimeBegin``/``End`` and ``finishedTimeBegin``/``End``, ``/apps/{id}``, ``/apps/{id}/appattempts``, ``/nodes``
with ``states`` and ``/nodes/{id}``.  Errors are YARN's ``RemoteException`` objects.

Resources: memory in MB from the memory dimension (``shares.resource_index``: ``mem*``;
``*gb`` × 1024), vCores from the CPU dimension (``cpu*``/``vcore*``; rounded to an int, YARN's type); every dimension, those two
included, is listed in ``resourceInformations``.  Times are epoch milliseconds of the
run's wall clock; the trace times are in extra fields named ``*TraceTime`` (seconds).
rayrm's own figures per app (tasks, shares) are extra fields too.  Pages of apps and
nodes hold at most ``MAX_PAGE`` items; ``offset`` pages on (headers say how many match).
"""

from __future__ import annotations

from rayrm.rm.core.model import queue_path
from rayrm.rm.core.queues.owed import QueueView, queue_views
from rayrm.rm.core.queues.tree import default_tree
from rayrm.rm.core.shares import resource_index
from rayrm.rm.ui.view import NODE_STATES, YARN_APP_STATE, AppView, ClusterView, NodeView

APP_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING", "FINISHED", "FAILED", "KILLED")
FINAL_STATUSES = ("UNDEFINED", "SUCCEEDED", "FAILED", "KILLED", "ENDED")
#: the most apps or nodes one response lists
MAX_PAGE = 1000
VERSION = "rayrm 0.1.0"


class ApiError(Exception):
    """An error answered as YARN's ``{"RemoteException": {...}}`` with HTTP ``status``."""

    KINDS = {400: ("BadRequestException", "org.apache.hadoop.yarn.webapp.BadRequestException"),
             401: ("AuthorizationException", "org.apache.hadoop.security.authorize.AuthorizationException"),
             404: ("NotFoundException", "org.apache.hadoop.yarn.webapp.NotFoundException"),
             405: ("WebApplicationException", "javax.ws.rs.WebApplicationException")}

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status

    def body(self) -> dict:
        exception, java = self.KINDS.get(self.status, ("WebApplicationException", "javax.ws.rs.WebApplicationException"))
        return {"RemoteException": {"exception": exception, "message": f"java.lang.Exception: {self}",
                                    "javaClassName": java}}


# ----- resources ----------------------------------------------------------------------

def _dim_roles(dims: tuple[str, ...]) -> tuple[int | None, float, int | None]:
    """(memory dimension, its factor to MB, vCores dimension)."""
    mem = resource_index(dims, "memory")
    factor = 1024.0 if mem is not None and dims[mem].lower().endswith("gb") else 1.0
    cpu = resource_index(dims, "cpu")
    return mem, factor, cpu


def _num(x: float):
    return int(x) if float(x).is_integer() else round(float(x), 6)


def resource(dims: tuple[str, ...], vec) -> dict:
    """YARN's ResourceInfo: ``memory`` (MB), ``vCores`` and every dimension as a resourceInformation."""
    mem, factor, cpu = _dim_roles(dims)
    infos = []
    if mem is not None:
        infos.append({"maximumAllocation": 9223372036854775807, "minimumAllocation": 0, "name": "memory-mb",
                      "resourceType": "COUNTABLE", "units": "Mi", "value": int(round(vec[mem] * factor))})
    if cpu is not None:
        infos.append({"maximumAllocation": 9223372036854775807, "minimumAllocation": 0, "name": "vcores",
                      "resourceType": "COUNTABLE", "units": "", "value": int(round(vec[cpu]))})
    for i, d in enumerate(dims):
        if i not in (mem, cpu):
            infos.append({"maximumAllocation": 9223372036854775807, "minimumAllocation": 0, "name": d,
                          "resourceType": "COUNTABLE", "units": "", "value": _num(vec[i])})
    return {"memory": int(round(vec[mem] * factor)) if mem is not None else 0,
            "vCores": int(round(vec[cpu])) if cpu is not None else 0,
            "resourceInformations": {"resourceInformation": infos}}


def _mb_vcores(dims, vec) -> tuple[int, int]:
    r = resource(dims, vec)
    return r["memory"], r["vCores"]


def _sum(vectors, k: int) -> tuple[float, ...]:
    total = [0.0] * k
    for v in vectors:
        for i in range(k):
            total[i] += v[i]
    return tuple(total)


# ----- cluster ---------------------------------------------------------------------------

def cluster_info(view: ClusterView) -> dict:
    started = view.epoch_ms(0.0)
    return {"clusterInfo": {
        "id": started, "startedOn": started,
        "state": "STARTED" if view.state in ("live", "starting") else "STOPPED",
        "haState": "ACTIVE", "rmStateStoreName": "rayrm.rm.service.store.StateStore",
        "resourceManagerVersion": VERSION, "resourceManagerBuildVersion": VERSION,
        "resourceManagerVersionBuiltOn": "", "hadoopVersion": VERSION, "hadoopBuildVersion": VERSION,
        "hadoopVersionBuiltOn": "", "haZooKeeperConnectionState": "ResourceManager HA is not enabled.",
        "traceTime": round(view.time, 3), "policy": view.policy, "mode": view.mode, "runState": view.state}}


def live_nodes(view: ClusterView) -> list[NodeView]:
    return [n for n in view.nodes if n.state == "RUNNING"]


def metrics(view: ClusterView) -> dict:
    k = len(view.dims)
    alive = live_nodes(view)
    total, used = _sum((n.capacity for n in alive), k), _sum((n.used for n in alive), k)
    free = tuple(t - u for t, u in zip(total, used))
    pending = _sum((tuple(a.pending * d for d in a.demand) for a in view.apps), k)
    states = [YARN_APP_STATE[a.status][0] for a in view.apps]
    count = {s: sum(1 for n in view.nodes if n.state == s) for s in NODE_STATES}
    (tmb, tvc), (umb, uvc), (fmb, fvc), (pmb, pvc) = (_mb_vcores(view.dims, v) for v in (total, used, free, pending))
    containers = sum(n.containers for n in alive)
    return {"clusterMetrics": {
        "appsSubmitted": len(view.apps), "appsCompleted": states.count("FINISHED"),
        "appsPending": states.count("ACCEPTED"), "appsRunning": states.count("RUNNING"),
        "appsFailed": states.count("FAILED"), "appsKilled": states.count("KILLED"),
        "reservedMB": 0, "availableMB": fmb, "allocatedMB": umb, "pendingMB": pmb,
        "reservedVirtualCores": 0, "availableVirtualCores": fvc, "allocatedVirtualCores": uvc,
        "pendingVirtualCores": pvc, "containersAllocated": containers, "containersReserved": 0,
        "containersPending": sum(a.pending for a in view.apps), "totalMB": tmb, "totalVirtualCores": tvc,
        "utilizedMBPercent": round(100.0 * umb / tmb) if tmb else 0,
        "utilizedVirtualCoresPercent": round(100.0 * uvc / tvc) if tvc else 0,
        "totalNodes": sum(v for s, v in count.items() if s != "NEW"), "lostNodes": count["LOST"],
        "unhealthyNodes": count["UNHEALTHY"], "decommissioningNodes": count["DECOMMISSIONING"],
        "decommissionedNodes": count["DECOMMISSIONED"], "rebootedNodes": count["REBOOTED"],
        "activeNodes": count["RUNNING"], "shutdownNodes": count["SHUTDOWN"],
        "totalUsedResourcesAcrossPartition": resource(view.dims, used),
        "totalClusterResourcesAcrossPartition": resource(view.dims, total),
        "totalReservedResourcesAcrossPartition": resource(view.dims, (0.0,) * k),
        "totalAllocatedContainersAcrossPartition": containers, "crossPartitionMetricsAvailable": True,
        "containersAllocatedTotal": view.allocations, "traceTime": round(view.time, 3)}}


def scheduler(view: ClusterView) -> dict:
    """The queue tree (``rm/core/queues/owed.py``) in the Fair Scheduler's shape, or the Capacity
    Scheduler's when a queue sets a ``capacity``: each queue with its min, max, used,
    demand, fair (owed) and steady fair resources; a leaf's ``apps`` (an extra field)
    give each active app's share in the policy's own terms (``shareKind``)."""
    tree = view.tree if view.tree is not None else default_tree()
    total = view.live_total()
    queues = queue_views(tree, view.dims, total, view.apps, view.policy)
    if any(q.capacity is not None for q in queues):
        return capacity_scheduler(view, queues)
    return fair_scheduler(view, queues, total)


def _children(queues) -> dict:
    out: dict[str, list] = {}
    for q in queues:
        out.setdefault(q.parent, []).append(q)
    return out


def preemption_fields(view: ClusterView, q: QueueView) -> dict:
    """A queue's preemption: ``aggregateContainersPreempted`` (YARN's QueueMetrics name: its
    apps' containers killed at a preemption's deadline so far) and rayrm's own
    ``containersWarned`` (its apps' containers warned now, a PreemptionMessage sent, not yet
    ended) and ``preemptedResourceMB`` / ``preemptedResourceVCores`` (the resources of those
    preempted, as the apps' fields of that name add up)."""
    under = [a for a in view.apps if _under(a, q)]
    mb, vc = _mb_vcores(view.dims, _sum([tuple(a.preempted * d for d in a.demand) for a in under], len(view.dims)))
    return {"aggregateContainersPreempted": sum(a.preempted for a in under),
            "containersWarned": sum(a.warned for a in under),
            "preemptedResourceMB": mb, "preemptedResourceVCores": vc}


def _active(view: ClusterView, q: QueueView) -> list[AppView]:
    path = queue_path(q.name)
    return [a for a in view.apps if a.status in ("running", "waiting") and queue_path(a.queue) == path]


def fair_scheduler(view: ClusterView, queues, total) -> dict:
    dims = view.dims
    kids = _children(queues)
    head, *rest = view.share_kind.split("_")
    kind = head + "".join(w.capitalize() for w in rest)       # task_share -> taskShare
    zero = resource(dims, (0.0,) * len(dims))

    def info(q: QueueView) -> dict:
        apps = _active(view, q) if q.leaf else []
        out = {"maxApps": q.max_apps if q.max_apps is not None else 2147483647,
               "minResources": resource(dims, q.min), "maxResources": resource(dims, q.max),
               "usedResources": resource(dims, q.used), "amUsedResources": zero,
               "amMaxResources": resource(dims, q.max), "demandResources": resource(dims, q.demand),
               "steadyFairResources": resource(dims, tuple(q.steady * t for t in total)),
               "fairResources": resource(dims, tuple(q.owed * t for t in total)),
               "clusterResources": resource(dims, total), "reservedResources": zero,
               "allocatedContainers": sum(a.running for a in view.apps if _under(a, q)), "reservedContainers": 0,
               "pendingContainers": sum(a.pending for a in view.apps if _under(a, q)), "queueName": q.name,
               "schedulingPolicy": q.policy, "preemptable": view.preemption, "weight": q.weight,
               "share": q.share, "fairShare": q.owed, "steadyFairShare": q.steady} | preemption_fields(view, q)
        if q.leaf:
            out |= {"type": "fairSchedulerLeafQueueInfo", "numActiveApps": q.running_apps,
                    "numPendingApps": q.pending_apps,
                    "apps": {"app": [{"id": a.app, "state": YARN_APP_STATE[a.status][0], "shareKind": kind,
                                      "share": round(view.share_of(a), 6), "taskShare": round(a.task_share, 6),
                                      "dominantShare": round(a.dominant_share, 6), "weight": a.weight,
                                      "user": a.user, "runningContainers": a.running,
                                      "pendingContainers": a.pending} for a in apps]}}
        else:
            out["childQueues"] = {"queue": [info(c) for c in kids.get(q.name, ())]}
        return out

    return {"scheduler": {"schedulerInfo": {"type": "fairScheduler", "rootQueue": info(queues[0])}}}


def _under(a: AppView, q: QueueView) -> bool:
    return _in_queue(a, q.name)


def capacity_scheduler(view: ClusterView, queues) -> dict:
    """YARN's CapacitySchedulerInfo: capacities in percent, of the parent (``capacity``,
    ``maxCapacity``, ``usedCapacity`` = used over the queue's own capacity) and of the
    cluster (``absolute*``), used in the dominant resource."""
    dims = view.dims
    kids = _children(queues)
    absolute = {"": (100.0, 100.0)}

    def info(q: QueueView) -> dict:
        parent_abs, parent_max = absolute[q.parent] if q.parent else (100.0, 100.0)
        cap = q.capacity if q.capacity is not None else 100.0
        max_cap = q.max_capacity if q.max_capacity is not None else 100.0
        abs_cap, abs_max = parent_abs * cap / 100, parent_max * max_cap / 100
        absolute[q.name] = (abs_cap, abs_max)
        used_abs = 100.0 * q.share
        out = {"capacity": float(cap), "usedCapacity": round(100.0 * used_abs / abs_cap, 4) if abs_cap else 0.0,
               "maxCapacity": float(max_cap), "absoluteCapacity": round(abs_cap, 4),
               "absoluteMaxCapacity": round(abs_max, 4), "absoluteUsedCapacity": round(used_abs, 4),
               "numApplications": q.running_apps + q.pending_apps, "queueName": q.name.rsplit(".", 1)[-1],
               "queuePath": q.name, "state": "RUNNING", "resourcesUsed": resource(dims, q.used),
               "weight": q.weight, "fairShare": q.owed, "orderingPolicy": q.policy,
               "preemptionDisabled": not view.preemption} | preemption_fields(view, q)
        if q.leaf:
            out |= {"type": "capacitySchedulerLeafQueueInfo", "numActiveApplications": q.running_apps,
                    "numPendingApplications": q.pending_apps,
                    "numContainers": sum(a.running for a in view.apps if _under(a, q)),
                    "maxApplications": q.max_apps if q.max_apps is not None else 10000,
                    "userLimit": q.min_user_limit_percent if q.min_user_limit_percent is not None else 100,
                    "userLimitFactor": q.user_limit_factor if q.user_limit_factor is not None else 1.0}
        else:
            out["queues"] = {"queue": [info(c) for c in kids.get(q.name, ())]}
        return out

    root = info(queues[0])
    root_info = {"type": "capacityScheduler", "capacity": 100.0, "usedCapacity": root["usedCapacity"],
                 "maxCapacity": 100.0, "queueName": "root", "queues": root["queues"]}
    return {"scheduler": {"schedulerInfo": root_info}}


# ----- apps ------------------------------------------------------------------------------

def app_json(view: ClusterView, a: AppView) -> dict:
    state, final = YARN_APP_STATE[a.status]
    mb, vc = _mb_vcores(view.dims, tuple(a.running * d for d in a.demand))
    pre_mb, pre_vc = _mb_vcores(view.dims, tuple(a.preempted * d for d in a.demand))
    end = a.finish if a.finish is not None else view.time
    return {
        "id": a.app, "user": a.user, "name": a.app, "queue": f"root.{queue_path(a.queue)}", "state": state,
        "finalStatus": final, "progress": round(100.0 * a.finished / a.num_tasks, 4) if a.num_tasks else 100.0,
        "trackingUI": "ApplicationMaster" if state in ("ACCEPTED", "RUNNING") else "History",
        "trackingUrl": "", "diagnostics": a.reason, "clusterId": view.epoch_ms(0.0),
        "applicationType": "rayrm", "applicationTags": "", "priority": 0,
        "startedTime": view.epoch_ms(a.submit), "launchTime": view.epoch_ms(a.first_start),
        "finishedTime": view.epoch_ms(a.finish),
        "elapsedTime": max(0, view.epoch_ms(end) - view.epoch_ms(a.submit)),
        "amContainerLogs": "", "amHostHttpAddress": "", "amRPCAddress": "", "masterNodeId": "",
        "allocatedMB": mb, "allocatedVCores": vc, "reservedMB": 0, "reservedVCores": 0,
        "runningContainers": a.running, "queueUsagePercentage": round(100.0 * a.dominant_share, 4),
        "clusterUsagePercentage": round(100.0 * a.dominant_share, 4),
        # YARN's RMAppMetrics: the resources of the containers preempted, all task containers
        # (rayrm's AMs hold none, so numAMContainerPreempted is 0)
        "preemptedResourceMB": pre_mb, "preemptedResourceVCores": pre_vc, "numNonAMContainerPreempted": a.preempted,
        "numAMContainerPreempted": 0, "logAggregationStatus": "DISABLED", "unmanagedApplication": False,
        "amNodeLabelExpression": "", "appNodeLabelExpression": a.constraint,
        # rayrm's own fields
        "submitTraceTime": a.submit, "startedTraceTime": a.first_start, "finishedTraceTime": a.finish,
        "tasksTotal": a.num_tasks, "tasksRunning": a.running, "tasksPending": a.pending,
        "tasksFinished": a.finished, "attempts": a.attempts, "weight": a.weight,
        "taskShare": round(a.task_share, 6), "dominantShare": round(a.dominant_share, 6),
        "share": round(view.share_of(a), 6), "rayrmStatus": a.status,
        "resource": resource(view.dims, a.demand)}


def _states(params: dict, key: str, allowed: tuple[str, ...], what: str) -> set[str] | None:
    raw = params.get(key)
    if raw is None:
        return None
    wanted = {s.strip().upper() for s in raw.split(",") if s.strip()}
    bad = sorted(wanted - set(allowed))
    if bad:
        raise ApiError(400, f"Invalid {what} {bad[0]} specified. It should be one of {', '.join(allowed)}")
    return wanted


def whole_number(params: dict, key: str) -> int | None:
    """Query parameter ``key`` as a whole number >= 0, None when absent (else a 400)."""
    raw = params.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"{key} must be a number, got {raw[:40]!r}") from None
    if value < 0:
        raise ApiError(400, f"{key} must be greater than 0")
    return value


def _window(params: dict, begin: str, end: str) -> tuple[int, int]:
    lo, hi = whole_number(params, begin), whole_number(params, end)
    lo, hi = 0 if lo is None else lo, 2 ** 63 - 1 if hi is None else hi
    if lo > hi:
        raise ApiError(400, f"{end} must be greater than {begin}")
    return lo, hi


def _page(params: dict) -> tuple[int, int]:
    """(offset, limit): YARN's ``limit`` (> 0) and rayrm's ``offset``, at most MAX_PAGE items."""
    limit, offset = whole_number(params, "limit"), whole_number(params, "offset")
    if limit == 0:
        raise ApiError(400, "limit value must be greater then 0")
    return offset or 0, min(limit or MAX_PAGE, MAX_PAGE)


def apps(view: ClusterView, params: dict) -> tuple[dict, dict]:
    """``/ws/v1/cluster/apps``: the page and its paging headers."""
    states = _states(params, "states", APP_STATES, "application-state")
    one = _states(params, "state", APP_STATES, "application-state")
    finals = _states(params, "finalStatus", FINAL_STATUSES, "final status")
    started = _window(params, "startedTimeBegin", "startedTimeEnd")
    finished = _window(params, "finishedTimeBegin", "finishedTimeEnd")
    offset, limit = _page(params)
    # every app is of type rayrm; a queue names a leaf (root. optional) or a parent (its subtree)
    if "rayrm" not in params.get("applicationTypes", "rayrm").lower().split(","):
        return {"apps": None}, _paging(0, offset, 0)
    user, queue = params.get("user"), params.get("queue")
    chosen = []
    for a in view.apps:
        if (user is not None and a.user != user) or (queue is not None and not _in_queue(a, queue)):
            continue
        state, final = YARN_APP_STATE[a.status]
        if (states and state not in states) or (one and state not in one) or (finals and final not in finals):
            continue
        if not started[0] <= view.epoch_ms(a.submit) <= started[1]:
            continue
        if (finished != (0, 2 ** 63 - 1)) and not (a.finish is not None
                                                   and finished[0] <= view.epoch_ms(a.finish) <= finished[1]):
            continue
        chosen.append(a)
    page = chosen[offset:offset + limit]
    body = {"apps": {"app": [app_json(view, a) for a in page]} if page else None}
    return body, _paging(len(chosen), offset, len(page))


def _in_queue(a: AppView, queue: str) -> bool:
    path, mine = queue_path(queue), queue_path(a.queue)
    return not path or mine == path or mine.startswith(path + ".")


def _paging(total: int, offset: int, count: int) -> dict:
    headers = {"X-Total-Count": str(total)}
    if offset + count < total:
        headers["X-Next-Offset"] = str(offset + count)
    return headers


def app(view: ClusterView, app_id: str) -> dict:
    a = view.app(app_id)
    if a is None:
        raise ApiError(404, f"app with id: {app_id} not found")
    return {"app": app_json(view, a)}


def app_attempts(view: ClusterView, app_id: str) -> dict:
    """An app's attempts, 1-based: the first starts at submission, the later ones when they
    were seen starting (``AppView.attempt_starts``); the last is the current one."""
    a = view.app(app_id)
    if a is None:
        raise ApiError(404, f"app with id: {app_id} not found")
    state = YARN_APP_STATE[a.status][0]
    later = list(a.attempt_starts)[:a.attempts - 1]
    starts = [a.submit] + later + [None] * (a.attempts - 1 - len(later))
    out = []
    for k in range(1, a.attempts + 1):
        last = k == a.attempts
        out.append({"id": k, "startTime": view.epoch_ms(starts[k - 1]),
                    "finishedTime": view.epoch_ms(a.finish if last else starts[k]),
                    "containerId": "", "nodeHttpAddress": "", "nodeId": "", "logsLink": "", "blacklistedNodes": "",
                    "nodesBlacklistedBySystem": "", "appAttemptId": f"appattempt_{a.app}_{k:06d}",
                    "appAttemptState": state if last else "FAILED", "startTraceTime": starts[k - 1]})
    return {"appAttempts": {"appAttempt": out}}


# ----- nodes -----------------------------------------------------------------------------

def node_json(view: ClusterView, n: NodeView) -> dict:
    free = tuple(c - u for c, u in zip(n.capacity, n.used)) if n.state == "RUNNING" else (0.0,) * len(n.capacity)
    (umb, uvc), (fmb, fvc) = _mb_vcores(view.dims, n.used), _mb_vcores(view.dims, free)
    return {
        "rack": f"/{n.attributes['rack']}" if "rack" in n.attributes else "/default-rack",
        "state": n.state, "id": n.name, "nodeHostName": n.name, "nodeHTTPAddress": "",
        "lastHealthUpdate": view.epoch_ms(n.last_update), "version": VERSION,
        "healthReport": n.detail, "numContainers": n.containers,
        "usedMemoryMB": umb, "availMemoryMB": fmb, "usedVirtualCores": uvc, "availableVirtualCores": fvc,
        "numRunningOpportContainers": 0, "usedMemoryOpportGB": 0, "usedVirtualCoresOpport": 0,
        "numQueuedContainers": 0, "nodeLabels": [], "allocationTags": {},
        "usedResource": resource(view.dims, n.used), "availableResource": resource(view.dims, free),
        "totalResource": resource(view.dims, n.capacity),
        "nodeAttributesInfo": {"nodeAttributeInfo": [
            {"prefix": "rm.yarn.io", "name": k, "type": "STRING", "value": str(v)}
            for k, v in sorted(n.attributes.items())]},
        "lastHealthUpdateTraceTime": n.last_update, "rayNode": n.ray_node}


def nodes(view: ClusterView, params: dict) -> tuple[dict, dict]:
    states = _states(params, "states", NODE_STATES, "node state")
    offset, limit = _page(params)
    chosen = [n for n in view.nodes if not states or n.state in states]
    page = chosen[offset:offset + limit]
    return {"nodes": {"node": [node_json(view, n) for n in page]} if page else None}, \
        _paging(len(chosen), offset, len(page))


def node(view: ClusterView, node_id: str) -> dict:
    n = view.node(node_id)
    if n is None:
        raise ApiError(404, f"nodeId, {node_id}, is not found")
    return {"node": node_json(view, n)}
