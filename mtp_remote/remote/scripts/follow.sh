# follow.sh — stream the server's log from launch until the server exits, and remember its children the moment
# its ready line is written (POSIX sh; lib.sh is prepended). One exec session for the whole life of a server:
# readiness, the crash watch while sampling and the log text itself, with no poll and no second round trip.
#
# usage: sh -c "$(cat lib.sh follow.sh)" sh WORKDIR LOG PID START_TICKS OFFSET READY_TEXT
# stdout: the PID of the tail (a line: `kill` it to end the follow early), then the log's bytes from byte
#   OFFSET, verbatim, as they are written (`tail -f`: the open file, so a log deleted or renamed on the host
#   while the server writes to it is still followed). The stream ends by itself once the server is gone: a
#   watcher reads /proc/PID/stat every 0.1 s (no fork) and, when PID has exited, waits for the rest of its
#   process group to go (live members, not zombies; at most 2 s: the schedulers may still write their last lines), gives tail 0.1 s to
#   pass on the last bytes and stops it. The first line holding READY_TEXT is passed on only after the children
#   are recorded, so a client that saw the ready line can rely on WORKDIR/server.children.
# stderr: after the ready line, children.sh's report ("child PID START" lines, then "result ok" or
#   "result gone"/"result error ..."), each line prefixed "children ".
# Before the ready line the log is read line by line (the shell reads a pipe one byte at a time: a startup log
# is tens of KB); after it, `cat` copies blocks.
set -u
need awk cat ls mv rm sh sleep tail
wd=$1 log=$2 pid=$3 start=$4 off=$5 ready=$6
me=$$
lives() {  # PID -> 0 while it runs (not a zombie); one read of /proc/PID/stat, no fork
  { IFS= read -r _st < "/proc/$1/stat"; } 2>/dev/null || return 1
  case ${_st##*) } in Z*|X*) return 1 ;; esac
}
ours() {  # PID -> 0 when it is a live child of this script (the tail we started)
  { IFS= read -r _st < "/proc/$1/stat"; } 2>/dev/null || return 1
  set -- ${_st##*) }
  [ "$2" = "$me" ]
}
watch_server() {  # stop the tail TPID once the server and (within 2 s) its process group are gone
  while lives "$pid" && ours "$1"; do nap 0.1; done
  n=0
  while [ $n -lt 20 ] && [ -n "$(group_members "$pid")" ] && ours "$1"; do nap 0.1; n=$((n + 1)); done
  nap 0.1
  ours "$1" && kill "$1" 2>/dev/null
}
while [ ! -e "$log" ] && lives "$pid"; do nap 0.05; done  # -f opens the file once: wait until it exists
sh -c 'echo $$; exec tail -s 0.1 -c "+$1" -f "$2" 2>/dev/null' sh $((off + 1)) "$log" | {
  IFS= read -r tpid || exit 0
  say "$tpid"
  watch_server "$tpid" > /dev/null 2>&1 &
  while IFS= read -r line; do
    case $line in *"$ready"*)
      record_children "$wd" "$pid" "$start" "children " >&2
      printf '%s\n' "$line"
      exec cat ;;
    esac
    printf '%s\n' "$line"
  done
  [ -z "$line" ] || printf '%s' "$line"
}
