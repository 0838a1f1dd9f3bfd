# signal.sh — `stop --force`: SIGTERM the listed foreign processes by PID, wait, SIGKILL the survivors, in one
# host-side step (POSIX sh; lib.sh is prepended).
#
# usage: sh -c "$(cat lib.sh signal.sh)" sh TERM_S KILL_S PID START [PID START ...]
# START: the PID's start time in clock ticks after boot, as listed moments before, or "-" when it could not be
# read. A PID is signalled only while it lives (not a zombie) with that start time: one that exited and whose
# number was reused since the listing is left alone. stdout: "signal TERM PID" / "signal KILL PID" lines,
# "skipped PID" for a reused or vanished PID, "progress TEXT", last "survivors PIDS" and "result ok".
set -u
need cat sleep
term_s=$1 kill_s=$2
shift 2
left() { pairs_left "$targets"; }  # the listed PIDs still alive with their start time
targets=""
while [ $# -ge 2 ]; do
  if same_start "$1" "$2"; then kill -TERM "$1" 2>/dev/null && say "signal TERM $1"; targets="$targets $1 $2"
  else say "skipped $1"; fi
  shift 2
done
end=$(( $(up) + term_s * 100 ))
while [ -n "$(left)" ] && [ "$(up)" -lt "$end" ]; do nap 0.05; done
rest=$(left)
if [ -n "$rest" ]; then
  set -- $rest
  say "progress PIDs still alive after $term_s s; SIGKILL"
  while [ $# -ge 2 ]; do kill -KILL "$1" 2>/dev/null && say "signal KILL $1"; shift 2; done
  targets=$rest
  end=$(( $(up) + kill_s * 100 ))
  while [ -n "$(left)" ] && [ "$(up)" -lt "$end" ]; do nap 0.05; done
fi
surv=""
set -- $(left)
while [ $# -ge 2 ]; do surv="$surv $1"; shift 2; done
say "survivors$surv"
say "result ok"
