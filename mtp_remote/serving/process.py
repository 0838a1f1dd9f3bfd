"""The ``process`` kind: a server as a process group on a host reached by SSH or locally.

Prepare the host, take the lock, stop what we left, launch a profile (``setsid nohup``, recorded in the workdir),
follow it until it is ready, watch it, stop it. One code path for every transport: all host access goes through
``c.run`` (Fabric Connection or Invoke Context), each step one host-side script (:mod:`mtp_remote.remote.hostscripts`)
or command (:mod:`mtp_remote.remote.logfile`, :mod:`mtp_remote.remote.lock`). Waiting for readiness follows the
server log (:mod:`mtp_remote.remote.follow`) and judges it (:mod:`.readiness`): :class:`~.base.Ready`,
:class:`~.base.Crashed` or :class:`~.base.TimedOut`. A ready line alone is not readiness: the caller then
confirms ``/health`` answers 200 (through the tunnel).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..config.inventory import HostConfig
from ..config.validation import check_run_id
from ..errors import ConfigError, LaunchError, LockError, RemoteError
from ..remote import connect as transport
from ..remote import facts, hostscripts, lock, lockbeat, logfile, process
from ..remote.commands import mask_argv, mask_log_secrets
from ..remote.follow import LogStream
from .base import Capabilities, WaitOutcome
from .readiness import follow_to_ready

log = logging.getLogger(__name__)

#: What a process group on a host we can see guarantees: our PID + start time + command line, SIGTERM's drain,
#: GPU release by PID (nvidia-smi lists the group's PIDs), the log followed as written.
PROCESS = Capabilities(kind="process", identity="pid", drain=True, gpu_release="pid", logs="stream", relaunch=True,
                       launch=True, lock=True, host_view=True)


def _local_pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ProcessServer:
    """The servers of one run on one host, as process groups (:class:`~.base.ServerKind`).

    ``c`` is the transport; ``python`` the remote python; ``workdir`` the remote work directory (``~``
    allowed); ``on_progress(msg)`` receives one-line progress messages. Raises ConfigError for a run id that
    cannot name a file."""

    capabilities = PROCESS

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

    def _judge_lock(self, owner: str, rep: hostscripts.WorkdirReport, stale_s: float = 6 * 3600,
                    rounds: int = 3) -> None:
        """Given the workdir step's lock report: done when acquired, else take a stale lock over or raise. A lock
        released while it was judged is linked anew, up to ``rounds`` workdir steps."""
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
            out = lock.take_over(self.c, path, seen_sha, content)
            if out.startswith("acquired"):
                what = ("a corrupt lock" if corrupt else
                        f"a stale lock ({' '.join(cur[:2])}, {'no heartbeat for ' if beating else ''}{age:.0f} s")
                self.on_progress(f"took over {what}{', its driver is gone' if dead_local else ''}"
                                 f"{'' if corrupt else ')'}")
                self._beat(path)
                return
            if out.startswith("gone"):  # released while we judged it: free, so linked anew
                if rounds > 1:
                    self._judge_lock(owner, self._workdir_step(owner), stale_s, rounds - 1)
                    return
                break
            _, seen_sha, seen = (out.split("\n", 2) + ["", ""])[:3]
            seen, old, beat_age = seen.strip(), False, None
        raise LockError(f"could not take the lock {path}: it keeps changing hands", host=self.host.name)

    def reachable(self) -> bool:
        """Whether the host still answers on this connection (an SSH keepalive within its bound; a local host
        always): a silent connection is closed as dropped (:func:`~mtp_remote.remote.connect.responsive`)."""
        return transport.responsive(self.c)

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
        lock.release(self.c, self.workdir, self.run_id)

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

    def find_leftover(self) -> process.ServerRecord | None:
        """The server recorded in the workdir by this run on this port when it is still the process we started
        (PID, start time, command line) and alive; None otherwise. One round trip, two when the record is ours."""
        rec = process.read_record(self.c, self.workdir)
        if rec is None or rec.run_id != self.run_id or rec.port != self.host.port:
            return None
        info = facts.get_process_info(self.c, rec.pid)
        return rec if info is not None and info.alive and process.is_ours(info, rec) else None

    def launch(self, profile: str, argv: list[str], env: dict[str, str], *,
               exec_wait_s: int = 10) -> process.ServerRecord:
        """Start the server detached and record it — one host-side step (``launch.sh``): port check, the level
        of its GPUs' memory (``server.gpu``, what the stop waits to see again), start
        (``setsid nohup``), wait for exec, identity read once (PGID == PID, start time, command-line hash),
        record written (``server.ident``, ``server.json``) before the step ends.

        The environment travels on stdin into a 0600 file that only the server's launching subshell reads and
        that is removed before the server runs: no secret on any argv (``--api-key`` excepted: SGLang reads
        it only from its command line). Raises LaunchError when the port is busy (SGLang itself would notice
        only after loading the weights), the process dies at once, or the record cannot be written (then the
        server just started is SIGKILLed, so no untracked server is left)."""
        log_path = self.log_path(profile)
        entry = self.host.entry_words(self.python)
        masked = mask_argv(argv)
        rec = process.ServerRecord(pid=0, pgid=0, start_ticks=0, cmdline=[self.python, *entry, *masked],
                                   profile=profile, port=self.host.port, log_path=log_path, run_id=self.run_id,
                                   started_at=time.time(), argv_masked=masked)
        stdin = json.dumps(rec.static_fields()) + "\n" + hostscripts.env_file_text(env)
        smi = shlex.split(self.smi) if self.smi else []
        gpus = " ".join(str(i) for i in self.host.gpus) if self.host.gpus else "-"
        args = [self.workdir, log_path, self.host.port, exec_wait_s, gpus, len(smi), *smi, self.python, len(entry),
                *entry, *argv]
        log.info("launch on %s: %s", self.host.name, " ".join(shlex.quote(a) for a in rec.cmdline))
        r = hostscripts.run_script(self.c, "launch.sh", args, stdin=stdin)
        try:
            rep = hostscripts.parse_launch(r.stdout)
        except ValueError as e:
            raise LaunchError(f"{profile}: {e}", cause="identity_refused") from None
        self._raise_for_launch(profile, rep, r.stderr)
        rec.pid, rec.pgid, rec.start_ticks = rep.pid, rep.pgid, rep.start_ticks
        rec.boot_id, rec.cmdline_sha256 = rep.boot_id, rep.cmdline_sha256
        self.on_progress(f"{profile}: launched PID {rec.pid}, log {log_path}")
        return rec

    def _raise_for_launch(self, profile: str, rep: hostscripts.LaunchReport, stderr: str) -> None:
        """LaunchError (with its cause) for every ``launch.sh`` result but ok."""
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
                              cause="launch_command_failed", evidence=stderr[-2000:])

    # -- reaching, following, readiness -------------------------------------------------------------------

    @contextmanager
    def reach(self) -> Iterator[transport.Tunnel]:
        """The server's port on the host's 127.0.0.1: an SSH local forward, or the port itself on a local host
        (:func:`mtp_remote.remote.connect.open_tunnel`)."""
        with transport.open_tunnel(self.c, self.host) as tun:
            yield tun

    def poll(self, rec: process.ServerRecord, offset: int) -> logfile.Polled:
        """(process alive, log text from byte ``offset``, bytes it holds) in one round trip; at most
        :data:`~mtp_remote.remote.logfile.CHUNK` bytes of log (1 MiB), sent as base64 (hex from ``od`` on a host
        without ``base64``) so the byte offset stays exact."""
        return logfile.poll(self.c, rec.pid, rec.log_path, offset)

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
        over SSH too, with no round trip on that path. When the stream ends unexpectedly (the server died, the
        SSH connection dropped under it, or the host's tail cannot follow a file) one poll tells which; if the
        server lives, the log is polled every 0.1 s from the last byte offset
        (:func:`~.readiness.follow_to_ready`). Returns Ready, Crashed (process gone, or a fatal signature: cause,
        hint, last 30 lines) or TimedOut."""
        own = stream is None
        if stream is None:
            stream = self.follow(rec)
        try:
            outcome, streamed = follow_to_ready(self, rec, stream, timeout_s, health)
            return self._ready(rec, outcome, stream=stream if streamed else None)
        finally:
            if own:  # now, not in a thread: a server left running (`launch`) must not keep a follower
                stream.close()

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
        return logfile.read_log(self.c, log_path, max_bytes)

    def status(self) -> tuple[process.ServerRecord | None, str]:
        """(the server recorded in the workdir, its state): "none", "running" (alive, and ours by PID + start
        time + command line), "not running" or "not ours". Read-only: two round trips at most."""
        rec = process.read_record(self.c, self.workdir)
        if rec is None:
            return None, "none"
        info = facts.get_process_info(self.c, rec.pid)
        if info is None or not info.alive:
            return rec, "not running"
        return rec, "running" if process.is_ours(info, rec) else "not ours"
