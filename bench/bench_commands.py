"""Issue 21's ``commands`` row: the read-only commands a runbook calls most, as a user runs them (a fresh process
each), over the loopback sshd against a sim host: ``status``, ``preflight`` and ``report last`` (the re-render of
a small run made first). ``MTP_BENCH_SRC=DIR`` measures another tree's ``mtp_remote`` (before/after)."""

from __future__ import annotations

import time
from pathlib import Path


def bench_commands(results: list, repeats: int, ssh_server, tmp: Path, *, row, sim_host, write_config, transports,
                   time_cmd, mtp) -> None:
    from mtp_remote.experiment import diagnose as api

    label, tcfg = transports(ssh_server)[-1]  # ssh when there is an sshd
    cfg = sim_host(label, tmp / "commands-wd", tcfg, SGLANG_SIM_FAULTS="state_leak")
    inv, pb = write_config(tmp, {"h": cfg}, samples=1, max_tokens=128, temperatures=[0.7],
                           prompts=[{"id": "p", "text": "What is 2+2?"}])
    t0 = time.time()
    api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp / "runs-commands")
    print(f"    a run to re-render: {time.time() - t0:.1f} s", flush=True)
    for what, args in (("status", ["status", "-i", inv, "-H", "h"]),
                       ("preflight", ["preflight", "-i", inv, "-H", "h", "-p", pb]),
                       ("report last (re-render)", ["report", "last", "--runs-dir", str(tmp / "runs-commands")])):
        walls, cpus = time_cmd([*mtp, *args], repeats)
        row(results, "commands", label, what, "s", walls, cpu_s=sorted(cpus)[len(cpus) // 2])
