#!/usr/bin/env bash
# start-local-slurm.sh - bring up a REAL Slurm "cluster" of N fake nodes on this single
# machine, for the tests (tests/conftest.py: local_slurm). Debian 12's slurm-wlm 22.05,
# no systemd needed; run as root. configs/cluster/localslurm.yaml describes it.
#
#   munged (private key + socket) -> slurmctld -> N x slurmd (-N nodeX, own port/spool)
#
# Every daemon runs in the background; PIDs are recorded under $LOCAL_SLURM_DIR/run.
# Stop everything with stop-local-slurm.sh (same LOCAL_SLURM_DIR).
#
# Afterwards:   source "$LOCAL_SLURM_DIR/env.sh"   (exports SLURM_CONF)
#               sbatch --wait job.sbatch ; squeue ; sinfo ; scontrol show job <id>
#
# Knobs (environment variables, all optional):
#   LOCAL_SLURM_DIR=/tmp/local-slurm  config + state + logs (wiped on every start)
#   LOCAL_SLURM_NODES=2               number of fake compute nodes (node1..nodeN)
#   LOCAL_SLURM_NODE_PREFIX=node
#   LOCAL_SLURM_CPUS_PER_NODE=4       may exceed the real core count
#   LOCAL_SLURM_GPUS_PER_NODE=2       fake GPUs (gres/gpu backed by /dev/null links); 0 = no GRES
#   LOCAL_SLURM_MEM_MB=<host MemTotal> RealMemory declared per node
#   LOCAL_SLURM_PARTITION=gpu         the (default) partition
#   LOCAL_SLURM_CTLD_PORT=16817       slurmctld port; slurmd ports are NODE_PORT_BASE+i
#   LOCAL_SLURM_NODE_PORT_BASE=17000
#   LOCAL_SLURM_ADD_HOSTS=1           append "127.0.0.1 node1 .. nodeN" to /etc/hosts
#                                     (so MASTER_ADDR=$(scontrol show hostnames ..|head -1) resolves)
#   LOCAL_SLURM_INSTALL=1             apt-get install slurm-wlm munge if missing
#   LOCAL_SLURM_TIMEOUT=60            seconds to wait for all nodes to become idle
set -euo pipefail

DIR=${LOCAL_SLURM_DIR:-${TMPDIR:-/tmp}/local-slurm}
NODES=${LOCAL_SLURM_NODES:-2}
PREFIX=${LOCAL_SLURM_NODE_PREFIX:-node}
CPUS=${LOCAL_SLURM_CPUS_PER_NODE:-4}
GPUS=${LOCAL_SLURM_GPUS_PER_NODE:-2}
MEM=${LOCAL_SLURM_MEM_MB:-$(awk '/^MemTotal:/{print int($2/1024)}' /proc/meminfo)}
PART=${LOCAL_SLURM_PARTITION:-gpu}
CTLD_PORT=${LOCAL_SLURM_CTLD_PORT:-16817}
PORT_BASE=${LOCAL_SLURM_NODE_PORT_BASE:-17000}
ADD_HOSTS=${LOCAL_SLURM_ADD_HOSTS:-1}
INSTALL=${LOCAL_SLURM_INSTALL:-1}
TIMEOUT=${LOCAL_SLURM_TIMEOUT:-60}
HOSTS_MARK="# local-slurm:${DIR}"

log() { printf '[local-slurm %(%T)T] %s\n' -1 "$*" >&2; }
STARTED=0   # set once we may have started daemons: on error, show logs and undo
die() {
  log "ERROR: $*"
  if (( STARTED )); then
    for f in "$DIR"/log/*.log; do [[ -e $f ]] && { echo "--- tail $f" >&2; tail -n 15 "$f" >&2; }; done
    log "cleaning up the partial start (logs kept in $DIR/log)"
    if [[ -x $(dirname "$0")/stop-local-slurm.sh ]]; then
      LOCAL_SLURM_DIR=$DIR "$(dirname "$0")/stop-local-slurm.sh" || true
    else
      for pf in "$DIR"/run/*.pid; do
        p=$(cat "$pf" 2>/dev/null) || continue
        case $(cat "/proc/$p/comm" 2>/dev/null) in munged|slurmctld|slurmd) kill -TERM "$p" ;; esac
      done
    fi
  fi
  exit 1
}

[[ $(id -u) -eq 0 ]] || die "must run as root"
T0=$(date +%s.%N)

# ---------------------------------------------------------------- 1. packages
need_install=0
for f in /usr/sbin/munged /usr/bin/sbatch /usr/bin/srun /usr/bin/scontrol \
         /usr/sbin/slurmctld-wlm /usr/sbin/slurmd-wlm /usr/sbin/slurmstepd-wlm; do
  [[ -x $f ]] || need_install=1
done
if (( need_install )); then
  (( INSTALL )) || die "slurm-wlm/munge not installed and LOCAL_SLURM_INSTALL=0"
  log "installing slurm-wlm + munge via apt-get"
  # Keep the packages' init scripts from starting daemons with the default
  # /etc config (no systemd here): temporary policy-rc.d if none exists.
  tmp_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; tmp_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
  (( tmp_policy )) && rm -f /usr/sbin/policy-rc.d
  log "packages installed ($(dpkg-query -W -f='${Version}' slurmd))"
fi
T1=$(date +%s.%N)

# ------------------------------------------------- 2. refuse double start
if [[ -d $DIR/run ]]; then
  for pf in "$DIR"/run/*.pid; do
    [[ -e $pf ]] || continue
    p=$(cat "$pf" 2>/dev/null || true)
    [[ $p =~ ^[0-9]+$ ]] || continue
    case $(cat "/proc/$p/comm" 2>/dev/null) in
      munged|slurmctld|slurmd)
        die "an instance is already running (pid $p from $pf); run stop-local-slurm.sh first" ;;
    esac
  done
fi

# ------------------------------------------------- 3. fresh directory layout
rm -rf "$DIR"
mkdir -p "$DIR"/{etc,bin,run,log,ctld,fakedev,munge}
chmod 755 "$DIR" "$DIR/munge"          # munged: socket dir must be 755 (x for all, not writable)
NODELIST="${PREFIX}[1-${NODES}]"
(( NODES == 1 )) && NODELIST="${PREFIX}1"
for i in $(seq 1 "$NODES"); do mkdir -p "$DIR/spool/${PREFIX}$i" "$DIR/tmp/${PREFIX}$i"; done
chmod 1777 "$DIR"/tmp/*   # a job's temporary files, like /tmp

# Debian renames the daemons to *-wlm and Slurm decides "am I slurmctld/slurmd/
# slurmstepd?" from basename(argv[0]).  Starting /usr/sbin/slurmctld-wlm directly
# silently drops Gres= from slurm.conf, so run them through links with the real names
# (also immune to slurm-wlm-emulator hijacking the /usr/sbin/slurm* alternatives).
ln -s /usr/sbin/slurmctld-wlm  "$DIR/bin/slurmctld"
ln -s /usr/sbin/slurmd-wlm     "$DIR/bin/slurmd"
ln -s /usr/sbin/slurmstepd-wlm "$DIR/bin/slurmstepd"

# ------------------------------------------------------------- 4. munge
STARTED=1
dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$DIR/munge/munge.key"
MSOCK="$DIR/munge/munge.socket"
setsid /usr/sbin/munged -F --key-file="$DIR/munge/munge.key" --socket="$MSOCK" \
  --pid-file="$DIR/munge/munged.pid" --seed-file="$DIR/munge/munged.seed" \
  --log-file="$DIR/log/munged.log" </dev/null >"$DIR/log/munged.out" 2>&1 &
echo $! > "$DIR/run/munged.pid"
for _ in $(seq 1 100); do
  munge -n -S "$MSOCK" 2>/dev/null | unmunge -S "$MSOCK" >/dev/null 2>&1 && break
  kill -0 "$(cat "$DIR/run/munged.pid")" 2>/dev/null || break
  sleep 0.1
done
munge -n -S "$MSOCK" | unmunge -S "$MSOCK" >/dev/null || die "munged not working, see $DIR/log/munged.*"
log "munged up (pid $(cat "$DIR/run/munged.pid"))"

# ------------------------------------------------------------- 5. config
CONF="$DIR/etc/slurm.conf"
{
cat <<EOF
# generated by start-local-slurm.sh
ClusterName=localslurm
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=${CTLD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${MSOCK}
StateSaveLocation=${DIR}/ctld
SlurmdSpoolDir=${DIR}/spool/%n
# A /tmp per node: srun --mpi=pmix makes its PMIx directory there, named after the job
# step only, so two nodes on one machine would collide in the shared /tmp.
TmpFS=${DIR}/tmp/%n
SlurmctldPidFile=${DIR}/run/slurmctld.daemon.pid
SlurmdPidFile=${DIR}/run/slurmd.%n.daemon.pid
SlurmctldLogFile=${DIR}/log/slurmctld.log
SlurmdLogFile=${DIR}/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# start a job submitted right after another one ended in ~1 s instead of ~3 s
SchedulerParameters=batch_sched_delay=0
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge=600
# node CPUs/memory are taken from this file, not from the (smaller) real hardware
SlurmdParameters=config_overrides
EOF
if (( GPUS > 0 )); then echo "GresTypes=gpu"; fi
for i in $(seq 1 "$NODES"); do
  g=""; (( GPUS > 0 )) && g=" Gres=gpu:${GPUS}"
  echo "NodeName=${PREFIX}$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((PORT_BASE + i)) CPUs=${CPUS} RealMemory=${MEM}${g} State=UNKNOWN"
done
echo "PartitionName=${PART} Nodes=${NODELIST} Default=YES MaxTime=INFINITE State=UP"
} > "$CONF"

if (( GPUS > 0 )); then
  # gres/gpu in 22.05 drops GPUs without File=, and wants char devices: fake them
  # with links to /dev/null -> CUDA_VISIBLE_DEVICES/SLURM_JOB_GPUS get set like on a real node.
  for g in $(seq 0 $((GPUS - 1))); do ln -s /dev/null "$DIR/fakedev/nvidia$g"; done
  last=$((GPUS - 1)); files="$DIR/fakedev/nvidia[0-$last]"; (( GPUS == 1 )) && files="$DIR/fakedev/nvidia0"
  printf 'AutoDetect=off\nNodeName=%s Name=gpu File=%s\n' "$NODELIST" "$files" > "$DIR/etc/gres.conf"
fi
printf 'export SLURM_CONF=%q\n' "$CONF" > "$DIR/env.sh"
export SLURM_CONF="$CONF"

# ------------------------------------------------------------- 6. slurmctld
setsid "$DIR/bin/slurmctld" -D -i -f "$CONF" </dev/null >"$DIR/log/slurmctld.out" 2>&1 &
echo $! > "$DIR/run/slurmctld.pid"
deadline=$(( $(date +%s) + TIMEOUT ))
until timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; do
  kill -0 "$(cat "$DIR/run/slurmctld.pid")" 2>/dev/null || die "slurmctld exited, see $DIR/log/slurmctld.*"
  (( $(date +%s) < deadline )) || die "slurmctld not up after ${TIMEOUT}s, see $DIR/log/slurmctld.*"
  sleep 0.1
done
log "slurmctld up (pid $(cat "$DIR/run/slurmctld.pid"), port $CTLD_PORT)"

# ------------------------------------------------------------- 7. slurmd x N
for i in $(seq 1 "$NODES"); do
  n="${PREFIX}$i"
  setsid "$DIR/bin/slurmd" -D -N "$n" -f "$CONF" -d "$DIR/bin/slurmstepd" \
    </dev/null >"$DIR/log/slurmd.$n.out" 2>&1 &
  echo $! > "$DIR/run/slurmd.$n.pid"
done

# ------------------------------------------------------------- 8. hosts
if (( ADD_HOSTS )); then
  names=$(for i in $(seq 1 "$NODES"); do printf '%s ' "${PREFIX}$i"; done)
  if ! grep -qF "$HOSTS_MARK" /etc/hosts; then
    # append in place (works even when /etc/hosts is a bind mount)
    echo "127.0.0.1 ${names}${HOSTS_MARK}" >> /etc/hosts
  fi
fi

# ------------------------------------------------------------- 9. wait idle
wait_idle() {
  local deadline=$(( $(date +%s) + TIMEOUT )) states nidle i
  while :; do
    # %t of exactly "idle" (not idle*, comp, inval, ...) on every node
    nidle=$(sinfo -h -N -p "$PART" -o '%t' 2>/dev/null | grep -cx idle || true)
    (( nidle == NODES )) && return 0
    for i in $(seq 1 "$NODES"); do
      kill -0 "$(cat "$DIR/run/slurmd.${PREFIX}$i.pid")" 2>/dev/null || die "slurmd ${PREFIX}$i died, see $DIR/log/slurmd.${PREFIX}$i.*"
    done
    if (( $(date +%s) >= deadline )); then
      states=$(sinfo -h -N -o '%N=%t' 2>/dev/null | tr '\n' ' ')
      sinfo -R >&2; die "nodes not idle after ${TIMEOUT}s: $states"
    fi
    sleep 0.2
  done
}
wait_idle
sinfo -N -o '%N %P %t %c %m %G' >&2

# ------------------------------------------------------------- 10. smoke test
# A batch job with one srun task per node: proves munge creds, batch launch, slurmstepd
# and step I/O all work.  It also absorbs the ~3 s that slurmctld waits before its first
# scheduling pass (SchedulerParameters are only applied from that pass on), so later
# jobs start within ~1 s of submission.
if (( ${LOCAL_SLURM_SMOKE:-1} )); then
  # shellcheck disable=SC2016  # $SLURM_PROCID is for the job's shell to expand
  sj=$(sbatch --parsable -N "$NODES" --ntasks-per-node=1 -t 1 -J smoke -o "$DIR/log/smoke-%j.out" \
        --wrap 'srun bash -c "echo \$SLURM_PROCID/\$SLURMD_NODENAME"') || die "smoke sbatch failed"
  deadline=$(( $(date +%s) + TIMEOUT ))
  while :; do
    st=$(scontrol show job "$sj" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case $st in
      COMPLETED) break ;;
      FAILED|CANCELLED|TIMEOUT|NODE_FAIL|BOOT_FAIL|OUT_OF_MEMORY|DEADLINE)
        cat "$DIR/log/smoke-$sj.out" >&2; die "smoke job $sj ended $st" ;;
    esac
    (( $(date +%s) < deadline )) || die "smoke job $sj still '$st' after ${TIMEOUT}s"
    sleep 0.1
  done
  log "smoke job ok: $(sort "$DIR/log/smoke-$sj.out" | tr '\n' ' ')"
  wait_idle   # let the nodes leave COMPLETING so the first real job starts at once
fi
T2=$(date +%s.%N)
log "ready: $NODES nodes idle in partition '$PART'; $(awk -v a="$T0" -v b="$T1" -v c="$T2" 'BEGIN{printf "install %.1fs, start %.1fs", b-a, c-b}')"
log "use:  source $DIR/env.sh   (SLURM_CONF=$CONF)"
