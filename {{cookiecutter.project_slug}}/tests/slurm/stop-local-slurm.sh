#!/usr/bin/env bash
# shellcheck disable=SC2086  # lists of job ids and pids are split into words on purpose
# stop-local-slurm.sh - stop what start-local-slurm.sh started, by PID only.
#   1. scancel all jobs and wait for them to leave the queue
#   2. SIGTERM slurmd(s), then slurmctld, then munged (SIGKILL after a grace period)
#   3. SIGKILL stray slurmstepd processes of THIS instance (identified by an open fd
#      on this instance's log directory), if any survived
#   4. remove our /etc/hosts line
# Usage: stop-local-slurm.sh [--purge]    (--purge also deletes $LOCAL_SLURM_DIR)
set -uo pipefail
DIR=${LOCAL_SLURM_DIR:-${TMPDIR:-/tmp}/local-slurm}
HOSTS_MARK="# local-slurm:${DIR}"
PURGE=0; [[ ${1:-} == --purge ]] && PURGE=1
log() { printf '[local-slurm %(%T)T] %s\n' -1 "$*" >&2; }

[[ -d $DIR/run ]] || { log "nothing to stop in $DIR"; exit 0; }
export SLURM_CONF="$DIR/etc/slurm.conf"

# live pids, read from pid files (ours and the daemons' own), that still run the expected program
pid_of() {  # $1=expected comm, rest = pid files
  local want=$1 f p; shift
  for f in "$@"; do
    p=$(cat "$f" 2>/dev/null) || continue
    [[ $p =~ ^[0-9]+$ && -r /proc/$p/comm ]] || continue
    [[ $(cat "/proc/$p/comm") == "$want" ]] && echo "$p"
  done | sort -u
}
stop_pids() {  # $1=grace seconds, rest = pids
  local grace=$1; shift; local p alive t
  (( $# )) || return 0
  kill -TERM "$@" 2>/dev/null
  for ((t = 0; t < grace * 10; t++)); do
    alive=0; for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    (( alive )) || return 0
    sleep 0.1
  done
  for p in "$@"; do kill -0 "$p" 2>/dev/null && { log "SIGKILL $p"; kill -KILL "$p" 2>/dev/null; }; done
  return 0
}

# 1. jobs
ctld=$(pid_of slurmctld "$DIR/run/slurmctld.pid" "$DIR/run/slurmctld.daemon.pid")
if [[ -n $ctld ]] && scontrol ping 2>/dev/null | grep -q 'is UP'; then
  jobs=$(squeue -h -o %A 2>/dev/null | tr '\n' ' ')
  if [[ -n ${jobs// } ]]; then
    log "cancelling jobs: $jobs"
    scancel $jobs 2>/dev/null
    for _ in $(seq 1 100); do [[ -z $(squeue -h -o %A 2>/dev/null) ]] && break; sleep 0.2; done
  fi
fi

# 2. daemons: slurmd first (while slurmctld is still up: avoids their 10 s re-register loop)
mapfile -t slurmds < <(pid_of slurmd "$DIR"/run/slurmd.*.pid)
log "stopping slurmd: ${slurmds[*]:-none}"
stop_pids 15 "${slurmds[@]}"
log "stopping slurmctld: ${ctld:-none}"
[[ -n $ctld ]] && stop_pids 15 $ctld   # its child slurmscriptd exits with it

# 3. stray step daemons of this instance (only left if a slurmd died with jobs on it).
#    They are re-parented to init and keep fd 3 open on our slurmd log; kill each one
#    together with its whole process tree (the job's processes).
descendants() {  # all descendant pids of the given pids (from /proc/*/stat, no ps needed)
  local map d st rest pp out=() frontier=("$@") next p c
  map=$(for d in /proc/[0-9]*; do
          st=$(cat "$d/stat" 2>/dev/null) || continue
          rest=${st##*) }; read -r _ pp _ <<<"$rest"; echo "${d#/proc/} $pp"
        done)
  while (( ${#frontier[@]} )); do
    next=()
    for p in "${frontier[@]}"; do
      while read -r c pp; do [[ $pp == "$p" ]] && next+=("$c"); done <<<"$map"
    done
    out+=("${next[@]}"); frontier=("${next[@]}")
  done
  echo "${out[@]}"
}
strays=()
for d in /proc/[0-9]*; do
  [[ $(cat "$d/comm" 2>/dev/null) == slurmstepd ]] || continue
  # shellcheck disable=SC2010  # ls -l shows where each fd points, in one call
  if ls -l "$d/fd" 2>/dev/null | grep -qF -- "-> $DIR/log/"; then strays+=("${d#/proc/}"); fi
done
if (( ${#strays[@]} )); then
  tree=$(descendants "${strays[@]}")
  log "killing stray slurmstepd ${strays[*]} and their processes ${tree}"
  kill -KILL "${strays[@]}" $tree 2>/dev/null
fi

m=$(pid_of munged "$DIR/run/munged.pid" "$DIR/munge/munged.pid")
log "stopping munged: ${m:-none}"
[[ -n $m ]] && stop_pids 10 $m
rm -f "$DIR"/run/*.pid

# 4. host entries
if grep -qF "$HOSTS_MARK" /etc/hosts 2>/dev/null; then
  tmp=$(mktemp); grep -vF "$HOSTS_MARK" /etc/hosts > "$tmp"; cat "$tmp" > /etc/hosts; rm -f "$tmp"
fi
(( PURGE )) && rm -rf "$DIR"
log "stopped"
