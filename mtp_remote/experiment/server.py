"""ServerLifecycle: prepare the host, stop what we left, launch a profile, wait until it is ready, stop it.

One code path for every transport: all host access goes through ``c.run`` (Fabric Connection or Invoke
Context). Waiting for readiness follows the server log from a byte offset and classifies it with the same
signature classifier as ``classify-log``; it has three outcomes — :class:`Ready`, :class:`Crashed` (process
gone or a fatal line, with the cause, a hint and the last log lines) and :class:`TimedOut`. A ready line
alone is not readiness: the caller then confirms ``/health`` answers 200 (through the tunnel).
"""

from __future__ import annotations

import base64
import codecs
import json
import logging
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from ..config.inventory import HostConfig
from ..config.validation import check_run_id
from ..errors import ConfigError, LaunchError, LockError, RemoteError
from ..remote import facts, hostscripts, lockbeat, process
from ..remote.commands import Command, mask_argv, mask_log_secrets
from ..remote.follow import LogStream
from ..remote.logs import READY_LINE, LogClassification, classify_log

log = logging.getLogger(__name__)

TAIL_LINES = 30
POLL_S = 0.1
CHUNK = 1 << 20


@dataclass
class WaitOutcome:
    """Common fields of Ready / Crashed / TimedOut. Times in seconds since launch."""

    profile: str
    elapsed_s: float
    milestones: list[dict] = field(default_factory=list)  # [{"name", "at_s"}] seconds since launch
    log_tail: list[str] = field(default_factory=list)
    cause: str = ""
    hint: str = ""
    fatal_line: str | None = None

    kind = "outcome"

    @property
    def ok(self) -> bool:
        return self.kind == "ready"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "profile": self.profile, "elapsed_s": round(self.elapsed_s, 3),
                "milestones": self.milestones, "cause": self.cause, "hint": self.hint,
                "fatal_line": self.fatal_line, "log_tail": self.log_tail}

    def describe(self) -> str:
        if self.ok:
            return f"{self.profile}: ready after {self.elapsed_s:.1f} s"
        what = "crashed" if self.kind == "crashed" else "timed out"
        return f"{self.profile}: server {what} after {self.elapsed_s:.1f} s: {self.cause} — {self.hint}"


class Ready(WaitOutcome):
    kind = "ready"


class Crashed(WaitOutcome):
    kind = "crashed"


class TimedOut(WaitOutcome):
    kind = "timed_out"


def _local_pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Polled(NamedTuple):
    """One poll: whether the process lives, the log text from the offset asked for, and how many of the log's
    bytes that text holds (the next poll's offset is ``offset + nbytes``)."""

    alive: bool
    text: str
    nbytes: int


#: The poll's log bytes as text: base64 where the host has it (coreutils, busybox), else POSIX od's hex; the
#: first line names which.
_ENCODE = "{ if command -v base64 >/dev/null 2>&1; then echo b64; base64; else echo hex; od -An -v -tx1; fi; }"


def _decode_chunk(encoded: str) -> bytes:
    """The log bytes of one poll from ``_ENCODE``'s output (b'' when unreadable)."""
    kind, _, body = encoded.partition("\n")
    try:
        if kind.strip() == "hex":
            return bytes.fromhex("".join(body.split()))
        return base64.b64decode("".join(body.split()))
    except ValueError:
        return b""


def _parse_poll(output: str) -> Polled:
    """Split one poll's output (the process's stat line, ``--log--``, the log bytes encoded) into a Polled.

    The log travels as base64, so the offset counts the log's own bytes whatever they hold: invalid UTF-8 is
    shown as U+FFFD but counted as the bytes it was, and a character cut at the chunk's end is left for the
    next poll rather than counted as a replacement character."""
    head, _, encoded = output.partition("--log--\n")
    head = head.strip()
    alive = False
    if ")" in head:
        state = head[head.rindex(")") + 2:].split()[0]
        alive = state not in ("Z", "X")
    raw = _decode_chunk(encoded)
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    text = dec.decode(raw, final=False)
    pending = dec.getstate()[0]
    if not pending or alive:  # a cut character (a live writer may finish it): its bytes are read again next time
        return Polled(alive, text, len(raw) - len(pending))
    return Polled(alive, text + dec.decode(b"", final=True), len(raw))  # the log's last bytes: nothing follows


#: Replace the lock only if it still holds the line we judged stale, under a mkdir mutex (a mutex left by a
#: crashed contender is broken after 60 s). stdin: the sha256 of the line seen (its bytes: a line that is not
#: UTF-8 is compared as it is), then ours. Prints "acquired", or "held", the current line's sha256 and the line.
_LOCK_TAKEOVER = (
    'umask 077; IFS= read -r seen; IFS= read -r mine; m="$1.takeover"; n=0; '
    'line() { head -c 512 "$1" 2>/dev/null | head -n 1; }; '
    'held() { echo held; h=$(line "$1" | sha256sum); echo "${h%% *}"; line "$1"; }; '
    'until mkdir "$m" 2>/dev/null; do n=$((n + 1)); '
    '  if [ $n -ge 100 ]; then if [ -n "$(find "$m" -maxdepth 0 -mmin +1 2>/dev/null)" ]; then rmdir "$m"; n=0; '
    '    else held "$1"; exit 0; fi; fi; sleep 0.05 2>/dev/null || sleep 1; done; '
    'cur=$(line "$1" | sha256sum); cur=${cur%% *}; '
    'if [ ! -e "$1" ] || [ "$cur" = "$seen" ]; then rm -f "$1.new.$$"; (set -C; printf "%s\\n" "$mine" > "$1.new.$$") 2>/dev/null '
    '&& mv -f "$1.new.$$" "$1" && echo acquired || { rm -f "$1.new.$$"; held "$1"; }; '
    'else held "$1"; fi; rmdir "$m"')


class ServerLifecycle:
    """Lifecycle of the servers of one run on one host.

    ``c`` is the transport; ``python`` the remote python; ``workdir`` the remote work directory (``~``
    allowed); ``on_progress(msg)`` receives one-line progress messages."""

    def __init__(self, c, host: HostConfig, *, python: str, workdir: str, run_id: str,
                 on_progress: Callable[[str], None] | None = None):
        try:
            check_run_id(run_id)
        except ValueError as e:
            raise ConfigError(str(e), field="run id") from None
        self.c = c
        self.host = host
        self.python = python
        self.workdir = workdir
        self.run_id = run_id
        self.on_progress = on_progress or (lambda msg: None)

    @property
    def smi(self) -> str:
        """The nvidia-smi command for this host (the sim's stand-in on sim hosts)."""
        return facts.nvidia_smi(self.host, self.python, self.workdir)

    # -- setup -------------------------------------------------------------------------------------------

    def _run(self, cmd: str | Command, *, warn: bool = True, stdin: str | None = None):
        text = cmd.text if isinstance(cmd, Command) else cmd
        return self.c.run(text, hide=True, warn=warn,
                          in_stream=hostscripts.WholeStdin(stdin) if stdin is not None else False)

    def prepare(self, lock_owner: str | None = None) -> None:
        """Find the directory we work in on the host and create what is missing — one host-side step
        (``workdir.sh``): ``~`` resolved against the remote $HOME; a private workdir (ours, writable by no one
        else) is used as it is, a shared one (mode 1777, another user's) keeps its mode and we work in our own
        ``uid-UID`` subdirectory of it (0700, checked each time); new directories are 0700; ``logs/<run-id>/``;
        a write test. With ``lock_owner`` the host lock is taken in the same round trip (see
        :meth:`acquire_lock`). Raises RemoteError naming the workdir when it cannot be created, written or
        trusted, LockError when the lock is held."""
        rep = self._workdir_step(lock_owner)
        if lock_owner is not None:
            self._judge_lock(lock_owner, rep)

    def _workdir_step(self, lock_owner: str | None) -> hostscripts.WorkdirReport:
        args = [self.workdir, "create", self.run_id] + (["lock"] if lock_owner is not None else [])
        r = hostscripts.run_script(self.c, "workdir.sh", args,
                                   stdin=self._lock_line(lock_owner) + "\n" if lock_owner is not None else None)
        rep = hostscripts.parse_workdir(r.stdout)
        if rep.path:
            self.workdir = rep.path
        if rep.result != "ok":
            what = {"not-writable": "is not writable", "not-private": f"cannot be trusted ({rep.detail})"}.get(
                rep.result, "cannot be created")
            raise RemoteError(f"workdir {self.workdir} on {self.host.name} {what}; set a writable `workdir` for "
                              f"this host in the inventory", host=self.host.name,
                              command=f"workdir.sh {self.workdir} create", exit_code=r.exited,
                              output=r.stderr or r.stdout)
        return rep

    def log_path(self, profile: str) -> str:
        return f"{self.workdir}/logs/{self.run_id}/{profile}.log"

    # -- lock --------------------------------------------------------------------------------------------

    def _lock_line(self, owner: str) -> str:
        return f"{owner} {self.run_id} {int(time.time())} {os.getpid()} {lockbeat.instance()}"

    def acquire_lock(self, owner: str, stale_s: float = 6 * 3600) -> None:
        """Take ``<workdir>/lock`` (noclobber create, in the same step that checks the workdir) as ``owner``
        (``user@machine``).

        The lock holds owner, run id, epoch seconds, the driver's PID and its instance
        (:func:`~mtp_remote.remote.lockbeat.instance`: machine, boot and a random part); while held it is
        touched every 30 s (:class:`~mtp_remote.remote.lockbeat.LockHeartbeat`). It is taken over when it has not
        been touched for :data:`~mtp_remote.remote.lockbeat.STALE_S` seconds (a lock without an instance, from an
        older mtp-remote: when it is older than ``stale_s``), when it was taken on this same machine and boot by a
        driver process that no longer exists (a run that was killed), or when it is corrupt (not those fields: a
        crash mid-write, a full disk) and its file is over a minute old — a lock being written is never taken.
        The takeover is a compare-and-swap of the line's bytes under a ``mkdir`` mutex: of two contenders for one
        stale lock exactly one wins. Raises LockError naming the holder otherwise."""
        self._judge_lock(owner, self._workdir_step(owner), stale_s)

    def _judge_lock(self, owner: str, rep: hostscripts.WorkdirReport, stale_s: float = 6 * 3600) -> None:
        """Given the workdir step's lock report: done when acquired, else take a stale lock over or raise."""
        path = f"{self.workdir}/lock"
        if rep.lock == "acquired":
            self._beat(path)
            return
        if rep.lock_foreign:
            raise LockError(f"{path} is not a file of ours; remove it (it is never trusted)", host=self.host.name)
        content = self._lock_line(owner)
        seen, seen_sha, old, beat_age = rep.holder, rep.holder_sha, rep.lock_old, rep.lock_age
        for _ in range(3):  # the holder may change under us: judge the lock we saw, swap only that one
            cur = seen.split()
            corrupt = len(cur) < 4 or not (cur[2].isdigit() and cur[3].isdigit())
            age = time.time() - float(cur[2]) if not corrupt else 0.0
            beating = len(cur) >= 5 and beat_age is not None  # a heartbeat lock: judged by its last touch
            if not corrupt and beating:
                age = float(beat_age)
            if not corrupt and len(cur) >= 5:  # its PID is ours to check only when it was written here, this boot
                dead_local = lockbeat.same_machine(cur[4]) and not _local_pid_alive(int(cur[3]))
            else:
                dead_local = not corrupt and cur[0] == owner and not _local_pid_alive(int(cur[3]))
            limit = lockbeat.STALE_S if beating else stale_s
            if corrupt and not old:
                raise LockError(f"the host lock {path} is corrupt ({seen[:80]!r}); it counts as stale once it is a "
                                f"minute old (a lock being written is never taken)", host=self.host.name)
            if not corrupt and age < limit and not dead_local:
                raise LockError(
                    f"host is locked by {cur[0]} (run {cur[1]}, "
                    f"{f'alive: its heartbeat {age:.0f} s ago' if beating else f'{age:.0f} s ago'}); wait "
                    f"for it or remove {self.workdir}/lock if that run is dead", host=self.host.name)
            out = self._run(f"sh -c {shlex.quote(_LOCK_TAKEOVER)} sh {shlex.quote(path)}",
                            stdin=f"{seen_sha}\n{content}\n").stdout
            if out.startswith("acquired"):
                what = ("a corrupt lock" if corrupt else
                        f"a stale lock ({' '.join(cur[:2])}, {'no heartbeat for ' if beating else ''}{age:.0f} s")
                self.on_progress(f"took over {what}{', its driver is gone' if dead_local else ''}"
                                 f"{'' if corrupt else ')'}")
                self._beat(path)
                return
            _, seen_sha, seen = (out.split("\n", 2) + ["", ""])[:3]
            seen, old, beat_age = seen.strip(), False, None
        raise LockError(f"could not take the lock {path}: it keeps changing hands", host=self.host.name)

    def _beat(self, path: str) -> None:
        """Start the held lock's heartbeat (:class:`~mtp_remote.remote.lockbeat.LockHeartbeat`)."""
        self._end_beat()
        self._heartbeat = lockbeat.LockHeartbeat(self.c, path, self.run_id)

    def _end_beat(self) -> None:
        beat = getattr(self, "_heartbeat", None)
        if beat is not None:
            beat.stop()
            self._heartbeat = None

    def release_lock(self) -> None:
        self._end_beat()
        path = shlex.quote(f"{self.workdir}/lock")
        self._run(f"grep -q {shlex.quote(' ' + self.run_id + ' ')} {path} 2>/dev/null && rm -f {path}")

    # -- stop / launch -------------------------------------------------------------------------------------

    def stop(self, *, term_s: float = 60.0, gpu_release_s: float = 120.0,
             drain_s: float | None = None, unlock: bool = False,
             drain_name: str = "timeouts.drain_s") -> process.StopResult:
        """Stop the server we started on this host (if any); see :func:`process.stop_server`. ``unlock``: also
        release this run's host lock in the same round trip when the stop ends well (``res.unlocked``)."""
        res = process.stop_server(self.c, self.workdir, self.smi, term_s=term_s, gpu_release_s=gpu_release_s,
                                  drain_s=drain_s, on_progress=self.on_progress,
                                  unlock=self.run_id if unlock else None, drain_name=drain_name)
        if res.unlocked:
            self._end_beat()
        if res.found != "none":
            self.on_progress(res.describe())
        return res

    def launch(self, profile: str, argv: list[str], env: dict[str, str], *,
               exec_wait_s: int = 10) -> process.ServerRecord:
        """Start the server detached and record it — one host-side step (``launch.sh``): port check, start
        (``setsid nohup``), wait for exec, identity read once (PGID == PID, start time, command-line hash),
        record written (``server.ident``, ``server.json``) before the step ends.

        The environment travels on stdin into a 0600 file that only the server's launching subshell reads and
        that is removed before the server runs: no secret on any argv (``--api-key`` excepted: SGLang reads
        it only from its command line). Raises LaunchError when the port is busy (SGLang itself would notice
        only after loading the weights), the process dies at once, or the record cannot be written (then the
        server just started is SIGKILLed, so no untracked server is left)."""
        log_path = self.log_path(profile)
        module = self.host.engine_module
        masked = mask_argv(argv)
        rec = process.ServerRecord(pid=0, pgid=0, start_ticks=0, cmdline=[self.python, "-m", module, *masked],
                                   profile=profile, port=self.host.port, log_path=log_path, run_id=self.run_id,
                                   started_at=time.time(), argv_masked=masked)
        stdin = json.dumps(rec.static_fields()) + "\n" + hostscripts.env_file_text(env)
        args = [self.workdir, log_path, self.host.port, exec_wait_s, self.python, module, *argv]
        log.info("launch on %s: %s", self.host.name, " ".join(shlex.quote(a) for a in rec.cmdline))
        r = hostscripts.run_script(self.c, "launch.sh", args, stdin=stdin)
        try:
            rep = hostscripts.parse_launch(r.stdout)
        except ValueError as e:
            raise LaunchError(f"{profile}: {e}", cause="identity_refused") from None
        if rep.result == "port-in-use":
            raise LaunchError(
                f"port {self.host.port} on {self.host.name} is already in use; a server we did not start may "
                f"be running (see `mtp-remote status`) — stop it or choose another port", cause="port_in_use")
        if rep.result == "no-python":
            raise LaunchError(f"{profile}: python {self.python!r} is not found on {self.host.name} (a bare name is "
                              f"looked up in PATH, never in the workdir); set `python:` to its path",
                              cause="no_python")
        if rep.result == "exited":
            raise LaunchError(f"{profile}: server exited immediately", cause="process_exited",
                              evidence="\n".join(mask_log_secrets(x) for x in rep.log_tail) or "(empty log)")
        if rep.result == "record-failed":
            raise LaunchError(
                f"{profile}: could not write the server record in {self.workdir} (disk full or read-only?); the "
                f"server just started (PID {rep.pid}) was stopped so none is left untracked",
                cause="record_write_failed")
        if rep.result == "not-private":
            raise LaunchError(f"{profile}: workdir {self.workdir} cannot be trusted (not a directory of ours that "
                              f"only we can write); nothing was started", cause="workdir_not_private")
        if rep.result in ("cannot-write-record", "cannot-write-workdir", "no-workdir"):
            raise LaunchError(f"{profile}: workdir {self.workdir} is not writable ({rep.result}); nothing was "
                              f"started", cause="workdir_not_writable")
        if rep.result != "ok":
            raise LaunchError(f"launch command failed on {self.host.name} ({rep.result})",
                              cause="launch_command_failed", evidence=r.stderr[-2000:])
        rec.pid, rec.pgid, rec.start_ticks = rep.pid, rep.pgid, rep.start_ticks
        rec.boot_id, rec.cmdline_sha256 = rep.boot_id, rep.cmdline_sha256
        self.on_progress(f"{profile}: launched PID {rec.pid}, log {log_path}")
        return rec

    # -- readiness ----------------------------------------------------------------------------------------

    def poll(self, rec: process.ServerRecord, offset: int) -> Polled:
        """(process alive, log text from byte ``offset``, bytes it holds) in one round trip; at most CHUNK bytes
        of log (1 MiB), sent as base64 (hex from ``od`` on a host without ``base64``) so the byte offset stays
        exact."""
        cmd = (f"cat /proc/{int(rec.pid)}/stat 2>/dev/null; echo; echo --log--; "
               f"tail -c +{int(offset) + 1} {shlex.quote(rec.log_path)} 2>/dev/null | head -c {CHUNK} | {_ENCODE}")
        return _parse_poll(self._run(cmd).stdout)

    def follow(self, rec: process.ServerRecord) -> LogStream:
        """Start following the server's log: one exec session (``follow.sh``) for the server's whole life, which
        ends by itself once the server and its process group are gone. Pass it to :meth:`wait_ready`, watch it
        while sampling, and take the log text from it after :meth:`stop` (``wait_end``). The host side records
        the server's children when the ready line is written."""
        return LogStream(self.c, rec.log_path, rec.pid, workdir=self.workdir, start_ticks=rec.start_ticks,
                         python=self.python)

    def wait_ready(self, rec: process.ServerRecord, *, timeout_s: float,
                   health: Callable[[], bool] | None = None, stream: LogStream | None = None) -> WaitOutcome:
        """Follow the log until the ready line (then poll ``health()`` until True), a crash, or the deadline.

        The log is streamed (``stream``, from :meth:`follow`; without one, a stream is opened here and stopped
        before returning, one more round trip), so the ready line is known within a few ms of being written,
        over SSH too, with no round trip on that path. When the stream ends unexpectedly (the server died, the SSH connection dropped under
        it, or the host's tail cannot follow a file) one poll tells which; if the server lives, the log is
        polled every 0.1 s from the last byte offset. Returns Ready, Crashed (process gone, or a fatal
        signature: cause, hint, last 30 lines) or TimedOut."""
        own = stream is None
        if stream is None:
            stream = self.follow(rec)
        try:
            return self._wait_ready(rec, stream, timeout_s, health)
        finally:
            if own:  # now, not in a thread: a server left running (`launch`) must not keep a follower
                stream.close()

    def _wait_ready(self, rec: process.ServerRecord, stream: LogStream, timeout_s: float,
                    health: Callable[[], bool] | None) -> WaitOutcome:
        watch = _Watch(self, rec, timeout_s, health)
        offset = stream.offset
        while True:
            new = stream.read(0.05)
            if stream.ended:
                new += stream.drain()
                offset = stream.offset + stream.nbytes
                alive, more, n = self.poll(rec, offset)  # dead server, dropped connection, or a tail that cannot -f
                offset += n
                outcome = watch.step(new + more, alive=alive)
                if outcome is not None:
                    return self._ready(rec, outcome, stream=None)
                break
            outcome = watch.step(new, alive=True)
            if outcome is not None:
                return self._ready(rec, outcome, stream=stream)
        log.info("following the log on %s by polling (the log stream ended while the server lives: no tail -f "
                 "there, or the connection dropped)", self.host.name)
        while True:
            time.sleep(POLL_S)
            alive, new, n = self.poll(rec, offset)
            offset += n
            if not alive:
                new += self.poll(rec, offset).text
            outcome = watch.step(new, alive=alive)
            if outcome is not None:
                return self._ready(rec, outcome, stream=None)

    def _ready(self, rec: process.ServerRecord, outcome: WaitOutcome, *, stream: LogStream | None) -> WaitOutcome:
        """On Ready, remember the server's children (a scheduler may later leave the process group): the log
        stream's host side recorded them before passing the ready line on; a polled wait records them now."""
        if outcome.ok:
            if stream is None:
                process.record_children(self.c, self.workdir, rec)
            elif stream.children is not None:
                rec.children = stream.children
        return outcome

    # -- logs ---------------------------------------------------------------------------------------------

    def read_log(self, log_path: str, max_bytes: int = 50 << 20) -> str:
        """The log's text (the last ``max_bytes`` bytes), or '' if missing."""
        r = self._run(f"tail -c {int(max_bytes)} {shlex.quote(log_path)} 2>/dev/null")
        return r.stdout

    def read_log_tail(self, log_path: str, lines: int = TAIL_LINES) -> list[str]:
        r = self._run(f"tail -n {int(lines)} {shlex.quote(log_path)} 2>/dev/null")
        return r.stdout.splitlines()


class _Watch:
    """The judgement part of wait_ready: accumulate log text, report milestones, decide the outcome."""

    def __init__(self, lc: ServerLifecycle, rec: process.ServerRecord, timeout_s: float,
                 health: Callable[[], bool] | None):
        self.lc, self.rec, self.timeout_s, self.health = lc, rec, timeout_s, health
        self.t0 = time.monotonic()
        self.text = ""
        self.seen: dict[str, float] = {}  # milestone -> seconds after the wait started when first seen
        self.cls: LogClassification | None = None

    def step(self, new: str, *, alive: bool) -> WaitOutcome | None:
        """Take new log text and the process state; return an outcome, or None to keep waiting."""
        if new:
            self.text += new
            # judge complete lines only: a fatal line read half-written can match a generic signature
            # before its end shows the specific cause
            self.cls = classify_log(self.text if not alive else self.text[: self.text.rfind("\n") + 1])
            for m in self.cls.milestones:
                if m.name not in self.seen:
                    self.seen[m.name] = round(time.monotonic() - self.t0, 3)
                    self.lc.on_progress(f"{self.rec.profile}: {m.name} ({self.seen[m.name]:.1f} s)")
        elapsed = time.monotonic() - self.t0
        cls = classify_log(self.text) if not alive else (self.cls or classify_log(""))
        kw = dict(profile=self.rec.profile, elapsed_s=elapsed,
                  milestones=[{"name": k, "seen_s": v} for k, v in self.seen.items()],
                  log_tail=self.text.splitlines()[-TAIL_LINES:])
        # before the ready line: a failed bind (signatures.HTTP_BIND_FAILED) is fatal even when a ready line
        # follows (the warmup reached whoever holds the port)
        if cls.is_fatal:
            return Crashed(cause=cls.cls, hint=cls.hint, fatal_line=cls.fatal_line, **kw)
        if not alive:
            return Crashed(cause="process_exited", hint="the server process exited; read the log tail",
                           fatal_line=None, **kw)
        if READY_LINE in self.text and (self.health is None or self.health()):
            return Ready(cause="ready", **kw)
        if elapsed >= self.timeout_s:
            return TimedOut(cause="timed_out", hint=f"not ready after {self.timeout_s:.0f} s (last state: "
                                                    f"{cls.cls}); raise timeouts.ready_s or read the log", **kw)
        return None


def raise_for_outcome(outcome: WaitOutcome) -> None:
    """Turn a Crashed/TimedOut outcome into a LaunchError with the log tail as evidence."""
    if not outcome.ok:
        raise LaunchError(outcome.describe(), outcome=outcome, evidence="\n".join(outcome.log_tail))
