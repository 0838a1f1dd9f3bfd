"""Read-only probes of a host. Each fact is a shell command plus a pure parser of its output.

Facts never change the host. The ``*_command`` functions build the command, the ``parse_*`` functions turn
its output into typed values (tested from recorded outputs), and ``get_*`` run one through a context ``c``
(Fabric ``Connection`` or Invoke ``Context``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from ..config.inventory import HostConfig
from .commands import sim_state_dir

_HZ = 100  # USER_HZ: /proc start times are in clock ticks


@dataclass(frozen=True)
class ProcessInfo:
    """One process from ``/proc/<pid>/stat`` and ``cmdline``. ``start_ticks``: clock ticks after boot."""

    pid: int
    ppid: int
    pgid: int
    state: str
    start_ticks: int
    cmdline: tuple[str, ...]

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


@dataclass(frozen=True)
class PsEntry:
    """One row of ``ps``: pid, parent, group, user, age in seconds, command line (as ps joins it). ``argv``
    (the exact words, from ``/proc/PID/cmdline``) and ``start_ticks`` are filled by :func:`get_processes`
    for processes whose command line mentions sglang; None otherwise."""

    pid: int
    ppid: int
    pgid: int
    user: str
    age_s: int
    args: str
    argv: tuple[str, ...] | None = None
    start_ticks: int | None = None


@dataclass(frozen=True)
class GpuInfo:
    """One GPU from ``nvidia-smi --query-gpu``; memory in MiB."""

    index: int
    name: str
    memory_used_mib: int
    memory_total_mib: int
    uuid: str = ""

    @property
    def memory_free_mib(self) -> int:
        return self.memory_total_mib - self.memory_used_mib


@dataclass(frozen=True)
class GpuApp:
    """One compute app from ``nvidia-smi --query-compute-apps``; memory in MiB; ``gpu_uuid`` of its GPU."""

    pid: int
    used_memory_mib: int
    gpu_uuid: str = ""


def _run(c, cmd: str, *, warn: bool = True):
    return c.run(cmd, hide=True, warn=warn, in_stream=False)


# -- home ---------------------------------------------------------------------------------------------

def home_command() -> str:
    return 'printf "%s" "$HOME"'


def resolve_path(home: str, path: str) -> str:
    """Expand a leading ``~`` against the remote ``$HOME`` (quoting would stop the shell doing it)."""
    if path == "~":
        return home
    if path.startswith("~/"):
        return home.rstrip("/") + path[1:]
    return path


def get_home(c) -> str:
    return _run(c, home_command(), warn=False).stdout.strip()


# -- processes ----------------------------------------------------------------------------------------

def process_info_command(pid: int) -> str:
    return proc_info_command_of(str(int(pid)))


def proc_info_command_of(pid_word: str) -> str:
    """:func:`process_info_command` for a PID given as a shell word: a number, or a variable the caller's
    script set (``"$p"``: :func:`~mtp_remote.remote.snapshot.record_process_command`)."""
    p = pid_word
    return f"cat /proc/{p}/stat 2>/dev/null && printf '\\n--cmdline--\\n' && tr '\\0' '\\n' < /proc/{p}/cmdline"


def parse_process_info(output: str) -> ProcessInfo | None:
    """Parse ``/proc/PID/stat`` (+ cmdline, NULs as newlines). None when the process does not exist.

    The comm field may hold spaces and parentheses, so fields are read after the last ``)``;
    starttime is field 22 of proc(5)."""
    if "--cmdline--" not in output:
        return None
    stat, _, cmdline = output.partition("\n--cmdline--\n")
    stat = stat.strip()
    if not stat or ")" not in stat:
        return None
    pid = int(stat.split(" ", 1)[0])
    rest = stat[stat.rindex(")") + 2:].split()
    return ProcessInfo(pid=pid, state=rest[0], ppid=int(rest[1]), pgid=int(rest[2]),
                       start_ticks=int(rest[19]),
                       cmdline=tuple(x for x in cmdline.split("\n") if x != ""))


def get_process_info(c, pid: int) -> ProcessInfo | None:
    return parse_process_info(_run(c, process_info_command(pid)).stdout)


def ps_command() -> str:
    return "ps -ww -eo pid=,ppid=,pgid=,user:32=,etimes=,args="  # -ww: never cut a command line to the terminal width


def parse_ps(output: str) -> list[PsEntry]:
    """Parse ``ps -eo pid=,ppid=,pgid=,user=,etimes=,args=``."""
    rows = []
    for line in output.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5 or not parts[0].isdigit():
            continue
        rows.append(PsEntry(pid=int(parts[0]), ppid=int(parts[1]), pgid=int(parts[2]), user=parts[3],
                            age_s=int(parts[4]) if parts[4].isdigit() else 0,
                            args=parts[5] if len(parts) > 5 else ""))
    return rows


def get_ps(c) -> list[PsEntry]:
    return parse_ps(_run(c, ps_command(), warn=False).stdout)


_SEP = "\x1f"  # argv words are joined with the ASCII unit separator in processes_command's output


def processes_command() -> str:
    """``ps`` rows, then for every process whose command line mentions sglang: PID, start time and its exact
    argv (``/proc/PID/cmdline``, words joined by 0x1f) — one round trip."""
    return (ps_command() + "; echo --argv--; for p in $(ps -ww -eo pid=,args= | awk '/sglang/ {print $1}'); do "
            "s=$(cat /proc/$p/stat 2>/dev/null) || continue; s=${s##*) }; set -- $s; printf '%s %s ' \"$p\" \"${20}\"; "
            "tr '\\000' '\\037' < /proc/$p/cmdline 2>/dev/null; echo; done")


def parse_processes(output: str) -> list[PsEntry]:
    """Parse :func:`processes_command`: ps rows with ``argv``/``start_ticks`` where they were read."""
    from dataclasses import replace

    rows_text, _, argv_text = output.partition("--argv--\n")
    rows = parse_ps(rows_text)
    extra: dict[int, tuple[int, tuple[str, ...]]] = {}
    for line in argv_text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            extra[int(parts[0])] = (int(parts[1]), tuple(w for w in parts[2].rstrip(_SEP).split(_SEP)))
    return [replace(r, start_ticks=extra[r.pid][0], argv=extra[r.pid][1]) if r.pid in extra else r for r in rows]


def get_processes(c) -> list[PsEntry]:
    return parse_processes(_run(c, processes_command(), warn=False).stdout)


def descendants(ps: list[PsEntry], pid: int) -> list[PsEntry]:
    """Children, grandchildren, … of ``pid`` (by parent PID), whatever their process group."""
    kids: dict[int, list[PsEntry]] = {}
    for p in ps:
        kids.setdefault(p.ppid, []).append(p)
    out, todo = [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child.pid)
    return out


def group_members(ps: list[PsEntry], pgid: int) -> list[PsEntry]:
    """Processes in process group ``pgid``."""
    return [p for p in ps if p.pgid == pgid]


# -- GPUs ---------------------------------------------------------------------------------------------

SMI_TIMEOUT_S = 10.0  # a wedged driver hangs nvidia-smi for ever: every call of it on the host has this bound
HUNG_EXITS = (124, 137)  # ``timeout``'s exit status when the bound ended the command (TERM, then KILL)


def bounded(cmd: str, seconds: float) -> str:
    """``cmd`` (a shell command line) under coreutils ``timeout`` on the host: SIGTERM after ``seconds``, SIGKILL
    2 s later; the exit status is then one of :data:`HUNG_EXITS`."""
    return f"timeout -k 2 {seconds:g} {cmd}"


def nvidia_smi(host: HostConfig, python: str, workdir: str) -> str:
    """The nvidia-smi command, bounded (:data:`SMI_TIMEOUT_S`, :func:`bounded`): the real one, or on sim hosts
    the simulator's stand-in reading the host's simulated GPU state (``workdir`` resolved, no ``~``)."""
    if host.is_sim:
        state = shlex.quote(sim_state_dir(host, workdir))
        hw = "".join(f" {k}={shlex.quote(host.env[k])}" for k in ("SGLANG_SIM_GPUS", "SGLANG_SIM_DRIVER")
                     if k in host.env)  # the host's simulated hardware, as its server sees it
        return bounded(f"env SGLANG_SIM_STATE_DIR={state}{hw} {shlex.quote(python)} -m mtp_remote.sim.nvidia_smi",
                       SMI_TIMEOUT_S)
    return bounded("nvidia-smi", SMI_TIMEOUT_S)


def gpu_apps_command(smi: str) -> str:
    return f"{smi} --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits"


def parse_gpu_apps(output: str) -> list[GpuApp]:
    """Parse ``--query-compute-apps=pid,used_memory[,gpu_uuid] --format=csv,noheader,nounits`` (MiB)."""
    apps = []
    for line in output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0].isdigit():
            mem = parts[1].split()[0]
            apps.append(GpuApp(pid=int(parts[0]), used_memory_mib=int(mem) if mem.isdigit() else 0,
                               gpu_uuid=parts[2] if len(parts) > 2 else ""))
    return apps


def get_gpu_apps(c, smi: str) -> list[GpuApp]:
    r = _run(c, gpu_apps_command(smi))
    if r.exited != 0:
        return []
    return parse_gpu_apps(r.stdout)


def gpus_command(smi: str) -> str:
    return f"{smi} --query-gpu=index,name,memory.used,memory.total,uuid --format=csv,noheader,nounits"


def parse_gpus(output: str) -> list[GpuInfo]:
    """Parse ``--query-gpu=index,name,memory.used,memory.total[,uuid] --format=csv,noheader,nounits`` (MiB)."""
    gpus = []
    for line in output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4 and parts[0].isdigit():
            gpus.append(GpuInfo(index=int(parts[0]), name=parts[1], memory_used_mib=int(float(parts[2])),
                                memory_total_mib=int(float(parts[3])), uuid=parts[4] if len(parts) > 4 else ""))
    return gpus


def get_gpus(c, smi: str) -> list[GpuInfo]:
    r = _run(c, gpus_command(smi))
    return parse_gpus(r.stdout) if r.exited == 0 else []


# -- ports --------------------------------------------------------------------------------------------

def listening_ports_command() -> str:
    return "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null"


def parse_listening_ports(output: str) -> set[int]:
    """TCP ports in LISTEN state (``0A``) from ``/proc/net/tcp`` and ``tcp6``."""
    ports = set()
    for line in output.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[3] == "0A" and ":" in parts[1]:
            try:
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
            except ValueError:
                continue
    return ports


def port_in_use(c, port: int) -> bool:
    return port in parse_listening_ports(_run(c, listening_ports_command(), warn=False).stdout)


def port_owner_command(port: int) -> str:
    return f"ss -Hltnp 'sport = :{int(port)}' 2>/dev/null"


def parse_port_owners(output: str) -> set[int]:
    """PIDs listening on the port, from ``ss -Hltnp`` (``users:(("python3",pid=812,fd=3))``); only the
    processes this user may see (root sees all)."""
    import re

    return {int(m) for m in re.findall(r"pid=(\d+)", output)}


def get_port_owners(c, port: int) -> set[int]:
    return parse_port_owners(_run(c, port_owner_command(port)).stdout)


def apps_on_gpus(apps: list[GpuApp], gpus: list[GpuInfo], indices: list[int] | None) -> list[GpuApp]:
    """The compute apps on the GPUs with these indices (all apps when ``indices`` is None or UUIDs are
    unknown)."""
    if indices is None:
        return apps
    uuids = {g.uuid for g in gpus if g.index in indices and g.uuid}
    if not uuids:
        return apps
    return [a for a in apps if a.gpu_uuid in uuids or not a.gpu_uuid]
