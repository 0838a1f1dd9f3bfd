"""Find SGLang processes on a host that we did not start (pure: facts in, findings out).

A process is *SGLang-like* when its parsed argv runs ``python -m sglang.launch_server`` or ``sglang serve`` (or
the simulator's ``mtp_remote.sim.launch_server``, ``mtp_remote.sim serve``) — a python executable with that
module after ``-m``, or the ``sglang`` console script with ``serve``, not a ``grep sglang``
or a viewer whose arguments merely mention it — or is titled ``sglang::…`` (SGLang's scheduler/detokenizer
children set their process title). It is *foreign* unless it belongs to the process group recorded in our
``server.json`` or is one of the children recorded there (same PID and start time: an orphaned scheduler of
ours is ours). An *orphan* is a
``sglang::`` child whose parent is gone (re-parented to PID 1 or a subreaper). Each finding carries PID,
user, age and the GPU memory its PID holds, so an operator can decide before ``stop --force``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from .facts import GpuApp, GpuInfo, PsEntry

SERVER_MODULES = ("sglang.launch_server", "mtp_remote.sim.launch_server")
_PY = re.compile(r"^python[0-9.]*[dmu]?$")
_PY_OPTS_WITH_VALUE = ("-W", "-X", "-Q")


@dataclass(frozen=True)
class ForeignProcess:
    """An SGLang-like process that is not ours. ``age_s`` seconds; ``gpu_mib`` MiB (0 if none)."""

    pid: int
    ppid: int
    pgid: int
    user: str
    age_s: int
    gpu_mib: int
    kind: str  # "server" | "child" | "orphan" | "gpu-app" | "port-owner", "+port" when it listens on our port
    args: str
    start_ticks: int | None = None  # clock ticks after boot, when it was read (``--force`` checks it again)

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        """``PID 42 (server, user bob, 31 s old, 20480 MiB GPU): python -m sglang.launch_server --model-path
        /m --port 30000``: the command line by :func:`brief_command`, never cut inside an argument."""
        mem = f", {self.gpu_mib} MiB GPU" if self.gpu_mib else ""
        return f"PID {self.pid} ({self.kind}, user {self.user}, {self.age_s} s old{mem}): {brief_command(self.args)}"


#: The arguments that tell an operator which server a process is: kept (with their value) when a long
#: command line is shortened.
KEY_FLAGS = ("--model-path", "--model", "--port", "--host", "--tp-size", "--tp", "--dp-size", "--served-model-name",
             "--speculative-algorithm", "--base-gpu-id", "--nccl-port")


def brief_command(args: str, limit: int = 200) -> str:
    """A command line (as ps joins it: words separated by spaces) at most about ``limit`` characters long,
    shortened by whole words only: the program and its module, then every :data:`KEY_FLAGS` flag with its
    value (``--port 30021``, ``--port=30021``), then the other words while they fit (a flag with its value or
    not at all); ``…`` where arguments were left out and ``(+N more arguments)`` at the end. A line within
    ``limit`` is returned whole."""
    if len(args) <= limit:
        return args
    words = args.split(" ")
    keep = [False] * len(words)
    head = 3 if len(words) > 2 and words[1] == "-m" else 1
    for i in range(min(head, len(words))):
        keep[i] = True
    for i, w in enumerate(words):
        name = w.split("=", 1)[0]
        if name in KEY_FLAGS:
            keep[i] = True
            if "=" not in w and i + 1 < len(words) and not words[i + 1].startswith("--"):
                keep[i + 1] = True
    size = sum(len(w) + 1 for w, k in zip(words, keep) if k)
    i = 0
    while i < len(words):  # the rest in order, a flag together with its value, while they fit
        end = i + 2 if words[i].startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("--") else i + 1
        if not any(keep[i:end]):
            cost = sum(len(w) + 1 for w in words[i:end])
            if size + cost > limit:
                break
            keep[i:end] = [True] * (end - i)
            size += cost
        i = end
    left = keep.count(False)
    shown_words: list[str] = []
    for i, (w, k) in enumerate(zip(words, keep)):
        if k:
            shown_words.append(w)
        elif i == 0 or keep[i - 1]:
            shown_words.append("…")  # where arguments were left out
    shown = " ".join(shown_words)
    return shown + (f" (+{left} more argument{'s' if left != 1 else ''})" if left else "")


def _serves(words: tuple[str, ...] | list[str], i: int) -> bool:
    """``words[i]`` is ``serve``: the subcommand of ``sglang serve`` (and the sim's ``python -m mtp_remote.sim
    serve``)."""
    return i < len(words) and words[i] == "serve"


def server_kind(argv: tuple[str, ...] | list[str]) -> str | None:
    """``"server"`` for ``PYTHON [opts] -m sglang.launch_server ...`` (or the sim's module, or a
    ``.../sglang/launch_server.py`` script) and for ``sglang serve ...`` (as ``/proc`` shows it once the console
    script's shebang ran: ``PYTHON .../bin/sglang serve``; the sim's ``PYTHON -m mtp_remote.sim serve``),
    ``"child"`` for a process titled ``sglang::…``, else None."""
    if not argv:
        return None
    if argv[0].startswith("sglang::"):
        return "child"
    if argv[0].rsplit("/", 1)[-1] == "sglang":
        return "server" if _serves(argv, 1) else None
    if not _PY.match(argv[0].rsplit("/", 1)[-1]):
        return None
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-m" or (a.startswith("-m") and len(a) > 2):
            mod, nxt = (argv[i + 1] if i + 1 < len(argv) else "", i + 2) if a == "-m" else (a[2:], i + 1)
            return "server" if mod in SERVER_MODULES or (mod == "mtp_remote.sim" and _serves(argv, nxt)) else None
        if a in _PY_OPTS_WITH_VALUE:
            i += 2
            continue
        if a == "-c" or a.startswith("-c") or a == "-" or not a.startswith("-"):  # code, stdin or a script
            if a.rsplit("/", 1)[-1] == "sglang":  # the console script: `sglang serve`
                return "server" if _serves(argv, i + 1) else None
            return "server" if a.endswith("sglang/launch_server.py") else None
        i += 1
    return None


def is_sglang_like(p: PsEntry) -> bool:
    """True when ``p`` is an SGLang server or child by its argv (ps's joined args split on blanks when the
    exact argv was not read)."""
    return server_kind(p.argv if p.argv is not None else tuple(p.args.split())) is not None


def find_foreign(ps: list[PsEntry], gpu_apps: list[GpuApp], *, our_pgid: int | None = None,
                 include_gpu_apps: bool = True, port_owners: set[int] = frozenset(),
                 our_children: list[list[int]] | None = None) -> list[ForeignProcess]:
    """SGLang-like processes outside our process group and not among ``our_children`` (``[[pid,
    start_ticks]]`` from our record; matched on both when ps gave the start time), plus (optionally) any
    other GPU compute app and whatever listens on our server port (``port_owners``, kind ``port-owner``).

    Zombies (``[name] <defunct>``) are skipped: they hold nothing and cannot be signalled."""
    kids = {int(pid): int(start) for pid, start in (our_children or [])}

    def ours(p: PsEntry) -> bool:
        if our_pgid is not None and p.pgid == our_pgid:
            return True
        return p.pid in kids and (p.start_ticks is None or p.start_ticks == kids[p.pid])

    mem = {}
    for a in gpu_apps:
        mem[a.pid] = mem.get(a.pid, 0) + a.used_memory_mib
    pids = {p.pid for p in ps}
    out = []
    seen = set()
    for p in ps:
        if p.args.startswith("[") or ours(p):
            continue
        if is_sglang_like(p):
            if server_kind(p.argv if p.argv is not None else tuple(p.args.split())) == "child":
                kind = "orphan" if p.ppid == 1 or p.ppid not in pids else "child"
            else:
                kind = "server"
            out.append(ForeignProcess(pid=p.pid, ppid=p.ppid, pgid=p.pgid, user=p.user, age_s=p.age_s,
                                      gpu_mib=mem.get(p.pid, 0), kind=kind, args=p.args,
                                      start_ticks=p.start_ticks))
            seen.add(p.pid)
    if include_gpu_apps:
        by_pid = {p.pid: p for p in ps}
        for pid, mib in mem.items():
            p = by_pid.get(pid)
            if pid in seen or (p is not None and ours(p)):
                continue
            out.append(ForeignProcess(pid=pid, ppid=p.ppid if p else 0, pgid=p.pgid if p else 0,
                                      user=p.user if p else "?", age_s=p.age_s if p else 0, gpu_mib=mib,
                                      kind="gpu-app", args=p.args if p else "(not visible to ps)",
                                      start_ticks=p.start_ticks if p else None))
        for pid in sorted(port_owners - seen - set(mem)):
            p = by_pid.get(pid)
            if p is None or ours(p):
                continue
            out.append(ForeignProcess(pid=pid, ppid=p.ppid, pgid=p.pgid, user=p.user, age_s=p.age_s, gpu_mib=0,
                                      kind="port-owner", args=p.args,
                                      start_ticks=p.start_ticks))
    for i, f in enumerate(out):
        if f.pid in port_owners and "port" not in f.kind:
            out[i] = ForeignProcess(**{**f.to_dict(), "kind": f.kind + "+port"})
    return sorted(out, key=lambda f: f.pid)


def _serves_port(args: str, port: int) -> bool:
    """True when a command line says ``--port N`` or ``--port=N`` for exactly this port."""
    import re

    return any(int(m) == port for m in re.findall(r"--port(?:=|\s+)(\d+)\b", args))


def force_targets(foreign: list[ForeignProcess], port: int) -> list[ForeignProcess]:
    """What ``stop --force`` may signal on a host: processes that hold memory on this host's GPUs (the caller
    passes GPU apps of those GPUs only) or serve on its port — not every SGLang-like process on the machine."""
    return [f for f in foreign if f.gpu_mib > 0 or "port" in f.kind or _serves_port(f.args, port)]


#: Memory a GPU may hold that no process accounts for before we call it held (MiB): the driver's own context and
#: caches. stop.sh's ``GPU_TOL_MIB`` is the same tolerance for the level after a stop.
GPU_TOLERANCE_MIB = 256


def unseen_gpu_memory(gpus: list[GpuInfo], apps: list[GpuApp], visible: set[int], indices: list[int] | None = None,
                      tolerance_mib: int = GPU_TOLERANCE_MIB) -> list[dict]:
    """``[{"index": k, "mib": N}]`` for each GPU (of ``indices``; all when None) whose ``memory.used`` exceeds by
    more than ``tolerance_mib`` what the compute apps this host can see (PIDs in ``visible``, from ``ps``) hold:
    memory of processes in another PID namespace (inside a container the driver lists the host's PIDs, or
    none) or of none at all. Pure; MiB as nvidia-smi reports them."""
    out = []
    for g in gpus:
        if indices is not None and g.index not in indices:
            continue
        seen = sum(a.used_memory_mib for a in apps if a.pid in visible and (a.gpu_uuid == g.uuid or not g.uuid))
        if g.memory_used_mib - seen > tolerance_mib:
            out.append({"index": g.index, "mib": g.memory_used_mib - seen})
    return out


def describe_unseen(unseen: list[dict]) -> list[str]:
    """One line per entry of :func:`unseen_gpu_memory`: ``N MiB held on GPU k by processes this host cannot see``."""
    return [f"{u['mib']} MiB held on GPU {u['index']} by processes this host cannot see" for u in unseen]
