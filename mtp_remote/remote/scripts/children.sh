# children.sh — remember the server's descendants (PID and start time) once it is ready (POSIX sh; lib.sh
# is prepended): a scheduler that later leaves the process group is still ours and must not outlive a stop.
#
# usage: sh -c "$(cat lib.sh children.sh)" sh WORKDIR PID START_TICKS
# Writes WORKDIR/server.children ("pid start_ticks" lines, atomically) only while PID is still the recorded
# leader. stdout: "child PID START" lines, then "result ok" or "result gone".
set -u
wd=$1 pid=$2 start=$3
umask 077
s=$(alive_start "$pid") && [ "$s" = "$start" ] || { say "result gone"; exit 0; }
kids=$(descendants "$pid")
printf '%s\n' "$kids" | while read -r p t; do [ -n "$p" ] && say "child $p $t"; done
{ printf '%s\n' "$kids" > "$wd/server.children.tmp.$$" && mv -f "$wd/server.children.tmp.$$" "$wd/server.children"; } 2>/dev/null \
  || { rm -f "$wd/server.children.tmp.$$"; say "result error cannot write $wd/server.children"; exit 0; }
say "result ok"
