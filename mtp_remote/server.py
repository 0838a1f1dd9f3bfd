"""ServerLifecycle: prepare the host, stop what we left, launch a profile, wait until it is ready, stop it.

One code path for every transport: all host access goes through ``c.run`` (Fabric Connection or Invoke
Context). Waiting for readiness follows the server log from a byte offset and classifies it with the same
signature classifier as ``classify-log``; it has three outcomes — :class:`Ready`, :class:`Crashed` (process
gone or a fatal line, with the cause, a hint and the last log lines) and :class:`TimedOut`. A ready line
alone is not readiness: the caller then confirms ``/health`` answers 200 (through the tunnel).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import time
from dataclasses import dataclass, field
from typing import Callable

from .config import HostConfig
from .errors import LaunchError, LockError, RemoteError
from .remote import facts, process
from .remote.commands import Command, launch_command, mask_argv
from .remote.follow import LogStream
from .remote.logs import READY_LINE, LogClassification, classify_log

log = logging.getLogger(__name__)

TAIL_LINES = 30
#: uvicorn's bind failure as SGLang 0.5.9 logs it. SGLang does not exit after it (its warmup request waits on
#: whatever holds the port), and when a healthy server holds the port that warmup succeeds against it and the
#: log goes on to print the ready line: the line is fatal whatever follows.
_BIND_FAILED = re.compile(r"\[Errno 98\] error while attempting to bind on address \('[^']*', (\d+)\)"
                          r".*address already in use")
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


def _parse_poll(output: str) -> tuple[bool, str]:
    """Split one poll's output into (process alive, new log text)."""
    head, _, text = output.partition("--log--\n")
    head = head.strip()
    alive = False
    if ")" in head:
        state = head[head.rindex(")") + 2:].split()[0]
        alive = state not in ("Z", "X")
    return alive, text


class ServerLifecycle:
    """Lifecycle of the servers of one run on one host.

    ``c`` is the transport; ``python`` the remote python; ``workdir`` the remote work directory (``~``
    allowed); ``on_progress(msg)`` receives one-line progress messages."""

    def __init__(self, c, host: HostConfig, *, python: str, workdir: str, run_id: str,
                 on_progress: Callable[[str], None] | None = None):
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

    def _run(self, cmd: str | Command, *, warn: bool = True):
        text = cmd.text if isinstance(cmd, Command) else cmd
        return self.c.run(text, hide=True, warn=warn, in_stream=False)

    def prepare(self) -> None:
        """Resolve ``~`` in the workdir against the remote $HOME and create it (mode 0700) with logs/."""
        home = facts.get_home(self.c)
        self.workdir = facts.resolve_path(home, self.workdir)
        wd = shlex.quote(self.workdir)
        r = self._run(f"mkdir -p {wd}/logs/{shlex.quote(self.run_id)} && chmod 700 {wd}")
        if r.exited != 0:
            raise RemoteError(f"cannot create workdir {self.workdir}", host=self.host.name,
                              command=f"mkdir -p {self.workdir}", exit_code=r.exited, output=r.stderr)

    def log_path(self, profile: str) -> str:
        return f"{self.workdir}/logs/{self.run_id}/{profile}.log"

    # -- lock --------------------------------------------------------------------------------------------

    def acquire_lock(self, owner: str, stale_s: float = 6 * 3600) -> None:
        """Take ``<workdir>/lock`` (noclobber create) as ``owner`` (``user@machine``).

        The lock holds owner, run id, epoch seconds and the driver's PID. It is taken over when it is older
        than ``stale_s`` seconds, or when it was taken on this same machine by a driver process that no
        longer exists (a run that was killed). Raises LockError naming the holder otherwise."""
        path = shlex.quote(f"{self.workdir}/lock")
        content = shlex.quote(f"{owner} {self.run_id} {int(time.time())} {os.getpid()}\n")
        r = self._run(f"(set -C; printf '%s' {content} > {path}) 2>/dev/null")
        if r.exited == 0:
            return
        cur = self._run(f"cat {path} 2>/dev/null").stdout.strip().split()
        age = time.time() - float(cur[2]) if len(cur) >= 3 and cur[2].isdigit() else 0.0
        dead_local = (len(cur) >= 4 and cur[0] == owner and cur[3].isdigit()
                      and not _local_pid_alive(int(cur[3])))
        if cur and age < stale_s and not dead_local:
            raise LockError(f"host is locked by {cur[0]} (run {cur[1] if len(cur) > 1 else '?'}, "
                            f"{age:.0f} s ago); wait for it or remove {self.workdir}/lock if that run is dead",
                            host=self.host.name)
        self.on_progress(f"taking over a stale lock ({' '.join(cur[:2])}, {age:.0f} s old"
                         f"{', its driver is gone' if dead_local else ''})")
        self._run(f"printf '%s' {content} > {path}")

    def release_lock(self) -> None:
        path = shlex.quote(f"{self.workdir}/lock")
        self._run(f"grep -q {shlex.quote(self.run_id)} {path} 2>/dev/null && rm -f {path}")

    # -- stop / launch -------------------------------------------------------------------------------------

    def stop(self, *, term_s: float = 60.0, gpu_release_s: float = 120.0,
             drain_s: float | None = None) -> process.StopResult:
        """Stop the server we started on this host (if any); see :func:`process.stop_server`."""
        res = process.stop_server(self.c, self.workdir, self.smi, term_s=term_s, gpu_release_s=gpu_release_s,
                                  drain_s=drain_s, on_progress=self.on_progress)
        if res.found != "none":
            self.on_progress(res.describe())
        return res

    def launch(self, profile: str, argv: list[str], env: dict[str, str]) -> process.ServerRecord:
        """Check the port is free, start the server detached, record it. Raises LaunchError when the port is
        busy (SGLang itself would notice only after loading the weights) or the process dies at once."""
        if facts.port_in_use(self.c, self.host.port):
            raise LaunchError(
                f"port {self.host.port} on {self.host.name} is already in use; a server we did not start may "
                f"be running (see `mtp-remote status`) — stop it or choose another port",
                cause="port_in_use")
        log_path = self.log_path(profile)
        cmd = launch_command(python=self.python, module=self.host.engine_module, argv=argv,
                             log_path=log_path, workdir=self.workdir, env=env)
        log.info("launch on %s: %s", self.host.name, cmd.masked)
        r = self._run(cmd)
        out = r.stdout.strip().splitlines()
        if r.exited != 0 or not out or not out[-1].isdigit():
            raise LaunchError(f"launch command failed on {self.host.name}", cause="launch_command_failed",
                              evidence=f"command: {cmd.masked}\n{r.stderr[-2000:]}")
        pid = int(out[-1])
        info = process.wait_for_exec(self.c, pid, self.host.engine_module)
        if info is None:
            tail = self.read_log_tail(log_path)
            raise LaunchError(f"{profile}: server exited immediately", cause="process_exited",
                              evidence="\n".join(tail) or "(empty log)")
        rec = process.ServerRecord(pid=pid, pgid=info.pgid, start_ticks=info.start_ticks,
                                   cmdline=list(info.cmdline), profile=profile, port=self.host.port,
                                   log_path=log_path, run_id=self.run_id, started_at=time.time(),
                                   argv_masked=mask_argv(argv))
        process.write_record(self.c, self.workdir, rec)
        self.on_progress(f"{profile}: launched PID {pid}, log {log_path}")
        return rec

    # -- readiness ----------------------------------------------------------------------------------------

    def poll(self, rec: process.ServerRecord, offset: int) -> tuple[bool, str]:
        """(process alive, log text from byte ``offset``) in one round trip."""
        cmd = (f"cat /proc/{int(rec.pid)}/stat 2>/dev/null; echo; echo --log--; "
               f"tail -c +{offset + 1} {shlex.quote(rec.log_path)} 2>/dev/null | head -c {CHUNK}")
        return _parse_poll(self._run(cmd).stdout)

    def wait_ready(self, rec: process.ServerRecord, *, timeout_s: float,
                   health: Callable[[], bool] | None = None) -> WaitOutcome:
        """Follow the log until the ready line (then poll ``health()`` until True), a crash, or the deadline.

        The log is streamed (:class:`~mtp_remote.remote.follow.LogStream`, one ``tail -F --pid``), so the ready
        line is seen within ~0.1 s even over SSH; hosts whose tail cannot do that are polled every 0.1 s from
        the last byte offset. Returns Ready, Crashed (process gone, or a fatal signature: cause, hint, last 30
        lines) or TimedOut."""
        watch = _Watch(self, rec, timeout_s, health)
        with LogStream(self.c, rec.log_path, rec.pid) as stream:
            while True:
                new = stream.read(0.05)
                if not stream.supported:
                    break
                ended = stream.ended
                if ended:
                    time.sleep(0.05)  # let the reader thread hand over the last bytes
                    new += stream.read(0)
                outcome = watch.step(new, alive=not ended)
                if outcome is not None:
                    return self._ready(rec, outcome)
        log.info("tail -F --pid not available on %s; polling the log", self.host.name)
        offset = len(watch.text.encode("utf-8", "surrogateescape"))
        while True:
            alive, new = self.poll(rec, offset)
            offset += len(new.encode("utf-8", "surrogateescape"))
            if not alive:
                new += self.poll(rec, offset)[1]
            outcome = watch.step(new, alive=alive)
            if outcome is not None:
                return self._ready(rec, outcome)
            time.sleep(POLL_S)

    def _ready(self, rec: process.ServerRecord, outcome: WaitOutcome) -> WaitOutcome:
        """On Ready, remember the server's children (a scheduler may later leave the process group)."""
        if outcome.ok:
            process.record_children(self.c, self.workdir, rec)
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
        bind = _BIND_FAILED.search(self.text)
        if bind:  # before the ready line: after a failed bind the warmup may reach whoever holds the port
            return Crashed(cause="port_in_use", fatal_line=bind.group(0), hint=(
                f"the HTTP port was taken when the server tried to bind it; SGLang then neither serves nor "
                f"exits (it is stopped now). Find what holds port {bind.group(1)} (`mtp-remote status`)"), **kw)
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
