"""The inventory's ``server: {kind: slurm, ...}``: a host whose servers are SLURM jobs submitted from a login node.

The host's own fields (``transport``, ``address``, ``user``, ...) reach the *login node*; its ``workdir`` must be
on a filesystem the compute nodes share (the job's output file is read from there, the server's environment is
handed over there). These fields say how the job is submitted (:mod:`mtp_remote.remote.slurm` builds the batch
script from them) and how long a job may wait in the queue.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from .validation import StrictModel

#: A SLURM time limit: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (sbatch --time), or UNLIMITED.
TIME_LIMIT = re.compile(r"(\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+|\d+-\d+:\d{2}|\d+-\d+:\d{2}:\d{2}|UNLIMITED|INFINITE)")
#: Partition, account, gres and node names: SLURM's own characters, nothing a shell or a script line reads.
SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:,\[\]-]{0,127}")
#: One extra batch-script option (``#SBATCH --qos=high`` or ``--qos=high``): an option, one line.
SBATCH_LINE = re.compile(r"(#SBATCH\s+)?(--?[A-Za-z][A-Za-z0-9-]*(?:[= ][^\n\r]*)?)")
#: Options the tool sets itself (the job's identity, its output file, its one step): an extra line may not.
OWNED_SBATCH = ("--job-name", "-J", "--comment", "--output", "-o", "--error", "-e", "--array", "-a",
                "--chdir", "-D", "--parsable", "--wrap", "--open-mode")


class SlurmServing(StrictModel):
    """``server: {kind: slurm}``: each server is a SLURM job whose only step is the server
    (``exec srun <python> -m sglang.launch_server ...``), submitted with ``sbatch`` on the login node the host
    reaches, followed through its output file, stopped with ``scancel`` (SIGTERM to the step, the drain, SIGKILL,
    then the job)."""

    kind: Literal["slurm"] = Field("slurm", description="slurm: each server is a SLURM job (sbatch on a login node)")
    partition: str | None = Field(None, description="sbatch --partition (default: the cluster's default)")
    account: str | None = Field(None, description="sbatch --account")
    gres: str | None = Field("gpu:1", description="sbatch --gres for the server's job, e.g. gpu:2 (null: none)")
    time_limit: str | None = Field("2:00:00", description="sbatch --time per server job (D-HH:MM:SS, HH:MM:SS, ...)")
    cpus_per_task: int | None = Field(None, ge=1, description="sbatch --cpus-per-task")
    sbatch_lines: list[str] = Field(default_factory=list, description=(
        "Extra batch-script lines, each one option (`#SBATCH --qos=high` or `--qos=high`); not the options the "
        "tool sets (job name, comment, output, array, chdir)"))
    pending_s: float = Field(300.0, gt=0, description=(
        "Seconds a server job may stay PENDING; beyond it the launch fails with the scheduler's reason "
        "(squeue %r) and the job is cancelled"))
    conf: str | None = Field(None, description=(
        "SLURM_CONF for the commands on the login node (a cluster that is not the login node's default; "
        "`make slurm-up`'s is /tmp/mtp-remote-slurm/etc/slurm.conf)"))
    server_host: str = Field("127.0.0.1", description=(
        "--host of the server on its compute node: 127.0.0.1 where the login node is the compute node "
        "(the test cluster); the node's cluster-network address, e.g. 0.0.0.0, where the tunnel must reach "
        "another machine"))
    tool_python: str | None = Field(None, description=(
        "The python with mtp-remote installed on the compute nodes, for `nightly -H <group>` as a job array "
        "(default: the host's python)"))
    runs_dir: str | None = Field(None, description=(
        "Shared runs directory for `nightly -H <group>` as a job array (default: <workdir>/fleet-runs)"))
    drain_hook: str | None = Field(None, description=(
        "Opt-in: a command run on the login node when a node's nightly says spec-corrupts-output; %n is the "
        "node, %h the host, %v the verdict, e.g. scontrol update nodename=%n state=drain "
        "reason=\"mtp-remote: %v\". Off by default"))

    @field_validator("partition", "account", "gres", "time_limit")
    @classmethod
    def _slurm_value(cls, v: str | None, info) -> str | None:
        pattern = TIME_LIMIT if info.field_name == "time_limit" else SLURM_NAME
        if v is not None and not pattern.fullmatch(v):
            raise ValueError(f"{info.field_name} {v!r} is not valid (expected {pattern.pattern})")
        return v

    @field_validator("sbatch_lines")
    @classmethod
    def _lines(cls, lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            m = SBATCH_LINE.fullmatch(line.strip())
            if not m:
                raise ValueError(f"sbatch_lines: {line!r} is not one sbatch option (e.g. '#SBATCH --qos=high')")
            opt = m.group(2)
            name = re.split(r"[= ]", opt, maxsplit=1)[0]
            short = name[:2] if not name.startswith("--") else name  # -ofile is -o file
            if name in OWNED_SBATCH or short in OWNED_SBATCH:
                raise ValueError(f"sbatch_lines: {name} is set by mtp-remote itself (owned: "
                                 f"{', '.join(OWNED_SBATCH)})")
            out.append(opt)
        return out
