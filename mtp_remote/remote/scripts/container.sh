# container.sh — a server as its own container from an image (podman or docker): launch it, or stop the one
# recorded in WORKDIR, each in one host-side step (POSIX sh; lib.sh is prepended).
#
# usage: sh -c "$(cat lib.sh container.sh)" sh launch WORKDIR LOG PORT GPUS NSMI [SMI...] NGPU [GPUARG...] RUNTIME run -d ARG...
#   stdin: the server's environment as an env file (NAME=value lines), kept in a 0600 file passed with
#   --env-file and removed once the container runs (no secret on an argv). The port is checked first, the GPUs'
#   level recorded (server.gpu, lib.sh gpu_record), GPUARGs (--gpus / --device) passed only when the host has
#   NVIDIA devices. The record: WORKDIR/server.container ("id CID", "name", "runtime", "log" lines).
#   stdout: "cid CID", last "result ok|port-in-use|cannot-write-record|not-private|run-failed" (run-failed:
#   the runtime's output between "output-begin" and "output-end").
# usage: sh -c "$(cat lib.sh container.sh)" sh stop WORKDIR TERM_S GPU_S UNLOCK [SMI...]
#   Stops only the recorded container, and only while it carries our label: `stop -t TERM_S` (SIGTERM, the
#   drain, SIGKILL after TERM_S), its log saved to the recorded log path, `rm`; then the GPU wait (lib.sh
#   gpu_wait: its host PIDs as listed before the stop, and the GPUs' level before the launch). stdout as
#   stop.sh's ("found", "signal", "exit_cs", "gpu_*", "container CID", "exit_code N", last "result ...").
set -u
need awk cat grep ls mv rm sed sleep tr
action=$1; shift
if [ "$action" = launch ]; then
  wd=$1 log=$2 port=$3 gpus=$4 nsmi=$5
  shift 5
  smi=""
  while [ "$nsmi" -gt 0 ]; do smi="$smi '$(printf '%s' "$1" | sed "s/'/'\\\\''/g")'"; shift; nsmi=$((nsmi - 1)); done
  ngpu=$1; shift
  gpuargs=""
  while [ "$ngpu" -gt 0 ]; do gpuargs="$gpuargs '$(printf '%s' "$1" | sed "s/'/'\\\\''/g")'"; shift; ngpu=$((ngpu - 1)); done
  [ -e /dev/nvidiactl ] || gpuargs=""  # no NVIDIA device here: nothing to pass
  rt=$1; shift 3  # RUNTIME run -d
  umask 077
  private_dir "$wd" || { say "result not-private"; exit 0; }
  hex=$(printf '%04X' "$port")
  if grep -Eq "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:[0-9A-F]{4} 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
    say "result port-in-use"; exit 0
  fi
  ( eval "set -- $smi"; gpu_record "$wd" "$gpus" "$@" ) || { say "result cannot-write-record"; exit 0; }
  envf="$wd/.container-env.$$"
  rm -f "$envf"; ( set -C; cat > "$envf" ) 2>/dev/null || { rm -f "$envf"; say "result cannot-write-record"; exit 0; }
  out=$(eval "set -- $gpuargs"' "$@"'; "$rt" run -d --env-file "$envf" "$@" 2>&1); rc=$?
  rm -f "$envf"
  cid=$(printf '%s\n' "$out" | tail -n 1)
  case $cid in *[!0-9a-f]*|"") rc=1 ;; esac
  if [ $rc != 0 ]; then say "output-begin"; printf '%s\n' "$out" | tail -n 30; say "output-end"; say "result run-failed"; exit 0; fi
  say "cid $cid"
  name="" prev=""
  for a do [ "$prev" = --name ] && name=$a; prev=$a; done
  if ! ( set -C; rm -f "$wd/server.container.tmp.$$"
         printf 'id %s\nname %s\nruntime %s\nlog %s\n' "$cid" "$name" "$rt" "$log" > "$wd/server.container.tmp.$$" &&
         mv -f "$wd/server.container.tmp.$$" "$wd/server.container" ) 2>/dev/null; then
    "$rt" rm -f "$cid" > /dev/null 2>&1  # an untracked container must not stay
    say "result cannot-write-record"; exit 0
  fi
  say "result ok"; exit 0
fi
# stop
wd=$1 term_s=$2 gpu_s=$3 unlock=$4
shift 4
ok() {
  if [ "$unlock" != "-" ] && grep -qF " $unlock " "$wd/lock" 2>/dev/null && rm -f "$wd/lock"; then say "unlocked"; fi
  say "result ok"; exit 0
}
drop_record() { rm -f "$wd/server.container" "$wd/server.gpu"; }
if ! private_dir "$wd"; then
  [ -e "$wd" ] || [ -L "$wd" ] || { say "found none"; say "result ok"; exit 0; }
  say "result error $wd is not a directory of ours that only we can write: no record read, nothing stopped"; exit 0
fi
f="$wd/server.container"
if [ ! -e "$f" ] && [ ! -L "$f" ]; then say "found none"; ok; fi
owned "$f" || { say "found none"; say "refused $f is not a file of ours: not trusted"; drop_record; ok; }
field() { sed -n "s/^$1 //p" "$f" | head -n 1; }
cid=$(field id) rt=$(field runtime) log=$(field log)
case $rt in podman|docker) ;; *) say "found unreadable"; drop_record; ok ;; esac
case $cid in *[!0-9a-f]*|"") say "found unreadable"; drop_record; ok ;; esac
say "container $cid"
say "pid 0"
lab=$("$rt" inspect --format '{{index .Config.Labels "mtp-remote"}}' "$cid" 2>/dev/null) || {
  say "found gone"; say "reason the container is gone"; drop_record; ok; }
if [ -z "$lab" ] || [ "$lab" = "<no value>" ]; then
  say "found not-ours"; say "reason container $cid carries no mtp-remote label: not ours"; drop_record; ok
fi
running=$("$rt" inspect --format '{{.State.Running}}' "$cid" 2>/dev/null)
if [ "$rt" = podman ]; then pids=$("$rt" top "$cid" hpid 2>/dev/null | awk 'NR > 1 { printf "%s ", $1 }')
else pids=$("$rt" top "$cid" -o pid 2>/dev/null | awk 'NR > 1 { printf "%s ", $1 }'); fi
gpu_base "$wd"
gpu_read "$@"; say "gpu_mib $g_mib"; say "gpu_level_mib ${g_over%% *}"
t0=$(up)
if [ "$running" = true ]; then
  say "found running"
  say "progress stopping container $cid: SIGTERM, up to $term_s s for the drain, then SIGKILL"
  "$rt" stop -t "$term_s" "$cid" > /dev/null 2>&1
  code=$("$rt" inspect --format '{{.State.ExitCode}}' "$cid" 2>/dev/null)
  say "signal TERM"
  [ "$code" = 137 ] && say "signal KILL"
  say "exit_code $code"
else
  say "found gone"; say "reason the container had already exited"
fi
[ -z "$log" ] || [ ! -d "${log%/*}" ] || "$rt" logs "$cid" > "$log" 2>&1
"$rt" rm -f "$cid" > /dev/null 2>&1
if "$rt" inspect --format '{{.Id}}' "$cid" > /dev/null 2>&1; then
  say "result error container $cid could not be removed; the record is kept"; exit 0
fi
t1=$(up); say "exit_cs $(( t1 - t0 ))"
gpu_wait "$t1" "$gpu_s" "$@"
drop_record
ok
