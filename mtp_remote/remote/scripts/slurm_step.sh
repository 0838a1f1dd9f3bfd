# slurm_step.sh — start the server as a step of the allocation this runs in (the nightly's array task), detached,
# and find the step's id (POSIX sh; lib.sh is prepended).
#
# usage: sh -c "$(cat lib.sh slurm_step.sh)" sh WORKDIR ENV_FILE SLURM_CONF JOB SPEC STEP_NAME LOG WAIT_CS LOADER PY MODULE [ARG...]
#   JOB: the allocation's job id (srun --jobid); SPEC: the allocation as squeue names it (A_I in an array).
# stdin: the server's environment as one JSON object, kept in the 0600 ENV_FILE that LOADER (python: read it,
#   remove it, set the variables, exec the server in place) reads as the step's first image.
# The step: `srun --jobid JOB --overlap --ntasks=1 --job-name STEP_NAME --output LOG PY -c LOADER ENV_FILE PY -m
#   MODULE ARG...`, its srun client detached (setsid nohup, one simple background command). Then up to WAIT_CS
#   centiseconds until squeue lists a step of SPEC named STEP_NAME.
# stdout: "step N" once listed, last "result ok|no-workdir|not-private|cannot-write-workdir|srun-exited|not-listed"
#   (after srun-exited: the log's last lines between "log-tail-begin" and "log-tail-end").
set -uf
wd=$1 envf=$2 conf=$3 job=$4 spec=$5 name=$6 log=$7 wait_cs=$8 loader=$9 py=${10} mod=${11}
shift 11
[ -n "$conf" ] && export SLURM_CONF="$conf"
umask 077
cd "$wd" 2>/dev/null || { say "result no-workdir"; exit 0; }
private_dir "$wd" || { say "result not-private"; exit 0; }
rm -f "$envf"
( set -C; cat > "$envf" ) 2>/dev/null || { say "result cannot-write-workdir"; exit 0; }
( exec setsid nohup srun --jobid="$job" --overlap --ntasks=1 --job-name="$name" --output="$log" \
    "$py" -c "$loader" "$envf" "$py" -m "$mod" "$@" < /dev/null > /dev/null 2>&1 ) &
srun_pid=$!
t0=$(up)
while :; do
  step=$(squeue -h -s -j "$spec" -o '%i|%j' 2>/dev/null | awk -F'|' -v n="$name" '$2 == n { sub(/^.*\./, "", $1); print $1; exit }')
  [ -n "$step" ] && { say "step $step"; say "result ok"; exit 0; }
  if ! alive_start "$srun_pid" > /dev/null; then
    rm -f "$envf"
    say "log-tail-begin"; tail -n 30 "$log" 2>/dev/null; say ""; say "log-tail-end"
    say "result srun-exited"; exit 0
  fi
  [ $(( $(up) - t0 )) -ge "$wait_cs" ] && { say "result not-listed"; exit 0; }
  nap 0.1
done
