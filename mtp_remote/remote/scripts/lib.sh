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
same_start() {  # PID START -> 0 while PID lives (not a zombie) with that start time ("-": any start time)
  _s=$(alive_start "$1") || return 1
  [ "$2" = "-" ] || [ "$_s" = "$2" ]
}
pairs_left() {  # "PID START ..." -> the pairs whose PID still lives with that start time, same format
  set -- $1
  while [ $# -ge 2 ]; do same_start "$1" "$2" && printf '%s %s ' "$1" "$2"; shift 2; done
}
cmdline_ours() {  # PID SHA -> 0 when PID's command line hashes to SHA (the server we started, or a fork of it)
  # or is an SGLang process title (sglang::scheduler_TP0, sglang::detokenizer: what its children set)
  _h=$(sha256sum < "/proc/$1/cmdline" 2>/dev/null) || return 1
  [ "$2" != "-" ] && [ "${_h%% *}" = "$2" ] && return 0
  case $(head -c 8 "/proc/$1/cmdline" 2>/dev/null | tr -d '\000') in "sglang::") return 0 ;; esac
  return 1
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
record_children() {  # WD PID START [PREFIX] -> while PID lives with START, write WD/server.children (the "pid start"
  # lines of its live descendants, atomically); say "PREFIXchild PID START" lines, then "PREFIXresult ok",
  # "PREFIXresult gone" or "PREFIXresult error TEXT" (children.sh, and follow.sh at the ready line)
  _pre=${4:-}
  _s=$(alive_start "$2") && [ "$_s" = "$3" ] || { say "${_pre}result gone"; return 0; }
  _kids=$(descendants "$2")
  printf '%s\n' "$_kids" | while read -r _p _t; do [ -n "$_p" ] && say "${_pre}child $_p $_t"; done
  private_dir "$1" || { say "${_pre}result error $1 is not a directory of ours"; return 0; }
  ( umask 077; set -C; rm -f "$1/server.children.tmp.$$"
    printf '%s\n' "$_kids" > "$1/server.children.tmp.$$" && mv -f "$1/server.children.tmp.$$" "$1/server.children" ) 2>/dev/null \
    || { rm -f "$1/server.children.tmp.$$"; say "${_pre}result error cannot write $1/server.children"; return 0; }
  say "${_pre}result ok"
}
private_dir() {  # DIR -> 0 when DIR is a directory, not a symlink, owned by us, that no one else may write
  [ -d "$1" ] && [ ! -L "$1" ] && [ -O "$1" ] || return 1
  case $(ls -ld "$1" 2>/dev/null) in ?????w*|????????w*) return 1 ;; esac
}
workdir_of() {  # CONFIGURED -> the directory we work in: CONFIGURED when it is private (private_dir), else (a
  # shared directory: mode 1777, another user's, group-writable) our own subdirectory CONFIGURED/uid-UID
  case $1 in "~") _w=$HOME ;; "~/"*) _w=$HOME/${1#"~/"} ;; *) _w=$1 ;; esac
  [ -L "$_w" ] && [ -d "$_w" ] && _w=$(cd -P "$_w" && pwd)
  if [ ! -e "$_w" ] || private_dir "$_w"; then echo "$_w"; else echo "$_w/uid-$(id -u)"; fi
}
find_exe() {  # NAME -> the program NAME runs, as an absolute path: NAME itself when it holds a "/" (relative to
  # the current directory), else the first executable NAME in PATH's absolute entries — an empty or relative entry
  # (".", "") is skipped, so the directory we stand in is never searched; fails when there is none
  case $1 in
    */*) [ -f "$1" ] && [ -x "$1" ] || return 1
         case $1 in /*) echo "$1" ;; *) echo "$(pwd -P)/$1" ;; esac; return 0 ;;
  esac
  _rest=${PATH:-/usr/bin:/bin}:
  while [ -n "$_rest" ]; do
    _d=${_rest%%:*} _rest=${_rest#*:}
    case $_d in /*) [ -f "$_d/$1" ] && [ -x "$_d/$1" ] && { echo "$_d/$1"; return 0; } ;; esac
  done
  return 1
}
owned() {  # FILE -> 0 when FILE is a regular file, not a symlink, owned by us (a record we may trust)
  [ -f "$1" ] && [ ! -L "$1" ] && [ -O "$1" ]
}
