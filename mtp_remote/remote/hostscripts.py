"""Host-side scripts: launch, stop and readiness bookkeeping, each one round trip, each output parsed purely.

A lifecycle step that used to be a conversation (``cat /proc/...`` twenty times, ``ps`` in a loop, one
nvidia-smi per poll) is one small POSIX sh script kept beside this module (``scripts/*.sh``, package data),
sent as ``sh -c <script> sh <args...>`` — every argument ``shlex.quote``d — through the same ``c.run`` for
the local transport (Invoke ``Context``) and SSH (Fabric ``Connection``). Scripts print ``key value`` lines
(``progress TEXT`` while they run, ``result ok`` or ``result <error>`` last); the ``parse_*`` functions turn
that output into typed reports and are tested on recorded outputs. Secrets never go on an argv: the
server's environment travels on the script's standard input (see :func:`env_file_text`).
"""

from __future__ import annotations

import io
import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ..config.validation import ENV_NAME, is_name
from ..errors import RemoteError
from .script_output import LaunchOutput, SignalOutput, StopOutput, WorkdirOutput, count

SCRIPT_DIR = Path(__file__).parent / "scripts"


@cache
def script_text(name: str) -> str:
    """``lib.sh`` + ``name`` with full-line comments dropped (they document the files, not the argv)."""
    lines = []
    for part in ("lib.sh", name):
        for line in (SCRIPT_DIR / part).read_text().splitlines():
            if not line.lstrip().startswith("#") and line.strip():
                lines.append(line)
    return "\n".join(lines) + "\n"


def script_command(name: str, args: Sequence[object]) -> str:
    """``sh -c '<lib.sh + name>' sh 'arg1' 'arg2' ...`` — the script and each argument quoted."""
    return f"sh -c {shlex.quote(script_text(name))} sh " + " ".join(shlex.quote(str(a)) for a in args)


def env_file_text(env: Mapping[str, str]) -> str:
    """The server's environment as one JSON object (``{"NAME": "value"}``): data that ``launch.sh``'s loader
    (the host's python, before it execs the server) reads with ``json.load``; no shell ever sources it.

    Raises ValueError for a name that is not a whole shell name (:func:`~mtp_remote.config.is_name` with
    ``ENV_NAME``; config validation refuses them earlier, the loader once more on the host) or a value with a
    NUL byte (no environment can hold one)."""
    for k, v in env.items():
        if not is_name(k, ENV_NAME) or "\0" in v:
            raise ValueError(f"environment variable {k!r} cannot be passed to the server")
    return json.dumps(dict(env)) + "\n"


class WholeStdin(io.StringIO):
    """An ``in_stream`` for ``c.run`` that hands over all its text at the first read.

    Invoke reads a non-terminal stream one byte per 10 ms loop (``bytes_to_read`` falls back to 1), which
    makes 700 bytes of stdin cost 7 s; this stream ignores the size asked for."""

    def read(self, size: int | None = -1) -> str:  # the size asked for is Invoke's guess: ignored
        return super().read()


class _LineSink(io.StringIO):
    """An out_stream for ``c.run``: hands each complete ``progress`` line to ``on_line`` as it arrives."""

    def __init__(self, on_line: Callable[[str], None]):
        super().__init__()
        self._buf = ""
        self._on_line = on_line

    def write(self, data: str) -> int:
        self._buf += data
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            if line.startswith("progress "):
                self._on_line(line[len("progress "):])
        return len(data)


#: The exit code of a host script that found a tool it needs missing (lib.sh ``need``: ``lacks TOOL``).
EXIT_LACKS = 2


def lacking_tool(exit_code: int | None, output: str) -> str | None:
    """The tool a host script said the host lacks (exit 2 and a ``lacks TOOL`` line), else None."""
    if exit_code != EXIT_LACKS:
        return None
    for line in output.splitlines():
        if line.startswith("lacks ") and len(line.split()) == 2:
            return line.split()[1]
    return None


def run_script(c, name: str, args: Sequence[object], *, stdin: str | None = None,
               on_progress: Callable[[str], None] | None = None):
    """Run one host script through ``c`` (one exec session). Returns Invoke/Fabric's Result. Raises RemoteError
    ``the host lacks TOOL`` when the script found a tool it needs missing (it checks them before anything:
    nothing was read, started or signalled)."""
    kw: dict = {"warn": True, "in_stream": WholeStdin(stdin) if stdin is not None else False}
    if on_progress is not None:
        kw.update(hide=False, out_stream=_LineSink(on_progress), err_stream=io.StringIO())
    else:
        kw.update(hide=True)
    r = c.run(script_command(name, args), **kw)
    tool = lacking_tool(r.exited, r.stdout)
    if tool:
        raise RemoteError(f"the host lacks {tool}: mtp-remote's host scripts need it ({name}); install it there "
                          f"(in a container: in its image, or mount it)", command=name, exit_code=r.exited,
                          output=r.stdout)
    return r


def _pairs(output: str) -> tuple[dict[str, str], list[str]]:
    """``key value`` lines → (last value per key, all lines)."""
    kv: dict[str, str] = {}
    lines = output.splitlines()
    for line in lines:
        key, _, value = line.partition(" ")
        kv[key] = value
    return kv, lines


# -- workdir ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WorkdirReport:
    """What workdir.sh found. ``path``: the directory we work in (the configured one when it is private, else
    our ``uid-UID`` subdirectory of it); ``result``: ok, missing, not-private, cannot-create, not-writable or
    no-result; ``detail``: the text after a ``not-private``. ``lock``: acquired, held, or "" when not asked;
    ``holder``: the held lock's first line; ``lock_old``: the lock file is over a minute old; ``lock_foreign``:
    the lock is not a file of ours (never trusted, never taken over)."""

    path: str
    result: str
    detail: str = ""
    lock: str = ""
    holder: str = ""
    holder_sha: str = ""  # sha256 of the holder line's bytes (what a takeover compares)
    lock_age: int | None = None  # seconds since the lock file was last touched (the holder's heartbeat), host clock
    lock_old: bool = False
    lock_foreign: bool = False


def read_workdir(c, configured: str) -> WorkdirReport:
    """Where we work on the host for the ``configured`` workdir, found without creating anything (one round
    trip: ``workdir.sh read``)."""
    return parse_workdir(run_script(c, "workdir.sh", [configured, "read"]).stdout)


def parse_workdir(output: str) -> WorkdirReport:
    """Parse workdir.sh's output."""
    kv, lines = _pairs(output)
    out = WorkdirOutput.model_validate(kv)
    result, _, detail = out.result.partition(" ")
    return WorkdirReport(path=out.workdir, result=result, detail=detail, lock=out.lock, holder=out.holder,
                         lock_old="lock-old" in lines, holder_sha=out.holder_sha,
                         lock_age=int(out.lock_age) if out.lock_age.lstrip("-").isdigit() else None,
                         lock_foreign="lock-foreign" in lines)


# -- launch -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LaunchReport:
    """What launch.sh saw. ``result``: ok, port-in-use, exited, record-failed, cannot-write-record,
    cannot-write-workdir, no-workdir, not-private, bad-template, no-python, or ``no-result`` when the script said nothing.
    Identity fields are set only when ``result`` is ok; ``start_ticks`` in clock ticks after boot."""

    result: str
    pid: int | None = None
    pgid: int | None = None
    start_ticks: int | None = None
    boot_id: str = ""
    cmdline_sha256: str = ""
    log_tail: list[str] = field(default_factory=list)


def parse_launch(output: str) -> LaunchReport:
    """Parse launch.sh's output. A report whose group is not led by the PID is refused (ValueError): the
    script checks it, and so does this parser, before anything is recorded as ours."""
    kv, lines = _pairs(output)
    tail: list[str] = []
    if "log-tail-begin" in lines:
        start = lines.index("log-tail-begin") + 1
        end = lines.index("log-tail-end") if "log-tail-end" in lines else len(lines)
        tail = [x for x in lines[start:end]]
        while tail and not tail[-1]:
            tail.pop()
    out = LaunchOutput.model_validate(kv)
    result, pid = out.result, count(out.pid)
    if result != "ok":
        return LaunchReport(result=result, pid=pid, log_tail=tail)
    parts = out.ident.split()
    if len(parts) < 3 or not all(p.isdigit() for p in parts[:3]):
        return LaunchReport(result="no-identity", pid=pid)
    ipid, pgid, start = (int(p) for p in parts[:3])
    if ipid != pid or pgid != pid:
        raise ValueError(f"launch identity names process group {pgid} for PID {pid}: not a group leader")
    return LaunchReport(result="ok", pid=pid, pgid=pgid, start_ticks=start,
                        boot_id=parts[3] if len(parts) > 3 else "",
                        cmdline_sha256=parts[4] if len(parts) > 4 else "")


# -- stop ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StopReport:
    """What stop.sh did. ``found``: none, unreadable, running, group-only, gone, not-ours; ``refused`` set
    when the group was not signalled for safety; ``error`` when the stop did not finish (group survived
    SIGKILL, GPU memory still held). Times in seconds, memory in MiB. ``gpu_level_mib``: how far the server's
    GPUs were above their level before the launch when the stop began (memory of processes the host cannot
    see: inside a container the driver lists the host's PIDs); ``gpu_release_by`` "level" when the release wait
    ended on that level, not on the PID match."""

    found: str
    pid: int = 0
    pgid: int = 0
    reason: str = ""
    refused: str = ""
    members: list[int] = field(default_factory=list)
    orphans: list[int] = field(default_factory=list)
    strangers: list[int] = field(default_factory=list)  # in the leaderless group but not ours: left alone
    signals: list[str] = field(default_factory=list)
    gpu_mib_held: int = 0
    gpu_level_mib: int = 0  # above the GPUs' level before the launch, not held by a PID of ours we can list
    gpu_release_by: str = "pid"  # what the GPU wait waited for last: "pid" or "level" (memory we cannot see)
    exit_s: float = 0.0
    gpu_release_s: float = 0.0
    record_json: str = ""
    error: str = ""
    unlocked: bool = False
    gpu_unchecked: bool = False  # nvidia-smi did not answer within its bound: GPU memory release not checked


def parse_stop(output: str) -> StopReport:
    """Parse stop.sh's output (progress lines are ignored here; they were shown as they came)."""
    rec = ""
    raw = output.splitlines()
    if "record-begin" in raw and "record-end" in raw:
        a, b = raw.index("record-begin"), raw.index("record-end")
        rec, output = "\n".join(raw[a + 1:b]).strip(), "\n".join(raw[:a] + raw[b + 1:])
    kv, lines = _pairs(output)
    out = StopOutput.model_validate(kv)
    result = out.result

    def ints(text: str) -> list[int]:
        return [int(x) for x in text.split() if x.isdigit()]

    def num(text: str) -> int:
        return count(text) or 0

    return StopReport(
        found=out.found, pid=num(out.pid), pgid=num(out.pgid), reason=out.reason, refused=out.refused,
        members=sorted(ints(out.members)), orphans=sorted(ints(out.orphans)), strangers=sorted(ints(out.strangers)),
        signals=[line.split(" ", 1)[1] for line in lines if line.startswith("signal ")],
        gpu_mib_held=num(out.gpu_mib), gpu_level_mib=num(out.gpu_level_mib), gpu_release_by=out.gpu_release_by,
        exit_s=num(out.exit_cs) / 100, gpu_release_s=num(out.gpu_release_cs) / 100,
        record_json=rec, error=result[len("error "):] if result.startswith("error") else "",
        unlocked="unlocked" in lines, gpu_unchecked="gpu_hung" in lines)


# -- children -----------------------------------------------------------------------------------------

def parse_children(output: str) -> tuple[bool, list[list[int]]]:
    """Parse children.sh: (the leader was still ours, [[pid, start_ticks], ...])."""
    kv, lines = _pairs(output)
    kids = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "child" and parts[1].isdigit() and parts[2].isdigit():
            kids.append([int(parts[1]), int(parts[2])])
    return SignalOutput.model_validate(kv).result == "ok", kids


# -- signal (--force) ---------------------------------------------------------------------------------

def parse_signal(output: str) -> tuple[bool, list[int], list[int]]:
    """Parse signal.sh: (it ran to its end, PIDs that needed SIGKILL, PIDs that survived SIGKILL)."""
    kv, lines = _pairs(output)
    killed = [int(x.split()[2]) for x in lines
              if x.startswith("signal KILL ") and len(x.split()) == 3 and x.split()[2].isdigit()]
    out = SignalOutput.model_validate(kv)
    survivors = [int(x) for x in (out.survivors or "").split() if x.isdigit()]
    return out.result == "ok" and out.survivors is not None, killed, survivors
