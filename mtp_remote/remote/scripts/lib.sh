# lib.sh — helpers shared by the host-side scripts (prepended to each script by scripts.py). POSIX sh.
say() { printf '%s\n' "$*"; }
up() { read -r u _ < /proc/uptime; u=${u%.*}${u#*.}; echo "${u#0}"; }  # centiseconds since boot
nap() { sleep "$1" 2>/dev/null || sleep 1; }
stat_fields() {  # PID -> "state ppid pgid sid start" from /proc/PID/stat (fields after the last ')')
  _s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  set -- ${_s##*) }
  [ $# -ge 20 ] || return 1
  echo "$1 $2 $3 $4 ${20}"
}
alive_start() {  # PID -> its start time if it lives (not a zombie), else fails
  _f=$(stat_fields "$1") || return 1
  set -- $_f
  case $1 in Z|X) return 1 ;; esac
  echo "$5"
}
all_stats() { cat /proc/[0-9]*/stat 2>/dev/null; }
group_members() {  # PGID -> PIDs of live members of that process group
  all_stats | awk -v g="$1" '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " ");
    if (f[3] == g && f[1] != "Z" && f[1] != "X") printf "%s ", $1 }'
}
descendants() {  # PID -> "pid start" lines of its live descendants, whatever their group
  all_stats | awk -v root="$1" '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " ");
      if (f[1] != "Z" && f[1] != "X") { ppid[$1] = f[2]; start[$1] = f[20] } }
    END { n = 0; q[n++] = root; for (i = 0; i < n; i++) for (p in ppid) if (ppid[p] == q[i]) { q[n++] = p; print p, start[p] } }'
}
caller_groups() {  # " pgid sid pgid sid ... " of this shell and all its ancestors: groups that hold the caller
  _p=$$ _out=" "
  while [ "${_p:-0}" -gt 1 ]; do
    _f=$(stat_fields "$_p") || break
    set -- $_f
    _out="$_out$3 $4 "
    _p=$2
  done
  echo "$_out"
}
