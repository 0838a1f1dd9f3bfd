"""SLURM job arrays as facts: the nightly's array script, its tasks in the queue, and moving its fleet directory
(files in, results out) through the login node in one round trip each. Jobs, steps and stops:
:mod:`.slurm`."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from ..config.slurm import SlurmServing
from .slurm import QueueState, batch_script, sbatch_options, with_conf


def plan_array_script(*, name: str, comment: str, fleet_dir: str, tasks: int, settings: SlurmServing,
                      python: str) -> str:
    """The nightly's job array (pure): ``tasks`` tasks (``--array=0-N``), each ``python -m
    mtp_remote.fleet.array_task FLEET_DIR`` on its node (its host is the manifest's entry at
    ``SLURM_ARRAY_TASK_ID``), its output in ``FLEET_DIR/task-<index>.out``. Raises ValueError as
    :func:`~.slurm.plan_batch_script`."""
    if tasks < 1:
        raise ValueError("a job array needs at least one task")
    opts = sbatch_options(name=name, comment=comment, output=f"{fleet_dir}/task-%a.out", workdir=fleet_dir,
                          settings=settings, extra_lines=[f"--array=0-{tasks - 1}"])
    return batch_script(opts, "one task per host of the group: the single-host nightly in place, its server a step",
                        [python, "-m", "mtp_remote.fleet.array_task", fleet_dir])


def array_squeue_command(job_id: int, conf: str | None) -> str:
    """One line per task of array ``job_id`` still in the queue (``-r``: pending tasks one by one, not ranges)."""
    return with_conf(conf, ["squeue", "-h", "-r", "-j", str(int(job_id)), "-o", "%i|%T|%r|%N"]) + " 2>/dev/null"


def parse_array_squeue(output: str) -> dict[int, QueueState]:
    """``array_squeue_command``'s output → {task index: its queue state} (``job_id`` is the array's)."""
    out: dict[int, QueueState] = {}
    for line in output.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4 or "_" not in parts[0]:
            continue
        job, _, index = parts[0].partition("_")
        if job.isdigit() and index.isdigit():
            out[int(index)] = QueueState(job_id=int(job), state=parts[1], reason=parts[2], node=parts[3])
    return out


def tree_command(directory: str, members: Sequence[str]) -> str:
    """``members`` of ``directory`` (those that exist) as a gzipped tar, base64: one round trip brings them."""
    names = " ".join(shlex.quote(m) for m in members)
    return (f"cd {shlex.quote(directory)} 2>/dev/null && "
            f"tar -czf - $(for m in {names}; do [ -e \"$m\" ] && printf '%s ' \"$m\"; done) 2>/dev/null | base64")
