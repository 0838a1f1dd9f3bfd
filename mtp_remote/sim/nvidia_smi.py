"""``python -m mtp_remote.sim.nvidia_smi``: an ``nvidia-smi`` stand-in for sim hosts.

Answers the forms this tool uses, in nvidia-smi's CSV format:
``--query-gpu=index,name,uuid,memory.used,memory.total,memory.free,driver_version`` and
``--query-compute-apps=pid,process_name,used_memory,gpu_uuid`` (any subset, in the given order; ``used_memory``
and ``used_gpu_memory`` both accepted) with ``--format=csv[,noheader][,nounits]``, ``-L``, and a bare call (a
short table). Numbers come from :mod:`mtp_remote.sim.gpu` (the holders' files under the sim state folder); a
holder of the ``pid_namespace`` fault is listed under another PID namespace's number, as inside a container.
An unknown field prints nvidia-smi's message and exits 2.
"""

from __future__ import annotations

import os
import sys

from mtp_remote.sim.gpu import GpuSpec, Holder, holders, load_gpus

_GPU_FIELDS = {"index": "index", "name": "name", "uuid": "uuid", "gpu_uuid": "uuid", "gpu_name": "name",
               "memory.used": "memory.used [MiB]", "memory.total": "memory.total [MiB]",
               "memory.free": "memory.free [MiB]", "count": "count", "driver_version": "driver_version"}
_APP_FIELDS = {"pid": "pid", "process_name": "process_name", "name": "process_name",
               "used_memory": "used_gpu_memory [MiB]", "used_gpu_memory": "used_gpu_memory [MiB]",
               "gpu_uuid": "gpu_uuid", "gpu_name": "gpu_name"}


def driver_version() -> str:
    """The simulated driver version: ``SGLANG_SIM_DRIVER`` or 550.54.15 (lets a sim fleet differ in drivers)."""
    return os.environ.get("SGLANG_SIM_DRIVER") or "550.54.15"


def _mib(v: int, units: bool) -> str:
    return f"{v} MiB" if units else str(v)


def gpu_rows(gpus: list[GpuSpec], hs: list[Holder], fields: list[str], units: bool) -> list[list[str]]:
    """One row per GPU with the requested ``--query-gpu`` fields."""
    rows = []
    for g in gpus:
        used = sum(h.mem_mib.get(g.index, 0) for h in hs)
        vals = {"index": str(g.index), "name": g.name, "uuid": g.uuid, "gpu_uuid": g.uuid, "gpu_name": g.name,
                "memory.used": _mib(used, units), "memory.total": _mib(g.total_mib, units),
                "memory.free": _mib(max(g.total_mib - used, 0), units), "count": str(len(gpus)),
                "driver_version": driver_version()}
        rows.append([vals[f] for f in fields])
    return rows


def app_rows(gpus: list[GpuSpec], hs: list[Holder], fields: list[str], units: bool) -> list[list[str]]:
    """One row per (process, GPU) with memory, ordered by GPU then pid, like nvidia-smi."""
    rows = []
    for g in gpus:
        for h in sorted(hs, key=lambda h: h.reported_pid):
            mib = h.mem_mib.get(g.index, 0)
            if mib <= 0:
                continue
            vals = {"pid": str(h.reported_pid), "process_name": h.name, "name": h.name, "used_memory": _mib(mib, units),
                    "used_gpu_memory": _mib(mib, units), "gpu_uuid": g.uuid, "gpu_name": g.name}
            rows.append([vals[f] for f in fields])
    return rows


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (0, or 2 on a bad query like nvidia-smi)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and "=" in a:
            k, v = a.split("=", 1)
            opts[k] = v
        elif a in ("--query-gpu", "--query-compute-apps", "--format") and i + 1 < len(argv):
            opts[a] = argv[i + 1]
            i += 1
        else:
            opts[a] = ""
        i += 1
    gpus = load_gpus()
    hs = holders()
    fmt = set(opts.get("--format", "").split(","))
    units = "nounits" not in fmt
    if "-L" in opts or "--list-gpus" in opts:
        for g in gpus:
            print(f"GPU {g.index}: {g.name} (UUID: {g.uuid})")
        return 0
    for key, table, rows_of in (("--query-gpu", _GPU_FIELDS, gpu_rows),
                                ("--query-compute-apps", _APP_FIELDS, app_rows)):
        if key in opts:
            fields = [f.strip() for f in opts[key].split(",") if f.strip()]
            for f in fields:
                if f not in table:
                    print(f'Field "{f}" is not a valid field to query.', file=sys.stdout)
                    print(f"\nRun 'nvidia-smi {key.replace('--', '--help-')}' for usage.", file=sys.stdout)
                    return 2
            if "csv" not in fmt:
                print("Use '--format' to specify the output format (e.g. --format=csv).")
                return 2
            if "noheader" not in fmt:
                print(", ".join(table[f] for f in fields))
            for row in rows_of(gpus, hs, fields, units):
                print(", ".join(row))
            return 0
    # bare call: a compact summary
    print("+-----------------------------------------------------------------------------+")
    print("| NVIDIA-SMI (mtp-remote simulated)                                           |")
    for g in gpus:
        used = sum(h.mem_mib.get(g.index, 0) for h in hs)
        print(f"| {g.index}  {g.name:<28} {used:>6}MiB / {g.total_mib:>6}MiB                    |")
    print("| Processes:                                                                  |")
    for g in gpus:
        for h in hs:
            if h.mem_mib.get(g.index):
                print(f"|  {g.index}  {h.reported_pid:>8}  C  {h.name:<32} {h.mem_mib[g.index]:>6}MiB       |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
