# lib.sh — helpers shared by the host-side scripts (prepended to each script by scripts.py). POSIX sh.
say() { printf '%s\n' "$*"; }
need() {  # TOOL... -> exit 2 saying "lacks TOOL" when the host has no TOOL. Each script checks its tools first: a
  # stop that ran without awk saw no process, said "stopped" and dropped the record of a server still running.
  for _t in "$@"; do
    command -v "$_t" >/dev/null 2>&1 || { say "lacks $_t"; say "result error the host lacks $_t"; exit 2; }
  done
}
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
cmdline_ours() {  # PID SHA -> 0 when PID runs as us and its command line hashes to SHA (the server we started, or
  # a fork of it) or is an SGLang process title (sglang::scheduler_TP0, sglang::detokenizer: what its children
  # set) — another user's process is never ours, whatever its title
  [ -O "/proc/$1" ] || return 1
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
  held_dir "$1" || { say "${_pre}result error $1 is not a directory of ours"; return 0; }
  ( umask 077; set -C; rm -f "$1/server.children.tmp.$$"
    printf '%s\n' "$_kids" > "$1/server.children.tmp.$$" && mv -f "$1/server.children.tmp.$$" "$1/server.children" ) 2>/dev/null \
    || { rm -f "$1/server.children.tmp.$$"; say "${_pre}result error cannot write $1/server.children"; return 0; }
  say "${_pre}result ok"
}
private_dir() {  # DIR -> 0 when DIR is a directory, not a symlink, owned by us, that no one else may write
  [ -d "$1" ] && [ ! -L "$1" ] && [ -O "$1" ] || return 1
  case $(ls -ld "$1" 2>/dev/null) in ?????w*|????????w*) return 1 ;; esac
}
entry_trusted() {  # PATH -> 0 when only root and we can change what PATH is: a symlink owned by root or us, or a
  # directory owned by root or us that no one else may write, or only with the sticky bit (then no one else may
  # rename, remove or replace an entry of ours in it: mode 1777 /tmp)
  _e=$(ls -ldn "$1" 2>/dev/null) || return 1
  set -- $_e
  [ "$3" = 0 ] || [ "$3" = "$(id -u)" ] || return 1
  case $1 in l*) return 0 ;; d*) ;; *) return 1 ;; esac
  case $1 in ?????w*|????????w*) case $1 in ?????????[tT]*) ;; *) return 1 ;; esac ;; esac
}
untrusted_prefix() {  # ABSPATH -> says the first existing prefix of ABSPATH ("/", "/a", "/a/b", ... ABSPATH
  # itself) that another user could rename or replace (entry_trusted fails), with its mode and owner, and
  # succeeds; fails, saying nothing, when there is none. A symlink on the way (of root's or ours) is followed:
  # the prefixes of where it leads (its physical path) are checked too.
  _rest=${1#/} _p="" _last=/ _link=0
  entry_trusted / || { say "/"; return 0; }
  while [ -n "$_rest" ]; do
    _c=${_rest%%/*}; case $_rest in */*) _rest=${_rest#*/} ;; *) _rest="" ;; esac
    [ -n "$_c" ] || continue
    _p=$_p/$_c
    [ -e "$_p" ] || [ -L "$_p" ] || break
    entry_trusted "$_p" || { say "$_p ($(ls -ldn "$_p" 2>/dev/null | awk '{print "mode " $1 ", owner uid " $3}'))"; return 0; }
    [ -L "$_p" ] && _link=1
    [ -d "$_p" ] && _last=$_p
  done
  [ $_link = 1 ] || return 1
  _phys=$(cd -P "$_last" 2>/dev/null && pwd -P) || { say "$_last (cannot be resolved)"; return 0; }
  [ "$_phys" = "$_last" ] && return 1
  untrusted_prefix "$_phys"
}
held_dir() {  # DIR -> 0 when DIR is private_dir and no one but root and us can rename or replace it or any
  # directory above it (untrusted_prefix finds none): what we check we then use, no other user can swap it between
  private_dir "$1" && ! untrusted_prefix "${1%/*}" > /dev/null
}
workdir_of() {  # CONFIGURED -> the directory we work in: CONFIGURED when it is private (private_dir), else (a
  # shared directory only root or we can rename entries in: mode 1777 of root's, or ours with the sticky bit) our
  # own subdirectory CONFIGURED/uid-UID. A symlink (of root's or ours, on a path no one else can change) is
  # followed; the caller refuses CONFIGURED first when untrusted_prefix finds anything on its path.
  _w=$(expand_home "$1")
  [ -L "$_w" ] && [ -d "$_w" ] && _w=$(cd -P "$_w" && pwd -P)
  if [ ! -e "$_w" ] || private_dir "$_w"; then echo "$_w"; else echo "$_w/uid-$(id -u)"; fi
}
expand_home() {  # CONFIGURED -> an absolute path: "~" and "~/..." in this user's home, a relative one in the
  # current directory
  case $1 in "~") echo "$HOME" ;; "~/"*) echo "$HOME/${1#"~/"}" ;; /*) echo "$1" ;; *) echo "$(pwd -P)/$1" ;; esac
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
GPU_TOL_MIB=256  # a GPU is back to its level before the launch within this many MiB (driver noise, caches)
gpu_state() {  # WANT SMI... -> one nvidia-smi read of GPUs and compute apps: "gpu INDEX USED LEVEL" per GPU in
  # WANT (indices, "-": all), then "ours MIB PIDS" (MiB held by $pids: listed by PID, or mapped through
  # /proc/PID/status NSpid from another PID namespace to ours). LEVEL: memory.used minus what processes this
  # host can see (a /proc entry here) and that are not ours hold: our server's memory plus whatever PIDs we
  # cannot see hold (inside a container the driver reports the host's PIDs, or none). Nothing without nvidia-smi.
  _want=$1; shift
  [ $# -gt 0 ] || return 0
  _g=$("$@" --query-gpu=index,uuid,memory.used --format=csv,noheader,nounits 2>/dev/null) || {
    case $? in 124|137) echo hung ;; esac; return 0; }  # under `timeout`: it did not answer within its bound
  _a=$("$@" --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits 2>/dev/null) || _a=""
  _vis="" _map=""
  for _p in $(printf '%s\n' "$_a" | awk -F', *' '$1 ~ /^[0-9]+$/ { print $1 }'); do
    [ -e "/proc/$_p" ] || continue
    _vis="$_vis $_p"
    _ns=$(sed -n 's/^NSpid:[[:space:]]*//p' "/proc/$_p/status" 2>/dev/null)
    _in=""; for _x in $_ns; do _in=$_x; done  # its PID in the innermost namespace
    [ "$_in" = "$_p" ] || [ -z "$_in" ] || _map="$_map $_p:$_in"
  done
  printf '%s\n--apps--\n%s\n' "$_g" "$_a" | awk -F', *' -v want=" $_want " -v vis="$_vis" -v map="$_map" \
    -v pids="${pids:-}" '
    BEGIN { n = split(pids, a, " "); for (i = 1; i <= n; i++) ours[a[i]] = 1
            n = split(vis, a, " "); for (i = 1; i <= n; i++) seen[a[i]] = 1
            n = split(map, a, " "); for (i = 1; i <= n; i++) { split(a[i], pm, ":"); if (pm[2] in ours) ours[pm[1]] = 1 } }
    /^--apps--$/ { apps = 1; next }
    !apps && $1 ~ /^[0-9]+$/ { idx[$2] = $1; used[$2] = $3; order[++g] = $2; next }
    apps && $1 ~ /^[0-9]+$/ { if ($1 in ours) { m += $2; held = held " " $1 } else if ($1 in seen) other[$3] += $2 }
    END { for (i = 1; i <= g; i++) { u = order[i]
            if (want == " - " || index(want, " " idx[u] " ")) print "gpu", idx[u], used[u], used[u] - other[u] }
          print "ours", m + 0, held }'
}
gpu_base() {  # WD -> base (WD/server.gpu: "INDEX MIB" lines, the level of the server's GPUs before the launch)
  # and want (their indices) for gpu_read
  base=$(cat "$1/server.gpu" 2>/dev/null)
  want=$(printf '%s\n' "$base" | awk '$1 ~ /^[0-9]+$/ && NF == 2 { printf "%s ", $1 }')
}
gpu_read() {  # SMI... -> g_hung (1: nvidia-smi did not answer within its bound), g_mib g_pids (ours, by PID), g_over ("MIB GPU k: N MiB ...": above the level before
  # the launch by more than GPU_TOL_MIB, held by processes this host cannot see); all empty without nvidia-smi
  _st=$(gpu_state "${want:-none}" "$@")
  g_hung=0; [ "$_st" != hung ] || { g_hung=1; _st=""; }  # nvidia-smi did not answer within its bound
  set -- $(printf '%s\n' "$_st" | awk '$1 == "ours" { $1 = ""; print }')
  g_mib=${1:-0}; [ $# -eq 0 ] || shift; g_pids=$*
  g_over=$(printf '%s\n%s\n' "$base" "$_st" | awk -v tol="$GPU_TOL_MIB" '$1 ~ /^[0-9]+$/ && NF == 2 { b[$1] = $2; next }
    $1 == "gpu" && ($2 in b) && $4 - b[$2] > tol { m += $4 - b[$2]; s = s sprintf(" GPU %s: %d MiB", $2, $4 - b[$2]) }
    END { if (m) print m s }')
}
gpu_record() {  # WD GPUS SMI... -> WD/server.gpu: the level of GPUS (indices, "-": all) before a launch (gpu_state);
  # fails when it cannot be written. Nothing without nvidia-smi.
  _wd=$1 _gpus=$2; shift 2
  rm -f "$_wd/server.gpu"
  [ $# -gt 0 ] || return 0
  _lv=$(pids=""; gpu_state "$_gpus" "$@" | awk '$1 == "gpu" { print $2, $4 }')
  [ -z "$_lv" ] || ( set -C; printf '%s\n' "$_lv" > "$_wd/server.gpu" ) 2>/dev/null
}
gpu_wait() {  # T1_CS GPU_S SMI... -> wait (never a fixed sleep) until nvidia-smi lists none of $pids and the GPUs of
  # gpu_base are back within GPU_TOL_MIB of their level before the launch; "progress" every 2 s; then
  # "gpu_release_cs N" (+ "gpu_release_by level" when the level was what it waited for), or "result error ..."
  # and exit after GPU_S seconds
  _t1=$1 _gs=$2; shift 2
  _next=0 by_level=0
  while :; do
    gpu_read "$@"
    [ "$g_hung" = 1 ] && { say "gpu_hung"; break; }
    [ -z "$g_pids" ] && [ -z "$g_over" ] && break
    waited=$(( $(up) - _t1 ))
    if [ -n "$g_pids" ]; then what="$g_mib MiB held by PIDs $g_pids"
    else by_level=1; what="${g_over%% *} MiB above the GPUs' level before the launch (${g_over#* }), held by processes this host cannot see"; fi
    if [ $waited -ge $_next ]; then
      say "progress waiting for GPU memory release: $what ($(( waited / 100 )) s)"
      _next=$(( waited + 200 ))
    fi
    if [ $waited -ge $(( _gs * 100 )) ]; then
      say "result error GPU memory still held after $_gs s: $what — the processes exited but the driver has not released their memory"
      exit 0
    fi
    nap 0.2
  done
  say "gpu_release_cs $(( $(up) - _t1 ))"
  [ $by_level = 0 ] || say "gpu_release_by level"
}
