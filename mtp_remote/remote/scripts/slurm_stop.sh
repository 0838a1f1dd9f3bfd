# slurm_stop.sh — stop one server job of ours: SIGTERM to its server step, the drain, SIGKILL, then the job
# (POSIX sh). The caller checked first that JOB is ours (remote/slurm.py, check_ours: the record, the job's
# name, comment and user); this script signals JOB and nothing else.
#
# usage: sh -c "$(cat lib.sh slurm_stop.sh)" sh SLURM_CONF JOB DRAIN_CS GONE_CS ENV_FILE STEP WHOLE_JOB
#   JOB: the job as squeue and scancel must name it (J, or A_I for a task of an array: an array's own id names
#   every task of it);
#   DRAIN_CS: centiseconds the server step gets after SIGTERM (SGLang drains its requests) before SIGKILL;
#   GONE_CS: centiseconds the job then gets to leave the queue after `scancel JOB`;
#   ENV_FILE: the environment file the launch left (removed: a job cancelled while pending never read it);
#   STEP: the server's step (0: the job's only step); WHOLE_JOB: 1 to scancel the job after its step (a server
#   job), 0 to leave the job (a step of an allocation we run in: the nightly's array task).
# stdout: "term" when SIGTERM went to the step, "drained_cs N" (centiseconds until the step was gone, or the
#   bound), "kill" when SIGKILL went to the step, "cancel" after scancel of the job, "gone_cs N", the job's end
#   record ("end " + `scontrol show job -o`, or "sacct " + sacct's line where the controller forgot it), last
#   "result ok" or "result still-listed"; parsed by mtp_remote/remote/slurm.py (parse_stop).
set -u
conf=$1 job=$2 drain=$3 gone=$4 envf=$5 step=$6 whole=$7
[ -n "$conf" ] && export SLURM_CONF="$conf"
rm -f "$envf"
step_listed() { squeue -h -s -j "$job" -o %i 2>/dev/null | grep -qx "$job.$step"; }
job_listed() { [ -n "$(squeue -h -j "$job" -o %T 2>/dev/null)" ]; }
t0=$(up)
if step_listed; then
  scancel --signal=TERM "$job.$step" 2>/dev/null && say "term"
  while step_listed && [ $(( $(up) - t0 )) -lt "$drain" ]; do nap 0.2; done
  say "drained_cs $(( $(up) - t0 ))"
  if step_listed; then scancel --signal=KILL "$job.$step" 2>/dev/null && say "kill"; fi
fi
t1=$(up)
if [ "$whole" = 1 ]; then
  if job_listed; then scancel "$job" 2>/dev/null && say "cancel"; fi
  while job_listed && [ $(( $(up) - t1 )) -lt "$gone" ]; do nap 0.2; done
else
  while step_listed && [ $(( $(up) - t1 )) -lt "$gone" ]; do nap 0.2; done
fi
say "gone_cs $(( $(up) - t1 ))"
end=$(scontrol show job -o "$job" 2>/dev/null | head -n 1)
if [ -n "$end" ]; then
  say "end $end"
else
  say "sacct $(sacct -j "$job" -X -n -P -o JobID,JobName,User,State,ExitCode,NodeList 2>/dev/null | head -n 1)"
fi
left=0
if [ "$whole" = 1 ]; then job_listed && left=1; else step_listed && left=1; fi
if [ $left = 1 ]; then say "result still-listed"; else say "result ok"; fi
