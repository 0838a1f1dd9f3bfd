# follow.sh — stream the server's log from launch until the server exits, and remember its children the moment
# its ready line is written (POSIX sh; lib.sh is prepended). One exec session for the whole life of a server:
# readiness, the crash watch while sampling and the log text itself, with no poll and no second round trip.
#
# usage: sh -c "$(cat lib.sh follow.sh)" sh WORKDIR LOG PID START_TICKS OFFSET READY_TEXT [PYTHON]
# stdout: the PID of the tail (a line: `kill` it to end the follow early), then the log's bytes from byte
#   OFFSET, verbatim, as they are written (`tail -f`: the open file, so a log deleted or renamed on the host
#   while the server writes to it is still followed). The stream ends by itself once the server is gone: a
#   watcher reads /proc/PID/stat every 0.1 s (no fork) and, when PID has exited, waits for the rest of its
#   process group to go (live members, not zombies; at most 2 s: the schedulers may still write their last lines), gives tail 0.1 s to
#   pass on the last bytes and stops it. The first line holding READY_TEXT is passed on only after the children
#   are recorded, so a client that saw the ready line can rely on WORKDIR/server.children.
# stderr: after the ready line, children.sh's report ("child PID START" lines, then "result ok" or
#   "result gone"/"result error ..."), each line prefixed "children ".
# Before the ready line the log is read a pipe's worth at a time by PYTHON (the server's; it was line by line,
# and the shell reads a pipe one byte at a time: a 20 MB line without a newline took minutes), or line by line
# without PYTHON; after it, `cat` copies blocks.
set -u
need awk cat ls mv rm sh sleep tail
wd=$1 log=$2 pid=$3 start=$4 off=$5 ready=$6 py=${7:-}
# the reader before the ready line: copies stdin to stdout a read at a time; at the read that holds the ready
# text (which may straddle two reads) it writes that read to argv[2] instead and exits 3; 0 at the end of stdin
reader='import os, sys
ready, held = sys.argv[1].encode(), sys.argv[2]
carry = b""
while True:
    data = os.read(0, 1 << 20)
    if not data:
        sys.exit(0)
    if ready in carry + data:
        fd = os.open(held, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        while data:
            data = data[os.write(fd, data):]
        os.close(fd)
        sys.exit(3)
    out = data
    while out:
        out = out[os.write(1, out):]
    carry = data[-len(ready):]'
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
  # before the ready line: read by the host's python when it is given (a pipe's worth at a time, 1 MiB at most;
  # it exits 3 at the read that holds the ready text, leaving that read in $held and the rest unread in the pipe),
  # else line by line (the shell reads a pipe one byte at a time: ~70 KB/s on a long line)
  held="$wd/.follow-held.$$"
  if [ -n "$py" ] && pyexe=$(find_exe "$py"); then
    rm -f "$held"
    "$pyexe" -I -c "$reader" "$ready" "$held"
    case $? in
      0) exit 0 ;;  # the tail ended before the ready line (the server is gone, or it was stopped)
      3) record_children "$wd" "$pid" "$start" "children " >&2
         cat "$held"; rm -f "$held"
         exec cat ;;
    esac
    rm -f "$held"  # the reader could not run: on line by line from where it stopped
  fi
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
