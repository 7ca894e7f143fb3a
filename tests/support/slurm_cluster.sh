#!/usr/bin/env bash
# A two-node Slurm cluster under DIR: munged, slurmctld and a slurmd per node, each node in namespaces of its own.
# Usage: slurm_cluster.sh start DIR CTLD_PORT SLURMD_PORT   (prints nothing; exits non-zero with the daemons' logs)
#        slurm_cluster.sh stop DIR                           (ends every process it started, removes the namespaces)
#        slurm_cluster.sh exec DIR NODE COMMAND...           (runs COMMAND on node NODE (1 or 2), with SLURM_CONF set)
# Nodes node1 (10.214.0.1, also the controller and login node) and node2 (10.214.0.2): each a network, UTS and mount
# namespace, on a bridge in a third network namespace; each sees its own hostname and an /etc/hosts naming both.
# Everything lives under DIR: slurm.conf, the munge key, state, spool and logs. Slurm's plugins that need systemd or
# cgroups are left out (proctrack/linuxproc, task/none); no system service or file is touched.
set -euo pipefail
cmd=$1 dir=$2
stem="ddpslurm_$(basename "$dir" | tr -c 'a-zA-Z0-9\n' _)"
address() { echo "10.214.0.$1"; }

# Runs "$@" in node N's namespaces: its hostname, /etc/hosts bound to DIR's, SLURM_CONF set.
on_node() {
  local n=$1
  shift
  nsenter --net="/run/netns/${stem}_$n" unshare --uts --mount --propagation private \
    env SLURM_CONF="$dir/slurm.conf" bash -c 'hostname "$1"; mount --bind "$2" /etc/hosts; shift 2; exec "$@"' \
    _ "node$n" "$dir/hosts" "$@"
}

stop() {
  for pidfile in "$dir"/*.pid; do
    [ -f "$pidfile" ] && kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
  done
  for n in 1 2 switch; do
    if ip netns list | grep -qw "${stem}_$n"; then
      ip netns pids "${stem}_$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
      ip netns del "${stem}_$n" 2>/dev/null || true
    fi
  done
  [ -f "$dir/munged.pid" ] && kill -KILL "$(cat "$dir/munged.pid")" 2>/dev/null || true
  rm -f "$dir"/*.pid
}

case $cmd in
stop)
  stop
  exit 0
  ;;
exec)
  n=$3
  shift 3
  on_node "$n" "$@"
  exit
  ;;
start) ;;
*)
  echo "usage: $0 start|stop|exec DIR ..." >&2
  exit 2
  ;;
esac

ctld_port=$3 slurmd_port=$4
trap 'rc=$?; if [ $rc -ne 0 ]; then tail -n 20 "$dir"/*.log >&2 || true; stop; fi' EXIT

mkdir -p "$dir/state" "$dir/spool/node1" "$dir/spool/node2" "$dir/munge"
chmod 711 "$dir/munge"  # munged: the socket's folder searchable by all
head -c 1024 /dev/urandom >"$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"
printf '127.0.0.1 localhost\n%s node1\n%s node2\n' "$(address 1)" "$(address 2)" >"$dir/hosts"
: >"$dir/plugstack.conf"
cpus=4  # the docs' srun line asks for 4 tasks a node; config_overrides lets a node claim more CPUs than it has
cat >"$dir/slurm.conf" <<EOF
ClusterName=ddptest
SlurmctldHost=node1($(address 1))
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=5
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=node1 NodeAddr=$(address 1) CPUs=$cpus State=UNKNOWN
NodeName=node2 NodeAddr=$(address 2) CPUs=$cpus State=UNKNOWN
PartitionName=all Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP
EOF

# The two nodes' namespaces on one bridge.
ip netns add "${stem}_switch"
ip -n "${stem}_switch" link add br0 type bridge
ip -n "${stem}_switch" link set br0 up
for n in 1 2; do
  ip netns add "${stem}_$n"
  ip link add veth0 netns "${stem}_$n" type veth peer name "port$n" netns "${stem}_switch"
  ip -n "${stem}_switch" link set "port$n" master br0 up
  ip -n "${stem}_$n" addr add "$(address "$n")/24" dev veth0
  ip -n "${stem}_$n" link set lo up
  ip -n "${stem}_$n" link set veth0 up
done

munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munge/munge.seed" --force >/dev/null 2>&1
on_node 1 slurmctld -D -i -f "$dir/slurm.conf" >"$dir/slurmctld.out" 2>&1 &
# Each slurmd, and so its jobs' tasks, on two CPUs: a node of two CPUs (ddprun --nproc-per-node=auto reads the
# affinity mask), as task/none binds nothing.
allowed=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
node_cpus=$(for r in ${allowed//,/ }; do seq "${r%-*}" "${r#*-}"; done | head -n 2 | paste -sd,)
for n in 1 2; do
  on_node "$n" taskset -c "$node_cpus" slurmd -D -f "$dir/slurm.conf" >"$dir/slurmd-node$n.out" 2>&1 &
done

# Both nodes idle: the cluster takes jobs.
for _ in $(seq 1 150); do
  if [ "$(on_node 1 sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$')" = 2 ]; then exit 0; fi
  sleep 0.2
done
echo "slurm_cluster: the nodes did not become idle within 30 s:" >&2
on_node 1 sinfo -N -l >&2 || true
exit 1
