# slurm_launch.sh — submit one server job with sbatch, its environment handed over in a 0600 file (POSIX sh).
#
# usage: sh -c "$(cat lib.sh slurm_launch.sh)" sh WORKDIR ENV_FILE SLURM_CONF
# stdin: line 1 = the server's environment as one JSON object (the job's loader reads it, removes it, sets the
#        variables and execs the server: see remote/slurm.py, ENV_LOADER); the rest = the batch script, which
#        sbatch reads from its standard input. SLURM_CONF "" = the login node's default cluster; ENV_FILE "" =
#        no environment to hand over (line 1 is then read and dropped).
# stdout: "user NAME" (who submits: the job's owner), "job ID" when sbatch accepted it, sbatch's messages
#   between "sbatch-begin" and "sbatch-end", last "result ok|no-workdir|not-private|cannot-write-workdir|
#   sbatch-failed"; parsed by mtp_remote/remote/slurm.py (parse_submit). lib.sh is prepended.
set -uf
wd=$1 envf=$2 conf=$3
[ -n "$conf" ] && export SLURM_CONF="$conf"
umask 077
cd "$wd" 2>/dev/null || { say "result no-workdir"; exit 0; }
private_dir "$wd" || { say "result not-private"; exit 0; }
say "user $(id -un)"
IFS= read -r envjson || envjson="{}"
if [ -n "$envf" ]; then
  rm -f "$envf"
  ( set -C; printf '%s\n' "$envjson" > "$envf" ) 2>/dev/null || { say "result cannot-write-workdir"; exit 0; }
fi
errf="$wd/.sbatch-err.$$"
rm -f "$errf"
out=$(sbatch --parsable 2> "$errf")  # the rest of stdin is the batch script
rc=$?
job=$(printf '%s\n' "$out" | tail -n 1)
job=${job%%;*}
say "sbatch-begin"; cat "$errf" 2>/dev/null; say "sbatch-end"
rm -f "$errf"
case $job in
  ''|*[!0-9]*) [ -z "$envf" ] || rm -f "$envf"; say "result sbatch-failed"; exit 0 ;;
esac
[ $rc -eq 0 ] || { [ -z "$envf" ] || rm -f "$envf"; say "result sbatch-failed"; exit 0; }
say "job $job"
say "result ok"
