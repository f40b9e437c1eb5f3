#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, from Debian's packages (slurm-wlm, munge),
# for Reel's tests and for trying docs/CLUSTER.md's recipes by hand: munged, slurmctld and
# slurmd, every daemon and client talking over 127.0.0.1, on ports of its own, with its
# configuration and state under $REEL_CACHE/slurm. No cgroups needed
# (proctrack/linuxproc, task/none), no accounting database.
#
#   scripts/slurm.sh start    configure and start what is not running (a second call does nothing)
#   scripts/slurm.sh stop     stop slurmd and slurmctld (munged is left running)
#   scripts/slurm.sh status   sinfo of the cluster
#   scripts/slurm.sh env      the line that points Slurm's clients at this cluster
#
# Clients find the cluster through SLURM_CONF: `eval "$(scripts/slurm.sh env)"`, then
# sbatch, squeue, scancel and srun work as on any cluster. Needs root (the daemons switch
# to the submitting user to run jobs); scripts/setup.sh installs the packages.
set -euo pipefail

REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
dir="$REEL_CACHE/slurm"
conf="$dir/slurm.conf"
node=reel0

say() { echo "slurm.sh: $*" >&2; }

for program in slurmctld slurmd munged sinfo; do
  command -v "$program" >/dev/null || {
    say "$program is missing: run scripts/setup.sh (it installs slurm-wlm and munge)"
    exit 1
  }
done

write_config() {
  mkdir -p "$dir/ctld" "$dir/spool" "$dir/log"
  local cpus memory
  cpus=$(nproc)
  memory=$(awk '/MemTotal/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)
  : > "$dir/plugstack.conf"
  cat > "$conf.tmp" <<EOF
# Written by scripts/slurm.sh: a one-node cluster on 127.0.0.1 for Reel's tests.
ClusterName=reel
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=5
MinJobAge=600
NodeName=$node NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=reel Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$conf.tmp" "$conf"
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    return
  fi
  [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /run/munge /var/lib/munge /var/log/munge
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return
    sleep 0.1
  done
  say "munged did not start"
  exit 1
}

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
  [ "$(id -u)" = 0 ] || { say "run me as root"; exit 1; }
  write_config
  start_munge
  export SLURM_CONF="$conf"
  running "$dir/slurmctld.pid" || slurmctld -f "$conf"
  running "$dir/slurmd.pid" || slurmd -f "$conf" -N "$node"
  # Ready when the node takes jobs.
  for _ in $(seq 100); do
    state=$(sinfo -h -n "$node" -o %T 2>/dev/null || true)
    case "$state" in
      idle*|mixed*|allocated*) say "up: $node $state ($SLURM_CONF)"; return ;;
      down*|drain*) scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.2
  done
  say "the node did not come up; logs in $dir/log"
  tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
  exit 1
}

stop() {
  for daemon in slurmd slurmctld; do
    if running "$dir/$daemon.pid"; then
      kill "$(cat "$dir/$daemon.pid")"
    fi
  done
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) SLURM_CONF="$conf" sinfo ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) say "usage: scripts/slurm.sh start|stop|status|env"; exit 2 ;;
esac
