#!/usr/bin/env bash
# A Slurm cluster over the emulated hosts of scripts/hosts.sh (root only): slurmctld runs on this
# machine (at its bridge address), one slurmd per host h1..hN runs inside that host's namespaces
# as node hK, and munge authenticates them. srun, salloc and sbatch then place work on the hosts.
#
#   scripts/slurm.sh up       install slurm-wlm and munge if missing, write /etc/slurm/slurm.conf
#                             and cgroup.conf, start munged, slurmctld and the slurmds, and wait
#                             until every node is idle (idempotent; the hosts must be up first)
#   scripts/slurm.sh down     stop the slurmds, slurmctld and munged (if this script started it);
#                             the packages stay installed
#
# Logs: /var/log/slurm/slurmctld.log, /var/log/slurm/slurmd-hK.log, /var/log/munge/munged.log.
# Knobs: TESSERA_HOSTS_SUBNET (as for scripts/hosts.sh), TESSERA_SLURM_WAIT (seconds to wait
# for the nodes, default 60).
# Open MPI under an allocation (salloc, sbatch) needs OMPI_MCA_oob_tcp_if_include and
# OMPI_MCA_btl_tcp_if_include set to the subnet, and as root OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -euo pipefail

SUBNET="${TESSERA_HOSTS_SUBNET:-10.213.7.0/24}"
WAIT="${TESSERA_SLURM_WAIT:-60}"
HOSTS_STATE=/run/tessera-hosts
STATE=$HOSTS_STATE/slurm
CONF=/etc/slurm
LOGS=/var/log/slurm
CTLD_PID=/run/slurmctld.pid
HOSTS_SH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/hosts.sh"
NET="${SUBNET%/*}"
NET="${NET%.*}"

die() { echo "slurm.sh: $*" >&2; exit 1; }
say() { echo "slurm.sh: $*" >&2; }
need_root() { [ "$(id -u)" -eq 0 ] || die "needs root (daemons, namespaces and /etc/slurm)"; }
count() { [ -f "$HOSTS_STATE/count" ] && cat "$HOSTS_STATE/count" || echo 0; }

# The pid in a pid file, if that process is alive and is the named program.
alive() { # alive PIDFILE PROGRAM
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] && echo "$pid"
}

stop_pidfile() { # stop_pidfile PIDFILE PROGRAM: TERM, then KILL after 10 s
    local pid i
    pid=$(alive "$1" "$2") || { rm -f "$1"; return 0; }
    kill "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do
        [ -d "/proc/$pid" ] || break
        sleep 0.1
    done
    [ -d "/proc/$pid" ] && kill -9 "$pid" 2>/dev/null || true
    rm -f "$1"
}

install_packages() {
    local p missing=()
    for p in slurm-wlm munge; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

start_munge() {
    if [ ! -s /etc/munge/munge.key ]; then
        (umask 077; head -c 1024 /dev/urandom > /etc/munge/munge.key)
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    runuser -u munge -- munged || die "munged did not start; see /var/log/munge/munged.log"
    touch "$STATE/munged-ours"
    munge -n | unmunge >/dev/null 2>&1 || die "munge does not answer; see /var/log/munge/munged.log"
}

write_conf() { # prints "changed" if slurm.conf or cgroup.conf changed
    local n=$1 k new changed=""
    new=$(
        cat <<EOF
# Written by scripts/slurm.sh: controller on this machine, nodes h1..h$n on the emulated hosts.
ClusterName=tessera
SlurmctldHost=$(hostname -s)($NET.254)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
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
MpiDefault=none
MailProg=/bin/true
EOF
        for k in $(seq 1 "$n"); do echo "NodeName=h$k NodeAddr=$NET.$k CPUs=2 State=UNKNOWN"; done
        echo "PartitionName=hosts Nodes=h[1-$n] Default=YES MaxTime=INFINITE State=UP"
    )
    mkdir -p "$CONF" "$LOGS" /var/lib/slurm/slurmctld
    if [ "$(cat "$CONF/slurm.conf" 2>/dev/null)" != "$new" ]; then
        printf '%s\n' "$new" > "$CONF/slurm.conf"; changed=1
    fi
    new=$(printf '%s\n' "CgroupPlugin=cgroup/v1" "IgnoreSystemd=yes")
    if [ "$(cat "$CONF/cgroup.conf" 2>/dev/null)" != "$new" ]; then
        printf '%s\n' "$new" > "$CONF/cgroup.conf"; changed=1
    fi
    [ -z "$changed" ] || echo changed
}

stop_slurm() {
    local f
    for f in /run/slurmd-h[0-9]*.pid; do [ -e "$f" ] && stop_pidfile "$f" slurmd; done
    stop_pidfile "$CTLD_PID" slurmctld
}

up() {
    need_root
    local n k h states bad waited=0
    n=$(count)
    [ "$n" -ge 1 ] && ip link show tsbr0 >/dev/null 2>&1 || die "no emulated hosts are up (scripts/hosts.sh up N)"
    install_packages
    mkdir -p "$STATE"
    start_munge
    # A new configuration (another host count) restarts the daemons that run.
    [ -z "$(write_conf "$n")" ] || stop_slurm
    if ! alive "$CTLD_PID" slurmctld >/dev/null; then
        slurmctld || die "slurmctld did not start; see $LOGS/slurmctld.log"
    fi
    for k in $(seq 1 "$n"); do
        h="h$k"
        alive "/run/slurmd-$h.pid" slurmd >/dev/null && continue
        mkdir -p "/var/spool/slurmd-$h"
        bash "$HOSTS_SH" exec "$k" slurmd -N "$h" || die "slurmd on $h did not start; see $LOGS/slurmd-$h.log"
    done
    # Every node idle (or busy with jobs), none down, drained or not responding.
    while :; do
        states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u || true)
        bad=$(awk '$2 !~ /^(idle|mix|alloc|comp)$/ {print $1 " (" $2 ")"}' <<<"$states" | tr '\n' ' ')
        [ -n "$states" ] && [ -z "$bad" ] && break
        if [ "$waited" -ge "$((WAIT * 2))" ]; then
            die "after ${WAIT}s nodes are not idle: ${bad:-sinfo gave nothing}; see $LOGS/slurmctld.log and $LOGS/slurmd-hK.log"
        fi
        sleep 0.5; waited=$((waited + 1))
    done
    say "slurm up: nodes h1..h$n idle, controller at $NET.254"
}

down() {
    need_root
    stop_slurm
    if [ -f "$STATE/munged-ours" ]; then
        munged --stop >/dev/null 2>&1 || true
        rm -f "$STATE/munged-ours"
    fi
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    -h|--help|"") sed -n '2,17p' "$0" ;;
    *) die "unknown command '$1' (up, down)" ;;
esac
