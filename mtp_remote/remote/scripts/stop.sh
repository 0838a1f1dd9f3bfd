# stop.sh — stop the server recorded in WORKDIR, in one host-side step (POSIX sh; lib.sh is prepended).
#
# usage: sh -c "$(cat lib.sh stop.sh)" sh WORKDIR TERM_S KILL_S GPU_S UNLOCK [NVIDIA_SMI_ARGV...]
# UNLOCK: "-", or a run id whose host lock (WORKDIR/lock) is removed when the stop ends well (the end of a run:
# the stop and the release in one round trip; a lock held by another run is left alone).
# Reads server.ident ("pid pgid start_ticks boot_id cmdline_sha256", written by launch.sh; older records:
# the head of server.json) and server.children ("pid start_ticks" lines). The leader is ours only with the
# recorded start time, boot and command-line hash; the group is signalled only when pgid == pid and no
# ancestor of this shell is in it. SIGTERM to the group, wait TERM_S, SIGKILL, wait KILL_S, SIGKILL recorded
# children that left the group (same PID and start time), then wait up to GPU_S until nvidia-smi lists none
# of them (by PID, or by its NSpid in another PID namespace) and, when server.gpu holds the GPUs' level before
# the launch ("INDEX MIB" lines, launch.sh), until each of those GPUs is back within GPU_TOL_MIB of it: inside
# a container the driver lists the host's PIDs (or none), so the PID match alone would say "released" at once. With the leader gone the group number may be a stranger's now: no group is signalled, only the
# members that started at or after the recorded start and have our command line (the recorded hash, or an
# SGLang title sglang::...) or are recorded children, each by PID ("strangers PIDS" names the others).
# WORKDIR must be a private directory of ours on a path only root and we can change (held_dir) and each record a regular file of ours (never a symlink): else
# nothing is read or signalled. stdout: "key value" lines, "progress TEXT" while it runs, "unlocked" when
# UNLOCK released the lock, last "result ok" or "result error TEXT".
set -u
need awk cat grep head ls rm sed sha256sum sleep tr
wd=$1 term_s=$2 kill_s=$3 gpu_s=$4 unlock=$5
shift 5
ok() {  # the stop ended well: release the run's lock if asked, then say so
  if [ "$unlock" != "-" ] && grep -qF " $unlock " "$wd/lock" 2>/dev/null && rm -f "$wd/lock"; then say "unlocked"; fi
  say "result ok"; exit 0
}
drop_record() { rm -f "$wd/server.ident" "$wd/server.json" "$wd/server.pid" "$wd/server.children" "$wd/server.gpu"; }
if ! held_dir "$wd"; then  # checked each time (workdir.sh): a shared or planted directory is never read
  [ -e "$wd" ] || [ -L "$wd" ] || { say "found none"; say "result ok"; exit 0; }  # nothing there: create nothing
  say "result error $wd is not a directory of ours that only we can write: no record read, nothing signalled"; exit 0
fi
for f in server.ident server.json server.children server.gpu; do  # a record is trusted only when it is a file of ours
  if { [ -e "$wd/$f" ] || [ -L "$wd/$f" ]; } && ! owned "$wd/$f"; then
    say "found none"; say "refused $wd/$f is not a file of ours: not trusted"; drop_record; ok
  fi
done
ident=$(cat "$wd/server.ident" 2>/dev/null)
if [ -z "$ident" ] && [ -f "$wd/server.json" ]; then  # a record from before server.ident existed
  ident=$(tr -d '\n\t ' < "$wd/server.json" 2>/dev/null |
          sed -n 's/^{"pid":\([0-9]*\),"pgid":\([0-9]*\),"start_ticks":\([0-9]*\),.*/\1 \2 \3 - -/p')
fi
if [ -z "$ident" ]; then
  [ -f "$wd/server.json" ] && say "found unreadable" || say "found none"
  rm -f "$wd/server.json" "$wd/server.pid" "$wd/server.children" "$wd/server.gpu"
  ok
fi
set -- $ident "$@"
pid=$1 pgid=$2 start=$3 boot=$4 sha=${5:--}
shift 5
[ "$boot" = "-" ] || [ -n "$boot" ] || boot=-
children=$(cat "$wd/server.children" 2>/dev/null)
if [ -z "$children" ] && [ -f "$wd/server.json" ]; then
  children=$(tr -d '\n\t ' < "$wd/server.json" | sed -n 's/.*"children":\[\(.*\)\]\].*/\1]/p' |
             grep -o '\[[0-9]*,[0-9]*\]' | tr -d '[]' | tr ',' ' ')
fi
say "pid $pid"
say "pgid $pgid"
say "record-begin"; cat "$wd/server.json" 2>/dev/null; say ""; say "record-end"
cur_boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo -)
if [ "$boot" != "-" ] && [ "$cur_boot" != "-" ] && [ "$boot" != "$cur_boot" ]; then
  say "found gone"; say "reason the host rebooted since the launch"; drop_record; ok
fi
# the leader: ours, someone else's (PID reused), or gone
found=gone
if s=$(alive_start "$pid"); then
  same=1
  [ "$s" = "$start" ] || same=0
  if [ $same = 1 ] && [ "$sha" != "-" ] && [ -n "$sha" ]; then
    h=$(sha256sum < "/proc/$pid/cmdline" 2>/dev/null); h=${h%% *}
    [ -z "$h" ] || [ "$h" = "$sha" ] || same=0
  fi
  if [ $same = 0 ]; then
    say "found not-ours"; say "reason PID $pid is alive with another start time or command line (PID reused)"
    drop_record; ok
  fi
  found=running
fi
members=$(group_members "$pgid") || {  # never "gone" for a group we could not list: the record is kept
  say "result error cannot list the processes of group $pgid on this host (reading /proc failed); the record is kept"; exit 0; }
strays() {  # recorded children still alive with their recorded start time
  printf '%s\n' "$children" | while read -r cp cs; do
    [ -n "$cp" ] && same_start "$cp" "$cs" && printf '%s ' "$cp"
  done
}
recorded_child() {  # PID START -> 0 when PID is one of the recorded children with that start time
  printf '%s\n' "$children" | grep -qx "$1 $2"
}
# with the leader gone its PGID may have been reused (a stranger that daemonised under that number): a member
# is ours only when it started at or after our server and has our command line (or is a recorded child)
targets=""
if [ $found = gone ] && [ -n "$members" ]; then
  strangers=""
  for m in $members; do
    ms=$(alive_start "$m") || continue
    if [ "$ms" -ge "$start" ] 2>/dev/null && { recorded_child "$m" "$ms" || cmdline_ours "$m" "$sha"; }; then
      targets="$targets$m $ms "
    else
      strangers="$strangers $m"
    fi
  done
  [ -z "$strangers" ] || say "strangers$strangers"
  members=$(set -- $targets; while [ $# -ge 2 ]; do printf '%s ' "$1"; shift 2; done)
fi
left=$(strays)
if [ $found = gone ] && { [ -n "$members" ] || [ -n "$left" ]; }; then found=group-only; fi
say "found $found"
# never a group that is not led by the recorded PID, nor one that holds this shell or its ancestors
if [ -n "$members" ]; then
  if [ "$pgid" != "$pid" ]; then
    say "refused the record names process group $pgid, not led by PID $pid"; drop_record; ok
  fi
  case $(caller_groups) in *" $pgid "*)
    say "refused process group $pgid holds the caller of this stop"; drop_record; ok ;;
  esac
fi
pids=" $pid $members $left $(printf '%s\n' "$children" | while read -r cp cs; do printf '%s ' "$cp"; done)"
say "members $members"
gpu_base "$wd"
gpu_read "$@"; say "gpu_mib $g_mib"; say "gpu_level_mib ${g_over%% *}"
if [ "$g_hung" = 1 ]; then say "gpu_hung"; set --; fi  # not asked again: each ask would wait its bound
t0=$(up)
live() {  # what is left to wait for: the live group (leader alive: the group is ours), else our members by PID
  if [ $found = running ]; then group_members "$pgid" || return 1; else set -- $(pairs_left "$targets"); while [ $# -ge 2 ]; do printf '%s ' "$1"; shift 2; done; fi
}
send() {  # SIG -> to the group (leader alive), else to each of our members by PID while it has its start time
  if [ $found = running ]; then kill "-$1" "-$pgid" 2>/dev/null; return; fi
  set -- "$1" $(pairs_left "$targets")
  _sig=$1; shift
  while [ $# -ge 2 ]; do kill "-$_sig" "$1" 2>/dev/null; shift 2; done
}
wait_gone() {  # DEADLINE_CS -> 0 when nothing of ours in group $pgid lives before the deadline
  while :; do
    members=$(live) || { say "result error cannot list the processes of group $pgid any more; the record is kept"; exit 0; }
    [ -z "$members" ] && return 0
    [ "$(up)" -ge "$1" ] && return 1
    nap 0.05
  done
}
if [ -n "$members" ]; then
  send TERM; say "signal TERM"
  say "progress SIGTERM sent to process group $pgid; waiting up to $term_s s for it to drain"
  if ! wait_gone $(( $(up) + term_s * 100 )); then
    send KILL; say "signal KILL"
    say "progress process group $pgid still alive after $term_s s; SIGKILL sent"
    if ! wait_gone $(( $(up) + kill_s * 100 )); then
      say "result error process group $pgid survived SIGKILL: PIDs $members"; exit 0
    fi
  fi
fi
left=$(strays)
if [ -n "$left" ]; then  # children that left the group (setsid): ours by PID + start time, so SIGKILL them
  say "progress our server's children $left left its process group and survived; SIGKILL by PID"
  for cp in $left; do kill -KILL "$cp" 2>/dev/null; done
  say "signal KILL(orphans)"; say "orphans $left"
  end=$(( $(up) + kill_s * 100 ))
  while [ -n "$(strays)" ] && [ "$(up)" -lt "$end" ]; do nap 0.05; done
  left=$(strays)
  [ -z "$left" ] || { say "result error children $left survived SIGKILL"; exit 0; }
fi
t1=$(up); say "exit_cs $(( t1 - t0 ))"
gpu_wait "$t1" "$gpu_s" "$@"
drop_record
ok
