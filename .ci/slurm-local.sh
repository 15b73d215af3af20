#!/usr/bin/env bash
# A throwaway single-node Slurm for the tests of `gpubench run --launcher slurm`, from Debian's
# packages (slurm-wlm, munge): munged, slurmctld and slurmd on localhost, state and logs in DIR.
#   .ci/slurm-local.sh up DIR     write DIR/slurm.conf, start the daemons, wait for the node to be idle
#   .ci/slurm-local.sh down DIR   stop them (by the pids they wrote in DIR)
# Then `export SLURM_CONF=DIR/slurm.conf` for sbatch, squeue, sacct and scancel. No cgroups
# (proctrack/linuxproc, task/none) and no accounting database: made for a container. Run as root.
set -euo pipefail
cmd="${1:?usage: $0 up|down DIR}"
dir="${2:?usage: $0 up|down DIR}"
ctl_port="${GPUBENCH_SLURMCTLD_PORT:-6817}"
d_port="${GPUBENCH_SLURMD_PORT:-6818}"

stop() {  # each daemon by the pid it recorded
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munged.pid"; do
    [ -s "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

case "$cmd" in
down) stop; exit 0 ;;
up) ;;
*) echo "usage: $0 up|down DIR" >&2; exit 2 ;;
esac

mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chown munge:munge "$dir/munge"
chmod 755 "$dir"
host="$(hostname -s)"
cat > "$dir/slurm.conf" <<CONF
ClusterName=gpubench-ci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=600
KillWait=10
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$dir/slurm.conf"

runuser -u munge -- /usr/sbin/munged --socket="$dir/munge/munge.socket" --pid-file="$dir/munge/munged.pid" \
  --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" --force
for _ in $(seq 50); do [ -S "$dir/munge/munge.socket" ] && break; sleep 0.1; done
cp "$dir/munge/munged.pid" "$dir/munged.pid"
/usr/sbin/slurmctld -f "$dir/slurm.conf"
/usr/sbin/slurmd -f "$dir/slurm.conf" -N localhost
for _ in $(seq 150); do  # up to 30 s for the node to register
  if sinfo -h -n localhost -o %t 2>/dev/null | grep -qx idle; then
    exit 0
  fi
  sleep 0.2
done
echo "slurm did not come up in 30 s; its logs:" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" "$dir/munge/munged.log" >&2 || true
stop
exit 1
