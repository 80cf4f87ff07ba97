#!/usr/bin/env bash
# A Slurm cluster over the emulated hosts of scripts/hosts.sh (root only): slurmctld runs on this
# machine at its bridge address, one slurmd per host runs inside that host's namespaces as node
# hK, and munge authenticates them. srun, salloc and sbatch then place work on h1..hN; a batch
# script runs on the first node of its allocation, so its working directory must exist there.
#
#   scripts/slurm.sh up     install slurm-wlm and munge if missing, write /etc/slurm/slurm.conf and
#                           cgroup.conf, start munged, slurmctld and the slurmds, wait until every
#                           node is idle (idempotent; scripts/hosts.sh up N first)
#   scripts/slurm.sh down   stop the slurmds, slurmctld, and munged if this script started it
#
# Logs: /var/log/slurm/slurmctld.log, /var/log/slurm/slurmd-hK.log, /var/log/munge/munged.log.
# Knobs: TESSERA_HOSTS_SUBNET (as for scripts/hosts.sh), TESSERA_SLURM_WAIT (seconds, default 60).
# mpirun inside an allocation needs the environment of `scripts/hosts.sh env` (eval it).
set -euo pipefail

SUBNET="${TESSERA_HOSTS_SUBNET:-10.213.7.0/24}"
WAIT="${TESSERA_SLURM_WAIT:-60}"
HOSTS_STATE=/run/tessera-hosts
STATE=$HOSTS_STATE/slurm
LOGS=/var/log/slurm
CTLD_PID=/run/slurmctld.pid
HOSTS_SH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/hosts.sh"
NET="${SUBNET%/*}"
NET="${NET%.*}"

die() { echo "slurm.sh: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" -eq 0 ] || die "needs root (daemons, namespaces, /etc/slurm)"; }
count() { [ -f "$HOSTS_STATE/count" ] && cat "$HOSTS_STATE/count" || echo 0; }
running() { [ -r "/proc/$1/stat" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# The pid in a daemon's pid file (/run/slurmctld.pid, /run/slurmd-hK.pid), if that daemon runs.
alive() {
    local pid prog
    prog=$(basename "$1" .pid); prog=${prog%%-*}
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && running "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$prog" ] && echo "$pid"
}

# Stops slurmctld and the slurmds together: TERM, then KILL what is left after 15 s.
stop_slurm() {
    local f pid pids=()
    for f in "$CTLD_PID" /run/slurmd-h[0-9]*.pid; do
        pid=$(alive "$f") && kill "$pid" 2>/dev/null && pids+=("$pid")
        rm -f "$f"
    done
    for _ in $(seq 1 150); do
        mapfile -t pids < <(for pid in "${pids[@]}"; do ! running "$pid" || echo "$pid"; done)
        [ ${#pids[@]} -eq 0 ] && return 0
        sleep 0.1
    done
    kill -9 "${pids[@]}" 2>/dev/null || true
}

install_packages() {
    local p missing=()
    for p in slurm-wlm munge; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "slurm.sh: installing Debian packages: ${missing[*]}" >&2
    { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >"$STATE/apt.log" 2>&1 \
        || die "installing ${missing[*]} failed; see $STATE/apt.log"
}

start_munge() {
    local key=/etc/munge/munge.key log=/var/log/munge/munged.log
    if [ ! -s "$key" ]; then
        mkdir -p /etc/munge
        (umask 077; head -c 1024 /dev/urandom > "$key")
        chown munge:munge "$key"; chmod 0400 "$key"
    fi
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0   # already running
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    runuser -u munge -- munged || die "munged did not start; see $log"
    touch "$STATE/munged-ours"
    munge -n | unmunge >/dev/null 2>&1 || die "munged does not answer; see $log"
}

write_conf() { # write_conf N: succeeds when slurm.conf or cgroup.conf changed
    local n=$1 k old
    mkdir -p /etc/slurm "$LOGS" /var/lib/slurm/slurmctld
    old=$(cat /etc/slurm/slurm.conf /etc/slurm/cgroup.conf 2>/dev/null || true)
    {
        cat <<EOF
# Written by scripts/slurm.sh: the controller on this machine, nodes h1..h$n on the emulated hosts.
ClusterName=tessera
SlurmctldHost=$(hostname -s)($NET.254)
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmctldPidFile=$CTLD_PID
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdPidFile=/run/slurmd-%n.pid
SlurmdSpoolDir=/var/spool/slurmd-%n
SlurmdLogFile=$LOGS/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MailProg=/bin/true
EOF
        for k in $(seq 1 "$n"); do echo "NodeName=h$k NodeAddr=$NET.$k CPUs=2 State=UNKNOWN"; done
        echo "PartitionName=hosts Nodes=h[1-$n] Default=YES MaxTime=INFINITE State=UP"
    } > /etc/slurm/slurm.conf
    printf '%s\n' CgroupPlugin=cgroup/v1 IgnoreSystemd=yes > /etc/slurm/cgroup.conf
    [ "$(cat /etc/slurm/slurm.conf /etc/slurm/cgroup.conf)" != "$old" ]
}

up() {
    need_root
    local n k h t states bad="" i
    n=$(count)
    if [ "$n" -lt 1 ] || ! ip link show tsbr0 >/dev/null 2>&1; then
        die "no emulated hosts are up (scripts/hosts.sh up N)"
    fi
    mkdir -p "$STATE"
    install_packages
    start_munge
    # A new configuration (another host count) restarts what runs.
    if write_conf "$n"; then stop_slurm; fi
    if ! alive "$CTLD_PID" >/dev/null; then
        slurmctld || die "slurmctld did not start; see $LOGS/slurmctld.log"
    fi
    for k in $(seq 1 "$n"); do
        h="h$k"
        alive "/run/slurmd-$h.pid" >/dev/null && continue
        mkdir -p "/var/spool/slurmd-$h"
        date +%Y-%m-%dT%H:%M:%S > "$STATE/$h.started"
        bash "$HOSTS_SH" exec "$k" slurmd -N "$h" || die "slurmd on $h did not start; see $LOGS/slurmd-$h.log"
    done
    # Every node idle or running jobs (not down, drained or completing), each slurmd registered
    # since this script started it.
    for i in $(seq 1 $((WAIT * 2))); do
        states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u) || states=""
        bad=$(awk -v l="$LOGS" '$2 !~ /^(idle|mix|alloc)$/ {
            printf "%s is %s (see %s/slurmd-%s.log); ", $1, $2, l, $1 }' <<<"$states")
        k=$(grep -c . <<<"$states") || true
        [ "$k" -eq "$n" ] || bad+="sinfo lists $k of $n nodes (see $LOGS/slurmctld.log); "
        for k in $(seq 1 "$n"); do
            h="h$k"
            t=$(scontrol -o show node "$h" 2>/dev/null | grep -o 'SlurmdStartTime=[^ ]*' | cut -d= -f2) || t=""
            [[ "$t" =~ ^[0-9] && ! "$t" < "$(cat "$STATE/$h.started" 2>/dev/null)" ]] \
                || bad+="$h has not registered (see $LOGS/slurmd-$h.log); "
        done
        [ -z "$bad" ] && break
        [ "$i" -lt $((WAIT * 2)) ] || die "after ${WAIT}s: ${bad%; }"
        sleep 0.5
    done
    echo "slurm.sh: nodes h1..h$n idle, slurmctld at $NET.254" >&2
}

down() {
    need_root
    stop_slurm
    [ ! -f "$STATE/munged-ours" ] || munged --stop >/dev/null 2>&1 || true
    rm -f "$STATE"/*
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    -h|--help|"") sed -n '2,14p' "$0" ;;
    *) die "unknown command '$1' (up, down)" ;;
esac
