"""Simulated GPUs: their inventory, and who holds how much memory, shared between processes through files.

GPUs come from ``SGLANG_SIM_GPUS``: ``NxMiB`` (default ``2x49140``, the field's two RTX A6000s) or a
comma-separated list of MiB sizes. Every sim process that holds GPU memory (the scheduler processes, one per TP
rank) writes ``<state dir>/procs/<pid>.json`` (state dir: ``SGLANG_SIM_STATE_DIR``, default
``~/.cache/mtp-remote-sim``) with its start time, title and MiB per GPU index. Readers (the ``nvidia-smi``
stand-in) see a holder as long as the process lives, and for its release delay after it is gone (as real
drivers free memory a moment after the process exits): the delay runs from the exit time the process wrote
itself, or from the first time a reader saw it dead (SIGKILL), and then the file is deleted.

A holder written from another PID namespace (the sim inside a container, its state folder mounted from the
host) is seen by a reader outside under its host PID, found through ``/proc/*/ns/pid`` and ``NSpid`` — as a
real driver reports the host's PIDs; a reader that cannot see it (inside another container) sees it gone.

A holder registered with ``foreign_pid`` (the ``pid_namespace`` fault) is reported under another PID
namespace's number, as a real driver reports the host's PIDs to ``nvidia-smi`` inside a container: its PID plus
:data:`FOREIGN_PID_SHIFT`, above the kernel's PID limit, so no process here has it.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import namedtuple
from pathlib import Path

_NAMES = {49140: "NVIDIA RTX A6000", 81920: "NVIDIA A100-SXM4-80GB", 81559: "NVIDIA H100 80GB HBM3",
          24564: "NVIDIA GeForce RTX 4090", 46068: "NVIDIA L40S"}


# Named tuples, not dataclasses: the nvidia-smi stand-in imports this module, thousands of times per test suite,
# and `dataclasses` (with `inspect`) was a fifth of each call's CPU.
class GpuSpec(namedtuple("GpuSpec", "index name uuid total_mib")):
    """One simulated GPU: index (int), marketing name, UUID, total memory (MiB)."""

    __slots__ = ()


#: Added to a ``foreign_pid`` holder's PID in what nvidia-smi reports (4194304: Linux's largest PID limit).
FOREIGN_PID_SHIFT = 1 << 22


class Holder(namedtuple("Holder", "pid name mem_mib alive foreign_pid", defaults=(False,))):
    """A process holding GPU memory: pid, title, MiB per GPU index (dict[int, int]), whether it is still alive,
    and whether the driver reports it under another PID namespace's number (``reported_pid``)."""

    __slots__ = ()

    @property
    def reported_pid(self) -> int:
        """The PID nvidia-smi shows: its own, or (``foreign_pid``) one no process in this namespace has."""
        return self.pid + FOREIGN_PID_SHIFT if self.foreign_pid else self.pid


def state_dir(*, create: bool = True) -> Path:
    """The shared state folder (``SGLANG_SIM_STATE_DIR`` or ``~/.cache/mtp-remote-sim``), created 0700 unless
    ``create`` is False (a reader, like ``nvidia-smi``, creates nothing: a missing folder holds no process)."""
    d = Path(os.environ.get("SGLANG_SIM_STATE_DIR") or Path.home() / ".cache" / "mtp-remote-sim")
    if create:
        (d / "procs").mkdir(parents=True, exist_ok=True, mode=0o700)
    return d


def load_gpus(spec: str | None = None) -> list[GpuSpec]:
    """The GPUs described by ``spec`` (default: ``SGLANG_SIM_GPUS`` or ``2x49140``).

    Raises ``ValueError`` on a malformed spec.
    """
    spec = (spec if spec is not None else os.environ.get("SGLANG_SIM_GPUS")) or "2x49140"
    spec = spec.strip().lower()
    if "x" in spec:
        n, _, size = spec.partition("x")
        sizes = [int(size)] * int(n)
    else:
        sizes = [int(s) for s in spec.split(",") if s.strip()]
    if not sizes:
        raise ValueError(f"SGLANG_SIM_GPUS={spec!r}: expected NxMiB or MiB,MiB,...")
    return [GpuSpec(i, _NAMES.get(s, "NVIDIA Simulated GPU"),
                    "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_DNS, f"mtp-remote-sim-gpu-{i}")), s)
            for i, s in enumerate(sizes)]


def proc_start_ticks(pid: int) -> int | None:
    """Start time of a live (non-zombie) process in clock ticks since boot, from /proc; None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = stat.rsplit(")", 1)[1].split()
    if rest[0] in ("Z", "X"):
        return None
    return int(rest[19])


def _pidns(pid: int | str = "self") -> str | None:
    """The PID namespace of ``pid`` (``pid:[4026531836]``: the same text in every namespace), or None."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _host_pid(pid: int, ns: str) -> int | None:
    """The PID, in this reader's namespace, of process ``pid`` of PID namespace ``ns`` (its innermost ``NSpid``
    entry), or None when no process visible here is that one."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or _pidns(d.name) != ns:
            continue
        try:
            for line in (d / "status").read_text().splitlines():
                if line.startswith("NSpid:") and line.split()[-1] == str(pid):
                    return int(d.name)
        except OSError:
            continue
    return None


def _path(pid: int) -> Path:
    return state_dir() / "procs" / f"{pid}.json"


def _write(path: Path, data: dict) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def register_holder(pid: int, name: str, mem_mib: dict[int, int], release_delay: float, *,
                    foreign_pid: bool = False) -> None:
    """Record that ``pid`` holds ``mem_mib`` (GPU index -> MiB); replaces an earlier record of that pid.
    ``foreign_pid``: nvidia-smi reports it under another PID namespace's number (:attr:`Holder.reported_pid`)."""
    _write(_path(pid), {"pid": pid, "start": proc_start_ticks(pid), "name": name,
                        "mem": {str(k): int(v) for k, v in mem_mib.items()},
                        "release_delay": release_delay, "gone_at": None, "foreign_pid": foreign_pid,
                        "pidns": _pidns()})


def mark_exited(pid: int) -> None:
    """Start the release delay of ``pid`` now (called by the process itself as it exits)."""
    p = _path(pid)
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return
    data["gone_at"] = time.time()
    _write(p, data)


def holders(now: float | None = None) -> list[Holder]:
    """Every process whose memory is still reported; drops records whose release delay has passed."""
    now = time.time() if now is None else now
    out: list[Holder] = []
    mine = _pidns()
    for p in sorted((state_dir(create=False) / "procs").glob("*.json")):
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        pid = int(data["pid"])
        ns = data.get("pidns")
        here = pid
        if ns and mine and ns != mine:  # written in another PID namespace: its number here, if we can see it
            here = _host_pid(pid, ns) or 0  # not seen: gone (the namespace's processes are all visible from above)
        start = proc_start_ticks(here) if here else None
        pid = here or pid
        alive = start is not None and (data.get("start") is None or start == data["start"])
        if not alive:
            gone_at = data.get("gone_at")
            if gone_at is None:
                data["gone_at"] = gone_at = now
                _write(p, data)
            if now >= gone_at + float(data.get("release_delay", 0.5)):
                p.unlink(missing_ok=True)
                continue
        out.append(Holder(pid, data.get("name", "python"), {int(k): v for k, v in data["mem"].items()},
                          alive, bool(data.get("foreign_pid"))))
    return out
