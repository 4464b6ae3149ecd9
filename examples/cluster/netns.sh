#!/usr/bin/env bash
# A Ray cluster of three machines on one Linux host: network namespaces joined by a bridge
# on a private subnet made here, each namespace a machine with its own address and its own
# `ray start` (a head and two workers, token authentication on every node and driver).
#
#   examples/cluster/netns.sh up          # namespaces, bridge, veths, the three Ray nodes
#   examples/cluster/netns.sh status      # what exists, and the Ray nodes the head sees
#   examples/cluster/netns.sh address     # the head's HOST:PORT, for `rayrm replay --address`
#   examples/cluster/netns.sh exec head rayrm replay configs/paper-micro.yaml --address "$(...)"
#   examples/cluster/netns.sh down        # every process, namespace, veth and the bridge
#
# Faults at the network layer, on the machines `up` made:
#   link MACHINE down|up      the machine's cable: its veth on the bridge side goes down / up
#   block A B | unblock A B   A and B drop each other's packets (blackhole routes in both)
#   kill MACHINE              every process in the machine's namespace, SIGKILL
#   rejoin WORKER             the worker's processes killed, its link and routes healed, and a
#                             new `ray start` (a node Ray declared dead never comes back by itself)
#
# Needs root and iproute2.  Only the addresses of the namespaces made here are used: the
# bridge itself has no address, so nothing on the subnet can reach the host or beyond.
# Ray runs from the `ray` on PATH (the virtual environment rayrm is installed in) with the
# caller's PYTHONPATH, so Ray's workers import the rayrm under test.
#
# Settings (environment):
#   RAYRM_NETNS_SUBNET   first three octets of the /24 (default 10.213.0); head .1, workers .2, .3
#   RAYRM_NETNS_PREFIX   prefix of the namespaces, veths and bridge (default rrn)
#   RAYRM_NETNS_STATE    the cluster's directory: token, Ray temp dirs, logs (default /tmp/rrn)
#   RAYRM_NETNS_CPUS     CPUs each worker offers Ray (default 2; the head offers 0)
#   RAYRM_NETNS_HEALTH   Ray's node health check, PERIOD_MS:TIMEOUT_MS:THRESHOLD (default
#                        1000:1000:5: a silent node is declared dead after about 5 s)
set -euo pipefail

SUBNET=${RAYRM_NETNS_SUBNET:-10.213.0}
PREFIX=${RAYRM_NETNS_PREFIX:-rrn}
STATE=${RAYRM_NETNS_STATE:-/tmp/rrn}
CPUS=${RAYRM_NETNS_CPUS:-2}
HEALTH=${RAYRM_NETNS_HEALTH:-1000:1000:5}
PORT=6379
MACHINES=(head worker1 worker2)
BRIDGE="${PREFIX}-br"
TOKEN="$STATE/auth_token"

die() { echo "netns.sh: $*" >&2; exit 2; }

ip_of() {          # machine -> its address
    case "$1" in
        head) echo "$SUBNET.1" ;; worker1) echo "$SUBNET.2" ;; worker2) echo "$SUBNET.3" ;;
        *) die "no machine '$1' (head, worker1, worker2)" ;;
    esac
}
ns_of() { ip_of "$1" >/dev/null; echo "$PREFIX-$1"; }
veth_of() { ip_of "$1" >/dev/null; echo "$PREFIX-v$1"; }     # the bridge side of its cable
in_ns() { local m=$1; shift; ip netns exec "$(ns_of "$m")" "$@"; }
has_ns() { ip netns list | awk '{print $1}' | grep -qx "$1"; }

ray_env() {        # the environment of every Ray process and driver of this cluster
    echo RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$TOKEN" RAY_USAGE_STATS_ENABLED=0
}

system_config() {  # rayrm's own settings (rm/runtime/session.py) plus the node health check
    local period timeout threshold
    IFS=: read -r period timeout threshold <<<"$HEALTH"
    python - "$period" "$timeout" "$threshold" <<'EOF'
import json, sys
from rayrm.rm.runtime.session import SYSTEM_CONFIG
period, timeout, threshold = (int(x) for x in sys.argv[1:])
print(json.dumps({**SYSTEM_CONFIG, "health_check_initial_delay_ms": period,
                  "health_check_period_ms": period, "health_check_timeout_ms": timeout,
                  "health_check_failure_threshold": threshold}))
EOF
}

net_up() {
    has_ns "$(ns_of head)" && die "already up (netns.sh down first)"
    ip link add "$BRIDGE" type bridge
    ip link set "$BRIDGE" up
    for m in "${MACHINES[@]}"; do
        local ns veth
        ns=$(ns_of "$m"); veth=$(veth_of "$m")
        ip netns add "$ns"
        ip link add "$veth" type veth peer name eth0 netns "$ns"
        ip link set "$veth" master "$BRIDGE" up
        in_ns "$m" ip link set lo up
        in_ns "$m" ip addr add "$(ip_of "$m")/24" dev eth0
        in_ns "$m" ip link set eth0 up
    done
}

ray_up() {
    command -v ray >/dev/null || die "no 'ray' on PATH (activate rayrm's virtual environment)"
    mkdir -p "$STATE"
    [ -s "$TOKEN" ] || HOME="$STATE" ray get-auth-token --generate >/dev/null 2>&1
    [ -s "$TOKEN" ] || cp "$STATE/.ray/auth_token" "$TOKEN"
    chmod 600 "$TOKEN"
    local config
    config=$(system_config)
    # The head runs the driver and the RM, not the workload: no CPUs for NMs or containers.
    in_ns head env $(ray_env) ray start --head --node-ip-address "$(ip_of head)" --port "$PORT" \
        --num-cpus 0 --object-store-memory 100000000 --include-dashboard false \
        --temp-dir "$STATE/head" --system-config "$config" --disable-usage-stats \
        >"$STATE/head.log" 2>&1 || { cat "$STATE/head.log" >&2; die "ray start failed on head"; }
    for m in worker1 worker2; do worker_up "$m"; done
}

worker_up() {
    in_ns "$1" env $(ray_env) ray start --address "$(ip_of head):$PORT" --node-ip-address "$(ip_of "$1")" \
        --num-cpus "$CPUS" --object-store-memory 100000000 --temp-dir "$STATE/$1" \
        --disable-usage-stats >"$STATE/$1.log" 2>&1 \
        || { cat "$STATE/$1.log" >&2; die "ray start failed on $1"; }
}

rejoin() {
    local m=$1
    [ "$m" != head ] || die "rejoin is for workers: the head is the cluster"
    kill_machine "$m"
    ip link set "$(veth_of "$m")" up
    for other in "${MACHINES[@]}"; do [ "$other" = "$m" ] || unblock "$m" "$other"; done
    for _ in $(seq 50); do [ -z "$(ip netns pids "$(ns_of "$m")")" ] && break; sleep 0.1; done
    rm -rf "${STATE:?}/$m"
    worker_up "$m"
}

kill_machine() {   # every process in the namespace: `ray stop` would kill the host's other Rays
    local ns pids
    ns=$(ns_of "$1")
    has_ns "$ns" || return 0
    pids=$(ip netns pids "$ns" | tr '\n' ' ')
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
}

down() {
    for m in "${MACHINES[@]}"; do kill_machine "$m"; done
    for m in "${MACHINES[@]}"; do
        local ns; ns=$(ns_of "$m")
        for _ in 1 2 3 4 5 6 7 8 9 10; do       # a process killed above may take a moment to go
            [ -z "$(has_ns "$ns" && ip netns pids "$ns")" ] && break
            kill_machine "$m"; sleep 0.2
        done
        ip link del "$(veth_of "$m")" 2>/dev/null || true
        has_ns "$ns" && ip netns del "$ns"
    done
    ip link del "$BRIDGE" 2>/dev/null || true
    # Ray's sessions (sockets, logs, spilled objects) live under the state directory; keep the
    # logs of the last cluster, drop the rest.
    for m in "${MACHINES[@]}"; do rm -rf "${STATE:?}/$m"; done
}

status() {
    local up=0
    for m in "${MACHINES[@]}"; do
        local ns; ns=$(ns_of "$m")
        if has_ns "$ns"; then
            up=1
            echo "$m $ns $(ip_of "$m") link $(cat "/sys/class/net/$(veth_of "$m")/operstate" 2>/dev/null || echo none)" \
                 "processes $(ip netns pids "$ns" | wc -l)"
        else
            echo "$m $ns absent"
        fi
    done
    [ "$up" = 1 ] || return 0
    in_ns head env $(ray_env) python - "$(ip_of head):$PORT" <<'EOF' || true
import sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
for n in ray.nodes():
    print(f"ray node {n['NodeID'][:12]} {n['NodeManagerAddress']} alive={n['Alive']} "
          f"cpus={n['Resources'].get('CPU', 0):g}")
EOF
}

block() {          # A and B drop what they send each other; both keep every other link
    local a=$1 b=$2
    in_ns "$a" ip route replace blackhole "$(ip_of "$b")/32"
    in_ns "$b" ip route replace blackhole "$(ip_of "$a")/32"
}

unblock() {
    local a=$1 b=$2
    in_ns "$a" ip route del blackhole "$(ip_of "$b")/32" 2>/dev/null || true
    in_ns "$b" ip route del blackhole "$(ip_of "$a")/32" 2>/dev/null || true
}

[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
command -v ip >/dev/null || die "needs iproute2 ('ip')"
case "${1:-}" in
    up) net_up; ray_up || { down; exit 2; }; echo "$(ip_of head):$PORT" ;;
    down) down ;;
    status) status ;;
    address) echo "$(ip_of head):$PORT" ;;
    exec) [ $# -ge 3 ] || die "exec MACHINE COMMAND..."; m=$2; shift 2; in_ns "$m" env $(ray_env) "$@" ;;
    link) [ $# = 3 ] || die "link MACHINE down|up"; ip link set "$(veth_of "$2")" "$3" ;;
    block) [ $# = 3 ] || die "block A B"; block "$2" "$3" ;;
    unblock) [ $# = 3 ] || die "unblock A B"; unblock "$2" "$3" ;;
    kill) [ $# = 2 ] || die "kill MACHINE"; kill_machine "$2" ;;
    rejoin) [ $# = 2 ] || die "rejoin WORKER"; rejoin "$2" ;;
    *) die "usage: netns.sh up|down|status|address|exec MACHINE CMD...|link MACHINE down|up|block A B|unblock A B|kill MACHINE|rejoin WORKER" ;;
esac
