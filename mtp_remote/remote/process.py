"""The server we started: its record on the host, the identity check, and a safe stop.

Launch, stop and readiness bookkeeping are each one host-side script (:mod:`.hostscripts`): one round
trip each, over SSH as locally. The record in the workdir is ``server.ident`` (``pid pgid start_ticks
boot_id cmdline_sha256``, read once after exec: stat before and after the command line agree, PGID == PID),
``server.json`` (those fields plus profile, masked command line, port, log path, run id) and, once ready,
``server.children`` (``pid start_ticks`` of its descendants). A process is ours only with the recorded start
time, boot and command-line hash; a PID reused by someone else is never signalled. Stop sends SIGTERM to the
process group (SGLang drains in-flight requests), waits, sends SIGKILL, SIGKILLs recorded children that left
the group, then waits until nvidia-smi lists none of them and the server's GPUs are back to their memory level
before the launch (``server.gpu``: inside a container the driver lists the host's PIDs, or none, so the PID
match alone would say "released" at once) — polling on the host, never a fixed sleep. A group
not led by the recorded PID, or one that holds the caller (this shell or any ancestor: the tool itself, its
SSH session), is never signalled. Nothing here matches processes by name: no ``pkill -f``, no ``killall``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ..errors import RemoteError, StopError
from ..files import loads_json
from . import facts, hostscripts
from .commands import mask_argv

log = logging.getLogger(__name__)

RECORD = "server.json"
PIDFILE = "server.pid"
IDENT = "server.ident"
CHILDREN = "server.children"
GPU_LEVEL = "server.gpu"  # "INDEX MIB" lines: the level of the server's GPUs before its launch (launch.sh)
POLL_S = 0.1


class _NamedByPid:
    """A server named by its PID: ``ident`` in file names (``1234``), ``label`` in messages (``PID 1234``)."""

    pid: int

    @property
    def ident(self) -> str:
        return str(self.pid)

    @property
    def label(self) -> str:
        return f"PID {self.pid}"


@dataclass
class ServerRecord(_NamedByPid):
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
    boot_id: str = ""  # /proc/sys/kernel/random/boot_id at launch
    cmdline_sha256: str = ""  # sha256 of /proc/PID/cmdline (NUL-separated) at launch; "" if unknown

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> ServerRecord:
        data = loads_json(text)
        if "cmdline" in data:  # records from before masking kept the full command line
            data["cmdline"] = mask_argv([str(a) for a in data["cmdline"]])
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def static_fields(self) -> dict:
        """What launch.sh appends after the identity it reads on the host (one JSON object, no secrets)."""
        d = asdict(self)
        for k in ("pid", "pgid", "start_ticks", "boot_id", "cmdline_sha256"):
            d.pop(k)
        return d


@dataclass
class StopResult(_NamedByPid):
    """Outcome of one stop. Durations in seconds; memory in MiB."""

    pid: int
    found: str  # "running" | "group-only" | "gone" | "not-ours" | "refused" | "none"
    signals: list[str] = field(default_factory=list)
    members: list[int] = field(default_factory=list)
    exit_s: float = 0.0
    gpu_release_s: float = 0.0
    gpu_mib_held: int = 0  # held by the group's processes just before the stop
    gpu_level_mib: int = 0  # the server's GPUs above their level before the launch, by memory no PID here explains
    gpu_release_by: str = "pid"  # "level": the release wait ended when the GPUs were back to their level
    log_path: str | None = None
    reason: str = ""
    kill_reason: str = ""  # why SIGTERM was not enough (the drain bound and what the server's log said)
    unlocked: bool = False  # the run's host lock was released in the same step (``unlock=``)
    strangers: list[int] = field(default_factory=list)  # in the old process group, not ours: never signalled
    gpu_unchecked: bool = False  # nvidia-smi did not answer within its bound (a wedged driver?)

    def describe(self) -> str:
        return self._describe() + (f"; PIDs {self.strangers} hold its old process group number but are not ours "
                                   f"(started before it, or another command line): left alone"
                                   if self.strangers else "")

    def _describe(self) -> str:
        if self.found == "none":
            return "no server recorded"
        if self.found == "not-ours":
            return f"PID {self.pid} is alive but is not the server we started (PID reused); not signalled"
        if self.found == "refused":
            return f"PID {self.pid}: not signalled: {self.reason}; its record was dropped"
        if self.found == "gone":
            return f"server PID {self.pid} had already exited" + (f" ({self.reason})" if self.reason else "")
        sig = "+".join(self.signals) or "no signal"
        why = f" ({self.kill_reason})" if self.kill_reason else ""
        held = max(self.gpu_mib_held, self.gpu_level_mib)
        how = (" (held by processes this host cannot see: waited until the GPUs were back to their level before "
               "the launch)" if self.gpu_release_by == "level" else "")
        gpu = (f"GPU memory not checked: nvidia-smi did not answer within {facts.SMI_TIMEOUT_S:g} s (a wedged "
               f"driver?)" if self.gpu_unchecked else
               f"GPU memory ({held} MiB) released after {self.gpu_release_s:.1f} s{how}")
        return f"stopped PID {self.pid} ({len(self.members)} processes) with {sig} in {self.exit_s:.1f} s{why}; {gpu}"


def _run(c, cmd: str, *, warn: bool = True):
    return c.run(cmd, hide=True, warn=warn, in_stream=False)


def read_record_command(workdir: str) -> str:
    """Print server.json and server.children — each only when it is a file of ours (never through a symlink,
    never one another user planted)."""
    wd = shlex.quote(workdir)

    def ours(name: str) -> str:
        f = f"{wd}/{name}"
        return f"{{ [ -f {f} ] && [ ! -L {f} ] && [ -O {f} ] && cat {f}; }} 2>/dev/null"

    return f"{ours(RECORD)}; printf '\\n--children--\\n'; {ours(CHILDREN)}"


def parse_record(output: str) -> ServerRecord | None:
    """server.json (+ server.children after ``--children--``) → ServerRecord, or None when absent/unreadable."""
    text, _, kids = output.partition("\n--children--\n")
    if not text.strip():
        return None
    try:
        rec = ServerRecord.from_json(text)
    except (ValueError, TypeError, KeyError):
        log.warning("unreadable server record; ignoring it")
        return None
    rows = [line.split() for line in kids.splitlines()]
    extra = [[int(r[0]), int(r[1])] for r in rows if len(r) == 2 and r[0].isdigit() and r[1].isdigit()]
    if extra:
        rec.children = extra
    return rec


def read_record(c, workdir: str) -> ServerRecord | None:
    """The record of the server we last launched on this host, or None (one round trip)."""
    return parse_record(_run(c, read_record_command(workdir)).stdout)


def write_record(c, workdir: str, rec: ServerRecord) -> None:
    """Write a record (server.ident, server.json, server.pid) atomically, content on stdin (never on an argv).
    Used by tests and tools that adopt a process; launch.sh writes its own record on the host."""
    wd = shlex.quote(workdir)
    ident = f"{rec.pid} {rec.pgid} {rec.start_ticks} {rec.boot_id or '-'} {rec.cmdline_sha256 or '-'}"
    script = (f"umask 077; set -C; rm -f {wd}/{RECORD}.tmp.$$ {wd}/{IDENT}.tmp.$$ {wd}/{PIDFILE}.tmp.$$; "
              f"IFS= read -r ident; cat > {wd}/{RECORD}.tmp.$$ && "
              f"printf '%s\\n' \"$ident\" > {wd}/{IDENT}.tmp.$$ && printf '%s\\n' {rec.pid} > {wd}/{PIDFILE}.tmp.$$ && "
              f"mv -f {wd}/{RECORD}.tmp.$$ {wd}/{RECORD} && mv -f {wd}/{IDENT}.tmp.$$ {wd}/{IDENT} && "
              f"mv -f {wd}/{PIDFILE}.tmp.$$ {wd}/{PIDFILE}")
    r = c.run(f"sh -c {shlex.quote(script)}", hide=True, warn=True, in_stream=hostscripts.WholeStdin(ident + "\n" + rec.to_json()))
    if r.exited != 0:
        raise RemoteError(f"cannot write {workdir}/{RECORD}", command="write server record", exit_code=r.exited,
                          output=r.stderr)


def remove_record(c, workdir: str) -> None:
    wd = shlex.quote(workdir)
    _run(c, f"rm -f {wd}/{RECORD} {wd}/{PIDFILE} {wd}/{IDENT} {wd}/{CHILDREN} {wd}/{GPU_LEVEL}")


def record_children(c, workdir: str, rec: ServerRecord) -> None:
    """Remember the server's descendants (PID and start time), one host-side step (children.sh): a scheduler
    that leaves the process group (an orphan) is still ours and must not outlive a stop."""
    r = hostscripts.run_script(c, "children.sh", [workdir, rec.pid, rec.start_ticks])
    ok, kids = hostscripts.parse_children(r.stdout)
    if ok:
        rec.children = kids
    else:
        log.warning("could not record the children of PID %d: %s", rec.pid, r.stdout.strip()[-200:])


def is_ours(info: facts.ProcessInfo | None, rec: ServerRecord) -> bool:
    """True when ``info`` is the process we launched: same PID and start time, and the same command line
    apart from secret values (masked on both sides) and argv[0] (a python wrapper may exec the real one)."""
    return (info is not None and info.pid == rec.pid and info.start_ticks == rec.start_ticks
            and mask_argv(list(info.cmdline))[1:] == mask_argv(list(rec.cmdline))[1:])


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


def _kill_reason(c, rec: ServerRecord, bound_s: float, drain_s: float | None, drain_name: str) -> str:
    """Say why SIGTERM was not enough: the bound that ran out and what the server's drain reported."""
    name = drain_name if drain_s is not None and bound_s == drain_s else "timeouts.term_s"
    tail = _run(c, f"tail -c 65536 {shlex.quote(rec.log_path)} 2>/dev/null").stdout
    left = drain_report(tail)
    said = (f"; the server still reported {left} request(s) in flight — SGLang's drain never ends once its "
            f"scheduler died with the SIGTERM" if left else "")
    return f"the drain did not finish within {bound_s:.0f} s ({name}){said}; escalated to SIGKILL"


def stop_server(c, workdir: str, smi: str, *, term_s: float = 60.0, gpu_release_s: float = 120.0,
                drain_s: float | None = None, on_progress: Callable[[str], None] | None = None,
                kill_s: float = 10.0, unlock: str | None = None,
                drain_name: str = "timeouts.drain_s") -> StopResult:
    """Stop the server recorded in ``workdir`` if (and only if) it is ours — one host-side step (stop.sh).

    SIGTERM to its process group, wait up to ``min(term_s, drain_s)`` seconds (SGLang's drain has no timeout),
    SIGKILL to the group (saying why in ``kill_reason``: the bound that ran out and the requests the log said
    were still draining), wait up to ``kill_s``,
    SIGKILL recorded children that left the group (same PID and start time), then wait up to
    ``gpu_release_s`` until nvidia-smi lists none of the group's or the recorded children's PIDs (matched
    through ``/proc/PID/status`` NSpid when the driver reports another PID namespace's) and the GPUs recorded
    at launch (``server.gpu``) are back within 256 MiB of their level then (memory held by PIDs this host
    cannot see; ``gpu_release_by`` "level" when that was the wait). A PID alive
    with another start time or command line is someone else's: left alone, the stale record dropped. If the
    leader is gone but members of its group or recorded children remain (an interrupted stop, an orphaned
    scheduler), they are still ours and are stopped and waited for. Progress lines reach ``on_progress`` as
    the host prints them. Raises StopError when the group survives SIGKILL or GPU memory is not released
    (the record is kept, so a retry waits on the same processes). ``unlock``: a run id whose host lock is
    removed in the same step when the stop ends well (``StopResult.unlocked``). ``drain_name``: what the kill
    reason calls ``drain_s`` when that bound ran out (the playbook field, or the shorter bound after an
    interrupt)."""
    smi_argv = shlex.split(smi) if smi else []
    bound = min(term_s, drain_s) if drain_s is not None else term_s
    r = hostscripts.run_script(c, "stop.sh", [workdir, max(1, math.ceil(bound)), int(kill_s), int(gpu_release_s),
                                              unlock or "-", *smi_argv],
                               on_progress=on_progress)
    rep = hostscripts.parse_stop(r.stdout)
    rec = None
    if rep.record_json:
        rec = parse_record(rep.record_json)
    found = "refused" if rep.refused else ("none" if rep.found in ("none", "unreadable") else rep.found)
    if rep.found == "unreadable":
        log.warning("unreadable %s/%s; dropped it", workdir, RECORD)
    if rep.found == "not-ours":
        log.warning("PID %d is not our server (start time/command line differ); not signalling", rep.pid)
    if rep.refused:
        log.warning("PID %d: %s; not signalling", rep.pid, rep.refused)
    res = StopResult(pid=rep.pid, found=found, signals=rep.signals,
                     members=sorted(set(rep.members) | set(rep.orphans)), exit_s=rep.exit_s,
                     gpu_release_s=rep.gpu_release_s, gpu_mib_held=rep.gpu_mib_held,
                     gpu_level_mib=rep.gpu_level_mib, gpu_release_by=rep.gpu_release_by,
                     log_path=rec.log_path if rec else None, reason=rep.refused or rep.reason,
                     unlocked=rep.unlocked, strangers=rep.strangers, gpu_unchecked=rep.gpu_unchecked)
    if rec is not None and "KILL" in rep.signals and "TERM" in rep.signals:
        res.kill_reason = _kill_reason(c, rec, bound, drain_s, drain_name)
        if on_progress:
            on_progress(res.kill_reason)
    if rep.error:
        raise StopError(rep.error, evidence="check with nvidia-smi and ps; the record is kept, run stop again")
    if r.exited != 0 and not rep.found:
        raise RemoteError("stop script failed", command="stop.sh", exit_code=r.exited, output=r.stderr)
    return res


def signal_pids(c, pids: list[int] | list[tuple[int, int | None]], *, term_s: float = 30.0,
                kill_s: float = 10.0) -> list[int]:
    """``--force``: SIGTERM each listed PID (by number, and only while it lives with the start time it was listed
    with, when known: ``(pid, start_ticks)`` pairs), wait up to ``term_s`` seconds, SIGKILL the survivors — one
    host-side step (signal.sh). Returns the PIDs that needed SIGKILL. Raises StopError when some survive
    SIGKILL ``kill_s`` seconds."""
    pairs = [(p, None) if isinstance(p, int) else p for p in pids]
    args: list[object] = [max(1, math.ceil(term_s)), max(1, math.ceil(kill_s))]
    for pid, start in pairs:
        args += [int(pid), "-" if start is None else int(start)]
    r = hostscripts.run_script(c, "signal.sh", args)
    ok, killed, survivors = hostscripts.parse_signal(r.stdout)
    if survivors:
        raise StopError(f"PIDs {survivors} survived SIGKILL", evidence="check with ps; run stop --force again")
    if ok:
        return killed
    raise RemoteError("signal script failed", command="signal.sh", exit_code=r.exited, output=r.stderr)
