# slurm_stop.sh — stop one server job of ours: SIGTERM to its server step, the drain, SIGKILL, then the job
# (POSIX sh). The caller checked first that JOB is ours (remote/slurm.py, check_ours: the record, the job's
# name, comment and user); this script signals JOB and nothing else.
#
# usage: sh -c "$(cat lib.sh slurm_stop.sh)" sh SLURM_CONF JOB DRAIN_CS GONE_CS ENV_FILE
#   DRAIN_CS: centiseconds the server step gets after SIGTERM (SGLang drains its requests) before SIGKILL;
#   GONE_CS: centiseconds the job then gets to leave the queue after `scancel JOB`;
#   ENV_FILE: the environment file the launch left (removed: a job cancelled while pending never read it).
# stdout: "term" when SIGTERM went to the step, "drained_cs N" (centiseconds until the step was gone, or the
#   bound), "kill" when SIGKILL went to the step, "cancel" after scancel of the job, "gone_cs N", the job's end
#   record ("end " + `scontrol show job -o`, or "sacct " + sacct's line where the controller forgot it), last
#   "result ok" or "result still-listed"; parsed by mtp_remote/remote/slurm.py (parse_stop).
set -u
conf=$1 job=$2 drain=$3 gone=$4 envf=$5
[ -n "$conf" ] && export SLURM_CONF="$conf"
rm -f "$envf"
step_listed() { squeue -h -s -j "$job" -o %i 2>/dev/null | grep -qx "$job.0"; }
job_listed() { [ -n "$(squeue -h -j "$job" -o %T 2>/dev/null)" ]; }
t0=$(up)
if step_listed; then
  scancel --signal=TERM "$job.0" 2>/dev/null && say "term"
  while step_listed && [ $(( $(up) - t0 )) -lt "$drain" ]; do nap 0.2; done
  say "drained_cs $(( $(up) - t0 ))"
  if step_listed; then scancel --signal=KILL "$job.0" 2>/dev/null && say "kill"; fi
fi
if job_listed; then scancel "$job" 2>/dev/null && say "cancel"; fi
t1=$(up)
while job_listed && [ $(( $(up) - t1 )) -lt "$gone" ]; do nap 0.2; done
say "gone_cs $(( $(up) - t1 ))"
end=$(scontrol show job -o "$job" 2>/dev/null | head -n 1)
if [ -n "$end" ]; then
  say "end $end"
else
  say "sacct $(sacct -j "$job" -X -n -P -o JobID,JobName,User,State,ExitCode,NodeList 2>/dev/null | head -n 1)"
fi
if job_listed; then say "result still-listed"; else say "result ok"; fi
