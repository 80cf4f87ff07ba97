#!/usr/bin/env bash
# Emulated hosts on this machine (root only): N network namespaces on a bridge, each with its
# own IPv4 address, its own host name (a UTS namespace) and its own node-local storage mounted
# at the same path on every host (a mount namespace). Open MPI's mpirun launches onto them as
# onto remote hosts through the agent below, so its own traffic crosses the emulated network.
#
#   scripts/hosts.sh up N          create hosts h1..hN (idempotent; a different N re-creates)
#   scripts/hosts.sh down          remove them, ending what runs in them
#   scripts/hosts.sh exec K CMD..  run CMD on host K (a number 1..N or a host name)
#   scripts/hosts.sh env           the environment that points mpirun at the hosts (eval it)
#   scripts/hosts.sh list          host, address, node-local storage
#   scripts/hosts.sh link K up|down   take host K's network link down or bring it back
#   scripts/hosts.sh agent [OPTS] HOST CMD..   the launch agent mpirun calls (as it would ssh)
#
# Knobs: TESSERA_HOSTS_SUBNET (a /24, default 10.213.7.0/24; checked against existing
# routes), TESSERA_HOSTS_LOCAL (the node-local storage path, default /mnt/tessera-local).
set -euo pipefail

SUBNET="${TESSERA_HOSTS_SUBNET:-10.213.7.0/24}"
LOCAL="${TESSERA_HOSTS_LOCAL:-/mnt/tessera-local}"
STATE=/run/tessera-hosts
STORAGE=/var/tmp/tessera-hosts
BRIDGE=tsbr0
SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
NET="${SUBNET%/*}"
NET="${NET%.*}"

die() { echo "hosts.sh: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" -eq 0 ] || die "needs root (network and mount namespaces)"; }
count() { [ -f "$STATE/count" ] && cat "$STATE/count" || echo 0; }

# host K's name from a number or a name
host_name() {
    case "$1" in
        h[0-9]*) echo "$1" ;;
        [0-9]*) echo "h$1" ;;
        *) die "no emulated host '$1' (give 1..$(count) or h1..h$(count))" ;;
    esac
}

ip_to_int() { local IFS=.; set -- $1; echo $(( ($1 << 24) + ($2 << 16) + ($3 << 8) + $4 )); }

# Refuses a subnet that overlaps a route this machine already has (other than our bridge).
check_subnet() {
    [ "${SUBNET#*/}" = 24 ] || die "TESSERA_HOSTS_SUBNET=$SUBNET: give a /24"
    local ours lo hi dst dev plen base blo bhi
    ours=$(ip_to_int "${SUBNET%/*}")
    lo=$(( ours & 0xFFFFFF00 )); hi=$(( lo + 255 ))
    while read -r dst _ dev _; do
        [ "$dev" = "$BRIDGE" ] && continue
        [ "$dst" = default ] && continue
        case "$dst" in */*) plen=${dst#*/}; base=${dst%/*} ;; *) plen=32; base=$dst ;; esac
        blo=$(( $(ip_to_int "$base") & (plen == 0 ? 0 : (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF) ))
        bhi=$(( blo + (1 << (32 - plen)) - 1 ))
        if [ "$blo" -le "$hi" ] && [ "$bhi" -ge "$lo" ]; then
            die "subnet $SUBNET overlaps the route '$dst dev $dev'; choose another with TESSERA_HOSTS_SUBNET"
        fi
    done < <(ip -4 route show | awk '{print $1, $2, $3, $4}')
}

enter() { # enter K CMD...
    local h; h=$(host_name "$1"); shift
    local anchor; anchor=$(live_anchor)
    if [ -n "$anchor" ] && [ "$(readlink /proc/self/ns/mnt)" != "$(readlink "/proc/$anchor/ns/mnt")" ]; then
        # Called from inside an emulated host (a launcher running on one reaching another):
        # the other hosts' namespace files are mounted in this machine's namespaces only, so
        # go back to them first (the anchor is a process that stays there).
        exec nsenter --target "$anchor" --mount --uts --net -- bash "$SELF" exec "$h" "$@"
    fi
    [ -e "/run/netns/$h" ] || die "host $h is not up (scripts/hosts.sh up N)"
    exec nsenter --net="/run/netns/$h" --mount="$STATE/$h.mnt" --uts="$STATE/$h.uts" -- "$@"
}

# The launch agent mpirun uses to start processes on the hosts: this copy of the script.
write_agent() {
    cat > "$STATE/agent" <<EOF
#!/bin/sh
exec "$SELF" agent "\$@"
EOF
    chmod 755 "$STATE/agent"
}

up() {
    need_root
    local n=$1 k h
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up N: N must be 1..200"
    if [ "$(count)" -eq "$n" ] && ip link show "$BRIDGE" >/dev/null 2>&1; then
        # Already up: only links a test left down come back, and the launch agent names this
        # copy of the script (the one that brought the hosts up may be gone).
        for k in $(seq 1 "$n"); do ip link set "tsv-h$k" up; done
        write_agent
        start_anchor
        return 0
    fi
    down
    check_subnet
    mkdir -p "$STATE" "$STORAGE" "$LOCAL"
    # Namespaces are kept alive by bind mounts of their files, which need a private mount.
    if ! mountpoint -q "$STATE"; then
        mount --bind "$STATE" "$STATE"
        mount --make-private "$STATE"
    fi
    ip link add "$BRIDGE" type bridge
    ip addr add "$NET.254/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    : > "$STATE/hostfile"
    for k in $(seq 1 "$n"); do
        h="h$k"
        ip netns add "$h"
        ip link add "tsv-$h" type veth peer name eth0 netns "$h"
        ip link set "tsv-$h" master "$BRIDGE" up
        ip -n "$h" addr add "$NET.$k/24" dev eth0
        ip -n "$h" link set eth0 up
        ip -n "$h" link set lo up
        ip -n "$h" route add default via "$NET.254"
        mkdir -p "$STORAGE/$h"
        touch "$STATE/$h.mnt" "$STATE/$h.uts"
        unshare --mount="$STATE/$h.mnt" --uts="$STATE/$h.uts" --propagation private \
            sh -c "hostname $h && mount --bind $STORAGE/$h $LOCAL"
        echo "$NET.$k $h # tessera-hosts" >> /etc/hosts
        echo "$h" >> "$STATE/hostfile"
    done
    write_agent
    start_anchor
    echo "$n" > "$STATE/count"
    echo "hosts.sh: $n hosts up on $SUBNET (node-local storage at $LOCAL)" >&2
}

# A process that stays in this machine's own namespaces, for launchers on a host to return
# through (see `enter`).
start_anchor() {
    [ -n "$(live_anchor)" ] && return 0
    # Named, so that a reused process id is never taken for it.
    setsid bash -c 'exec -a tessera-hosts-anchor sleep infinity' < /dev/null > /dev/null 2>&1 &
    echo $! > "$STATE/anchor.pid"
}

# The anchor's process id if it still runs (empty otherwise).
live_anchor() {
    local pid; pid=$(cat "$STATE/anchor.pid" 2>/dev/null || true)
    [ -n "$pid" ] || return 0
    if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q '^tessera-hosts-anchor'; then
        echo "$pid"
    fi
}

down() {
    need_root
    local h
    local anchor; anchor=$(live_anchor)
    [ -n "$anchor" ] && kill "$anchor" 2>/dev/null || true
    rm -f "$STATE/anchor.pid"
    for ns in /run/netns/h[0-9]*; do
        [ -e "$ns" ] || continue
        h=$(basename "$ns")
        # Whatever still runs on the host ends with it.
        for pid in $(ip netns pids "$h" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        # Deleted explicitly: connections still closing can keep a namespace (and so its
        # end of the pair) alive for minutes after `ip netns del`.
        ip link del "tsv-$h" 2>/dev/null || true
        ip netns del "$h" 2>/dev/null || true
        for f in "$STATE/$h.mnt" "$STATE/$h.uts"; do
            umount "$f" 2>/dev/null || true
            rm -f "$f"
        done
        rm -rf "${STORAGE:?}/$h"
    done
    ip link del "$BRIDGE" 2>/dev/null || true
    if [ -f /etc/hosts ] && grep -q '# tessera-hosts' /etc/hosts; then
        # In place (not sed -i): /etc/hosts may be a bind mount that cannot be replaced.
        local kept; kept=$(grep -v '# tessera-hosts' /etc/hosts)
        printf '%s\n' "$kept" > /etc/hosts
    fi
    rm -f "$STATE/count" "$STATE/hostfile" "$STATE/agent"
}

agent() {
    # Called as ssh would be: [options] HOST COMMAND...; the command is one shell string.
    while [ $# -gt 0 ]; do
        case "$1" in
            -o|-p|-l|-i|-F) shift 2 ;;
            -*) shift ;;
            *) break ;;
        esac
    done
    [ $# -ge 2 ] || die "agent: expected HOST COMMAND"
    local h=$1; shift
    enter "$h" sh -c "$*"
}

env_out() {
    [ "$(count)" -gt 0 ] || die "no hosts are up (scripts/hosts.sh up N)"
    cat <<EOF
export OMPI_MCA_plm_rsh_agent=$STATE/agent
export OMPI_MCA_plm_rsh_no_tree_spawn=1
export OMPI_MCA_oob_tcp_if_include=$SUBNET
export OMPI_MCA_btl_tcp_if_include=$SUBNET
export OMPI_MCA_btl=tcp,self
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TESSERA_HOSTFILE=$STATE/hostfile
export TESSERA_HOSTS_LOCAL=$LOCAL
EOF
}

link() {
    need_root
    local h; h=$(host_name "$1")
    case "${2:-}" in
        up|down) ip link set "tsv-$h" "$2" ;;
        *) die "link K up|down" ;;
    esac
}

case "${1:-}" in
    up) [ $# -eq 2 ] || die "usage: up N"; up "$2" ;;
    down) down ;;
    exec) [ $# -ge 3 ] || die "usage: exec K CMD..."; shift; k=$1; shift; enter "$k" "$@" ;;
    agent) shift; agent "$@" ;;
    env) env_out ;;
    link) [ $# -eq 3 ] || die "usage: link K up|down"; link "$2" "$3" ;;
    list)
        for k in $(seq 1 "$(count)"); do echo "h$k $NET.$k $LOCAL"; done ;;
    -h|--help|"") sed -n '2,20p' "$0" ;;
    *) die "unknown command '$1' (up N, down, exec K CMD, env, list, link K up|down, agent)" ;;
esac
