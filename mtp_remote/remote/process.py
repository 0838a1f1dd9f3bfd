"""The server we started: its record on the host, the identity check, and a safe stop.

We keep ``<workdir>/server.json`` (pid, pgid, start time in clock ticks, command line, profile, port, log
path, run id). A process is ours only if ``/proc/<pid>`` shows the recorded start time *and* command line;
a PID reused by someone else is never signalled. Stop sends SIGTERM to the process group (SGLang drains
in-flight requests), waits, sends SIGKILL to the group, waits until the group is gone, then waits until the
GPU memory its processes held is released (nvidia-smi no longer lists them) — polling, never a fixed
sleep. Nothing here matches processes by name: no ``pkill -f``, no ``killall``.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from ..errors import RemoteError, StopError
from . import facts
from .commands import signal_group_command, signal_pid_command, write_file_command

log = logging.getLogger(__name__)

RECORD = "server.json"
PIDFILE = "server.pid"
POLL_S = 0.1


@dataclass
class ServerRecord:
    """What we know of a server we launched. ``start_ticks``: /proc start time, clock ticks after boot."""

    pid: int
    pgid: int
    start_ticks: int
    cmdline: list[str]
    profile: str
    port: int
    log_path: str
    run_id: str
    started_at: float  # epoch seconds, local clock of the driver
    argv_masked: list[str] = field(default_factory=list)
    children: list[list[int]] = field(default_factory=list)  # [[pid, start_ticks]] of its descendants when ready

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> "ServerRecord":
        data = json.loads(text)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class StopResult:
    """Outcome of one stop. Durations in seconds; memory in MiB."""

    pid: int
    found: str  # "running" | "group-only" | "gone" | "not-ours" | "none"
    signals: list[str] = field(default_factory=list)
    members: list[int] = field(default_factory=list)
    exit_s: float = 0.0
    gpu_release_s: float = 0.0
    gpu_mib_held: int = 0  # held by the group's processes just before the stop
    log_path: str | None = None
    kill_reason: str = ""  # why SIGTERM was not enough (the drain bound and what the server's log said)

    def describe(self) -> str:
        if self.found == "none":
            return "no server recorded"
        if self.found == "not-ours":
            return f"PID {self.pid} is not the server we started (PID reused); not signalled"
        if self.found == "gone":
            return f"server PID {self.pid} had already exited"
        sig = "+".join(self.signals) or "no signal"
        why = f" ({self.kill_reason})" if self.kill_reason else ""
        return (f"stopped PID {self.pid} ({len(self.members)} processes) with {sig} in {self.exit_s:.1f} s{why}; "
                f"GPU memory ({self.gpu_mib_held} MiB) released after {self.gpu_release_s:.1f} s")


def _run(c, cmd: str, *, warn: bool = True):
    return c.run(cmd, hide=True, warn=warn, in_stream=False)


def read_record(c, workdir: str) -> ServerRecord | None:
    """The record of the server we last launched on this host, or None."""
    r = _run(c, f"cat {shlex.quote(workdir + '/' + RECORD)} 2>/dev/null")
    if r.exited != 0 or not r.stdout.strip():
        return None
    try:
        return ServerRecord.from_json(r.stdout)
    except (ValueError, TypeError, KeyError):
        log.warning("unreadable %s/%s; ignoring it", workdir, RECORD)
        return None


def write_record(c, workdir: str, rec: ServerRecord) -> None:
    """Write server.json and server.pid atomically (temp file + mv)."""
    for path, content in ((f"{workdir}/{RECORD}", rec.to_json()), (f"{workdir}/{PIDFILE}", f"{rec.pid}\n")):
        r = _run(c, write_file_command(path, content).text)
        if r.exited != 0:
            raise RemoteError(f"cannot write {path}", command=f"write {path}", exit_code=r.exited,
                              output=r.stderr)


def remove_record(c, workdir: str) -> None:
    _run(c, f"rm -f {shlex.quote(workdir + '/' + RECORD)} {shlex.quote(workdir + '/' + PIDFILE)}")


def record_children(c, workdir: str, rec: ServerRecord) -> None:
    """Remember the server's descendants (PID and start time): a scheduler that leaves the process group
    (an orphan) is still ours and must not outlive a stop."""
    kids = []
    for p in facts.descendants(facts.get_ps(c), rec.pid):
        info = facts.get_process_info(c, p.pid)
        if info is not None and info.alive:
            kids.append([p.pid, info.start_ticks])
    rec.children = kids
    write_record(c, workdir, rec)


def _stray_children(c, rec: ServerRecord) -> list[int]:
    """Recorded descendants still alive (same PID and start time) after their process group is gone."""
    out = []
    for pid, ticks in rec.children:
        info = facts.get_process_info(c, pid)
        if info is not None and info.alive and info.start_ticks == ticks:
            out.append(pid)
    return out


def is_ours(info: facts.ProcessInfo | None, rec: ServerRecord) -> bool:
    """True when ``info`` is the process we launched: same PID, start time and command line."""
    return (info is not None and info.pid == rec.pid and info.start_ticks == rec.start_ticks
            and list(info.cmdline) == list(rec.cmdline))


def wait_for_exec(c, pid: int, module: str, timeout_s: float = 10.0) -> facts.ProcessInfo | None:
    """Right after launch ``$!`` is still ``env``/``setsid``/``nohup`` on its way to exec python (their command
    lines contain ``module`` too); poll until the command line is ``PYTHON -m MODULE ...`` (or the process is
    gone). Returns the final ProcessInfo, or None if the process died."""
    deadline = time.monotonic() + timeout_s
    info = None
    while time.monotonic() < deadline:
        info = facts.get_process_info(c, pid)
        if info is None or not info.alive:
            return None
        if info.cmdline[1:3] == ("-m", module):  # python itself, not env/setsid/nohup on their way
            return info
        time.sleep(0.02)
    return info


def _wait_group_gone(c, pgid: int, timeout_s: float) -> tuple[bool, list[facts.PsEntry]]:
    deadline = time.monotonic() + timeout_s
    while True:
        members = facts.group_members(facts.get_ps(c), pgid)
        alive = [m for m in members if not m.args.startswith("[")]  # zombies show as [name] <defunct>
        if not alive:
            return True, []
        if time.monotonic() >= deadline:
            return False, alive
        time.sleep(POLL_S)


def wait_gpu_release(c, smi: str, pids: set[int], timeout_s: float,
                     on_progress: Callable[[str], None] | None = None) -> tuple[float, int]:
    """Poll nvidia-smi until none of ``pids`` holds GPU memory. Returns (seconds waited, MiB held at the
    first poll). Raises StopError when memory is still held after ``timeout_s``."""
    t0 = time.monotonic()
    first_mib = None
    next_report = 0.0
    while True:
        apps = [a for a in facts.get_gpu_apps(c, smi) if a.pid in pids]
        held = sum(a.used_memory_mib for a in apps)
        if first_mib is None:
            first_mib = held
        if not apps:
            return time.monotonic() - t0, first_mib
        waited = time.monotonic() - t0
        if on_progress and waited >= next_report:  # every 2 s, not every poll
            next_report = waited + 2.0
            on_progress(f"waiting for GPU memory release: {held} MiB held by PIDs "
                        f"{sorted(a.pid for a in apps)} ({waited:.1f} s)")
        if waited >= timeout_s:
            raise StopError(
                f"GPU memory still held after {timeout_s:.0f} s by PIDs {sorted(a.pid for a in apps)} "
                f"({held} MiB) — the processes exited but the driver has not released their memory",
                evidence="check with nvidia-smi; an orphaned scheduler may still be alive")
        time.sleep(POLL_S * 2)


_REMAINING = re.compile(r"Gracefully exiting\.\.\. Remaining number of requests (\d+)")


def drain_report(log_text: str) -> int | None:
    """The number of requests SGLang last said it was still draining (``Gracefully exiting... Remaining
    number of requests N``, logged every 5 s after a SIGTERM), or None when the log has no such line."""
    found = _REMAINING.findall(log_text)
    return int(found[-1]) if found else None


def _kill_reason(c, rec: ServerRecord, bound_s: float, drain_s: float | None) -> str:
    """Say why SIGTERM was not enough: the bound that ran out and what the server's drain reported."""
    name = "timeouts.drain_s" if drain_s is not None and bound_s == drain_s else "timeouts.term_s"
    tail = _run(c, f"tail -c 65536 {shlex.quote(rec.log_path)} 2>/dev/null").stdout
    left = drain_report(tail)
    said = (f"; the server still reported {left} request(s) in flight — SGLang's drain never ends once its "
            f"scheduler died with the SIGTERM" if left else "")
    return f"the drain did not finish within {bound_s:.0f} s ({name}){said}; escalated to SIGKILL"


def stop_server(c, workdir: str, smi: str, *, term_s: float = 60.0, gpu_release_s: float = 120.0,
                drain_s: float | None = None, on_progress: Callable[[str], None] | None = None) -> StopResult:
    """Stop the server recorded in ``workdir`` if (and only if) it is ours.

    SIGTERM to its process group, wait up to ``min(term_s, drain_s)`` seconds, SIGKILL to the group (saying
    why in ``kill_reason``: the bound that ran out, and the requests the log said were still draining), wait until no member
    is left, then wait up to ``gpu_release_s`` for their GPU memory to be released. A PID whose start time or
    command line differs from the record is someone else's: it is left alone and the stale record removed.
    If the leader is gone but members of its group remain (an orphaned scheduler), the group is still ours
    — Linux does not reuse a PID while it names a live process group — and is stopped.
    Raises StopError when the group survives SIGKILL or GPU memory is not released."""
    rec = read_record(c, workdir)
    if rec is None:
        return StopResult(pid=0, found="none")
    res = StopResult(pid=rec.pid, found="running", log_path=rec.log_path)
    info = facts.get_process_info(c, rec.pid)
    members = facts.group_members(facts.get_ps(c), rec.pgid)
    if info is not None and info.alive and not is_ours(info, rec):
        res.found = "not-ours"
        log.warning("PID %d is not our server (start time/command line differ); not signalling", rec.pid)
        remove_record(c, workdir)
        return res
    if info is None or not info.alive:
        if not members and not _stray_children(c, rec):
            res.found = "gone"
        else:
            res.found = "group-only"
    res.members = sorted(m.pid for m in members)
    pids = set(res.members) | {rec.pid}
    res.gpu_mib_held = sum(a.used_memory_mib for a in facts.get_gpu_apps(c, smi) if a.pid in pids)
    t0 = time.monotonic()
    if members:
        _run(c, signal_group_command(rec.pgid, "TERM").text)
        res.signals.append("TERM")
        bound = min(term_s, drain_s) if drain_s is not None else term_s
        if on_progress:
            on_progress(f"SIGTERM sent to process group {rec.pgid}; waiting up to {bound:.0f} s for it to drain")
        gone, left = _wait_group_gone(c, rec.pgid, bound)
        if not gone:
            res.kill_reason = _kill_reason(c, rec, bound, drain_s)
            if on_progress:
                on_progress(res.kill_reason)
            _run(c, signal_group_command(rec.pgid, "KILL").text)
            res.signals.append("KILL")
            gone, left = _wait_group_gone(c, rec.pgid, 10.0)
            if not gone:
                raise StopError(f"process group {rec.pgid} survived SIGKILL: PIDs {[m.pid for m in left]}")
    strays = _stray_children(c, rec)
    if strays:  # a child that left the group (setsid) survived: ours by PID + start time, so SIGKILL it
        if on_progress:
            on_progress(f"our server's children {strays} left its process group and survived; SIGKILL by PID")
        for pid in strays:
            _run(c, signal_pid_command(pid, "KILL").text)
        res.signals.append("KILL(orphans)")
        res.members = sorted(set(res.members) | set(strays))
        pids |= set(strays)
        deadline = time.monotonic() + 10
        while _stray_children(c, rec) and time.monotonic() < deadline:
            time.sleep(POLL_S)
    res.exit_s = time.monotonic() - t0
    res.gpu_release_s, _ = wait_gpu_release(c, smi, pids, gpu_release_s, on_progress)
    remove_record(c, workdir)
    return res


def signal_pids(c, pids: list[int], *, term_s: float = 30.0) -> list[int]:
    """``--force``: SIGTERM each listed PID (by number), then SIGKILL the ones still alive after ``term_s``.
    Returns the PIDs that needed SIGKILL."""
    for pid in pids:
        _run(c, signal_pid_command(pid, "TERM").text)
    deadline = time.monotonic() + term_s
    left = list(pids)
    while left and time.monotonic() < deadline:
        alive = {p.pid for p in facts.get_ps(c)}
        left = [p for p in left if p in alive]
        time.sleep(POLL_S)
    for pid in left:
        _run(c, signal_pid_command(pid, "KILL").text)
    return left
