# launch.sh — start one server detached and record its identity, in one host-side step (POSIX sh).
#
# usage: sh -c "$(cat lib.sh launch.sh)" sh WORKDIR LOG PORT WAIT_S GPUS NSMI [SMI...] PYTHON NENTRY ENTRY... [ARG...]
# ENTRY: the NENTRY words after python on the server's command line: "-m sglang.launch_server", or
# "/venv/bin/sglang serve" (`sglang serve`: the console script run by its python); checked after exec.
# GPUS: the indices of the GPUs the server will use ("0 1"; "-": all); NSMI words of nvidia-smi's command line
# follow (0: none). Before the start, their level (memory.used minus what processes visible here hold) goes to
# WORKDIR/server.gpu ("INDEX MIB" lines): stop.sh waits for it after the stop (lib.sh gpu_state).
# stdin: line 1 = the record's static fields as one JSON object (no secrets: argv already masked);
#        the rest = the server's environment as one JSON object {"NAME": "value"}, kept in a 0600 file.
#        The file is data, never shell: no line of it is sourced or evaluated. $envload (below), run by the
#        host's python as the server's first image, reads it, removes it, sets the variables and execs the
#        server in place (same PID, so the identity below is the server's).
# PYTHON: a path, or a bare name looked up in PATH's absolute entries (never in WORKDIR; "result no-python" when
# there is none).
# stdout: "key value" lines, last "result ok|<error>"; parsed by mtp_remote/remote/hostscripts.py (parse_launch).
# lib.sh is prepended.
# The record (server.ident, then server.json, server.pid) is written before the script ends; if it cannot
# be written the server just started is SIGKILLed (its own process group) and the result says so.
set -uf
# a reader that goes away (the tool killed, the SSH connection dropped) must not end this script between the
# start and the record: SIGPIPE and SIGHUP are ignored (a failed write is just lost), and nothing is said about
# the server until its record is written
trap '' PIPE HUP
need awk cat grep mv rm sed setsid nohup sha256sum sleep tail tr
wd=$1 log=$2 port=$3 wait_s=$4 gpus=$5 nsmi=$6
shift 6
smi=""  # nvidia-smi's words, kept quoted for one `eval set --` (they come from our own argv)
while [ "$nsmi" -gt 0 ]; do smi="$smi '$(printf '%s' "$1" | sed "s/'/'\\\\''/g")'"; shift; nsmi=$((nsmi - 1)); done
py=$1 nentry=$2
shift 2
entry="" i=0  # the words after python on the server's command line, as /proc shows them once it runs
for w do [ $i -lt "$nentry" ] || break; entry="$entry$w "; i=$((i + 1)); done
umask 077
fail() { rm -f "$envf" "$wd/server.ident.tmp.$$" "$wd/server.json.tmp.$$" "$wd/server.pid.tmp.$$"
  [ -z "${pid:-}" ] || say "pid $pid"; say "result $1"; exit 0; }
envf="$wd/.launch-env.$$"
# the python, found before we stand in the workdir (a bare name through PATH's absolute entries, never the
# workdir: a file named like it there is never run); the server's own python is found the same way by the
# loader below, through the PATH of the server's environment
pyexe=$(find_exe "$py") || { envf=/nonexistent; fail "no-python"; }
case $py in */*) py=$pyexe ;; esac
[ -e "$wd" ] || [ -L "$wd" ] || { envf=/nonexistent; fail "no-workdir"; }
# checked each time (workdir.sh), before we stand in it: ours, private, on a path only root and we can change
held_dir "$wd" || { envf=/nonexistent; fail "not-private"; }
cd "$wd" 2>/dev/null || { envf=/nonexistent; fail "no-workdir"; }
IFS= read -r template || template=""
case $template in "{"*"}") ;; *) envf=/nonexistent; fail "bad-template" ;; esac
rm -f "$envf"; ( set -C; cat > "$envf" ) 2>/dev/null || fail "cannot-write-workdir"  # noclobber: O_EXCL
# the port, before anything starts (SGLang itself notices a busy port only after loading the weights)
hex=$(printf '%04X' "$port")
if grep -Eq "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:[0-9A-F]{4} 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
  fail "port-in-use"
fi
# the record location must take a write (a byte: a full disk still creates empty files) before we start
rm -f "$wd/server.ident.tmp.$$"
( set -C; printf x > "$wd/server.ident.tmp.$$" ) 2>/dev/null || fail "cannot-write-record"
rm -f "$wd/server.ident.tmp.$$"
# the GPUs' level before the server starts (stop.sh waits until they are back to it)
( eval "set -- $smi"; gpu_record "$wd" "$gpus" "$@" ) || fail "cannot-write-record"
t0=$(up)
# the environment loader: JSON in, os.environ out (names checked again: a shell name, whole), then exec
envload='import json, os, re, shutil, sys
path = sys.argv[1]
with open(path) as f:
    env = json.load(f)
os.unlink(path)
for name, value in env.items():
    if not re.fullmatch("[A-Za-z_][A-Za-z0-9_]*", name) or not isinstance(value, str) or "\0" in value:
        sys.exit("mtp-remote: refused environment variable %r" % name)
    os.environ[name] = value
prog = sys.argv[2]
if "/" not in prog:  # a bare name: PATH as the shell searches it, but never a relative entry (the workdir)
    path = os.pathsep.join(d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if os.path.isabs(d))
    prog = shutil.which(prog, path=path)
    if prog is None:
        sys.exit("mtp-remote: %r is not found in PATH (%s); the working directory is never searched" % (sys.argv[2], path))
os.execv(prog, [prog] + sys.argv[3:])'
# the loader runs isolated (-I: no PYTHON* variables, not the workdir on sys.path); one simple background command: a subshell that reads the environment, removes the file and becomes the
# server by exec (setsid -> nohup -> python), so $! is the server's PID and, after setsid, its process group
( trap - PIPE HUP; exec setsid nohup "$pyexe" -I -c "$envload" "$envf" "$py" "$@" > "$log" 2>&1 < /dev/null ) &
pid=$!
# identity: read after exec, once stat before and after the command line agree on group and start time
ident=""
while :; do
  f1=$(stat_fields "$pid") || break
  set -- $f1
  case $1 in Z|X) break ;; esac
  a=$(tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null | sed -n "2,$((nentry + 1))p" | tr '\n' ' ')
  f2=$(stat_fields "$pid") || break
  if [ "$a" = "$entry" ] && [ "$3" = "$pid" ] && [ "$4" = "$pid" ] && [ "${f1#* * }" = "${f2#* * }" ]; then
    ident="$pid $3 $5"
    break
  fi
  [ $(( $(up) - t0 )) -ge $(( wait_s * 100 )) ] && break
  nap 0.01
done
rm -f "$envf"
if [ -z "$ident" ]; then
  if f1=$(stat_fields "$pid"); then  # alive but never became the server we meant: our unreaped child
    set -- $f1
    [ "$3" = "$pid" ] && kill -KILL "-$pid" 2>/dev/null  # its own group, after setsid
    kill -KILL "$pid" 2>/dev/null
  fi
  say "log-tail-begin"; tail -n 30 "$log" 2>/dev/null; say ""; say "log-tail-end"
  fail "exited"
fi
boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)
sha=$(sha256sum < "/proc/$pid/cmdline" 2>/dev/null) || sha=""
sha=${sha%% *}
set -- $ident
# the record: identity first (server.ident, what stop reads), then server.json (identity + static fields)
rec_ok=1
rm -f "$wd/server.ident.tmp.$$" "$wd/server.json.tmp.$$" "$wd/server.pid.tmp.$$"
set -C  # the record's temporary files are created, never opened through something already there
{ say "$1 $2 $3 $boot $sha" > "$wd/server.ident.tmp.$$" && mv -f "$wd/server.ident.tmp.$$" "$wd/server.ident"; } 2>/dev/null || rec_ok=0
if [ $rec_ok = 1 ]; then
  { printf '{"pid": %s, "pgid": %s, "start_ticks": %s, "boot_id": "%s", "cmdline_sha256": "%s", ' \
        "$1" "$2" "$3" "$boot" "$sha" && printf '%s\n' "${template#?}"; } > "$wd/server.json.tmp.$$" 2>/dev/null \
    && mv -f "$wd/server.json.tmp.$$" "$wd/server.json" 2>/dev/null \
    && say "$1" > "$wd/server.pid.tmp.$$" 2>/dev/null && mv -f "$wd/server.pid.tmp.$$" "$wd/server.pid" 2>/dev/null \
    || rec_ok=0
fi
set +C
if [ $rec_ok = 0 ]; then  # an untracked server must not stay: stop what we just started
  kill -KILL "-$1" 2>/dev/null
  n=0
  while alive_start "$1" > /dev/null && [ $n -lt 100 ]; do nap 0.05; n=$((n + 1)); done
  rm -f "$wd/server.ident" "$wd/server.json" "$wd/server.pid"
  fail "record-failed"
fi
say "pid $1"
say "ident $1 $2 $3 $boot $sha"
say "result ok"
