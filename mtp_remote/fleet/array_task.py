"""One task of the nightly's job array: the single-host nightly, in place on the node the scheduler gave it.

Run by the array's batch script as ``python -m mtp_remote.fleet.array_task FLEET_DIR`` (see
:func:`mtp_remote.remote.slurm.plan_array_script`). ``FLEET_DIR`` (on the filesystem the nodes share) holds what
the controller (:mod:`mtp_remote.fleet.nightly_array`) put there: ``manifest.json`` (fleet id, group, the hosts
in task order), ``inventory.yaml`` (those hosts, reached locally on the node) and ``playbook.yaml``. The task's
host is ``hosts[SLURM_ARRAY_TASK_ID]``; its servers are steps of this task's allocation (``srun --overlap``:
``MTP_REMOTE_SLURM_ALLOCATION``, read by :func:`mtp_remote.serving.kinds.open_server`), so the scheduler that
gave the task its GPUs also ends the server with it. The run goes to ``FLEET_DIR/runs/<run-id>/`` and its
outcome to ``FLEET_DIR/results/<index>.json`` (``started`` first, then the outcome): what the controller reads.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

from ..serving.slurm import ALLOCATION_ENV
from .records import ArrayManifest, TaskRecord


def _write(path: Path, doc: TaskRecord) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc.to_dict(), indent=1, default=str) + "\n")
    os.replace(tmp, path)


def run_task(fleet_dir: Path, index: int, env: dict[str, str]) -> int:
    """The nightly of the manifest's host ``index`` in ``fleet_dir``; returns its exit code. Writes
    ``results/<index>.json`` whatever happens (a task that raised says so in ``error``)."""
    from .nightly import run_nightly  # deferred: the task's first lines (manifest, started record) need no tool

    manifest = ArrayManifest.of(json.loads((fleet_dir / "manifest.json").read_text()))
    host = manifest.hosts[index]
    results = fleet_dir / "results"
    results.mkdir(exist_ok=True)
    rec = TaskRecord(index=index, host=host, node=env.get("SLURMD_NODENAME") or socket.gethostname(),
                     job=f"{env.get('SLURM_ARRAY_JOB_ID', '?')}_{index}", job_id=env.get("SLURM_JOB_ID"),
                     started=time.time(), status="started")
    _write(results / f"{index}.json", rec)
    os.environ[ALLOCATION_ENV] = f"{env.get('SLURM_JOB_ID', '')} {env.get('SLURM_ARRAY_JOB_ID', '')}_{index}"
    try:
        res = run_nightly(inventory=fleet_dir / "inventory.yaml", host=host, playbook=fleet_dir / "playbook.yaml",
                          runs_dir=fleet_dir / "runs", history_db=fleet_dir / "runs" / f"history-{index}.sqlite",
                          fleet={"group": manifest.group, "fleet_id": manifest.fleet_id})
        rec.status, rec.exit_code, rec.run_id = "done", res.exit_code, res.run_id
        rec.error = res.error.message if res.error is not None else None
        rec.verdicts = {v.profile: v.kind for v in res.summary.verdicts}
    except Exception as e:  # noqa: BLE001 - the controller must learn why, whatever it was
        rec.status, rec.exit_code, rec.run_id, rec.error = "done", 2, None, f"{type(e).__name__}: {e}"
        rec.verdicts = {}
    rec.facts = _facts(fleet_dir / "inventory.yaml", host)
    rec.finished = time.time()
    _write(results / f"{index}.json", rec)
    return int(rec.exit_code)


def _facts(inventory: Path, host: str) -> dict:
    """The host's facts as the fleet compares hosts (:func:`mtp_remote.fleet.fleet.host_facts`), read here on
    its node: the controller never reaches the nodes."""
    from .outcomes import host_facts  # deferred: as run_nightly above

    try:
        return host_facts(inventory, host)
    except Exception as e:  # noqa: BLE001 - facts are evidence, never the task's end
        return {"error": f"{type(e).__name__}: {e}"}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or "SLURM_ARRAY_TASK_ID" not in os.environ:
        print("usage: python -m mtp_remote.fleet.array_task FLEET_DIR (as a task of the nightly's job array)",
              file=sys.stderr)
        return 2
    return run_task(Path(args[0]), int(os.environ["SLURM_ARRAY_TASK_ID"]), dict(os.environ))


if __name__ == "__main__":
    sys.exit(main())
