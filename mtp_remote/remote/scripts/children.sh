# children.sh — remember the server's descendants (PID and start time) once it is ready (POSIX sh; lib.sh
# is prepended): a scheduler that later leaves the process group is still ours and must not outlive a stop.
#
# usage: sh -c "$(cat lib.sh children.sh)" sh WORKDIR PID START_TICKS
# Writes WORKDIR/server.children ("pid start_ticks" lines, atomically) only while PID is still the recorded
# leader. stdout: "child PID START" lines, then "result ok" or "result gone".
set -u
need awk cat ls mv rm
record_children "$1" "$2" "$3"
