"""The operations behind both entry points (``cli.py`` and ``tasks.py``), so the two stay thin and alike.

``diagnose`` runs a playbook on a host and writes ``runs/<run-id>/``; ``analyze_files`` measures texts.
Errors are :class:`~mtp_remote.errors.MtpRemoteError` subclasses; nothing here prints except through the
hooks given.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .analysis.verdict import exit_code as verdicts_exit_code
from .config import HostConfig, Inventory, Playbook, load_inventory, load_playbook
from .diagnosis import diagnose as diagnose_samples
from .errors import EXIT_RUN_FAILED, ConfigError
from .remote import connect as transport
from .report.document import build_summary, save_summary
from .report.ci import write_ci_outputs
from .report.html import write_html
from .report.markdown import write_markdown
from .runner import Hooks, Runner, load_samples, new_run_id

DEFAULT_INVENTORY = "inventory.yaml"
DEFAULT_PLAYBOOK = "playbooks/diagnose-mtp.yaml"


@dataclass
class DiagnoseResult:
    run_id: str
    run_dir: Path
    summary: dict
    exit_code: int


def remote_python(host: HostConfig) -> str:
    """The python that runs the server: the host's, else this python for a local sim, else python3."""
    if host.python:
        return host.python
    if host.transport == "local" and host.is_sim:
        return sys.executable
    return "python3"


def load_config(inventory: str | Path, playbook: str | Path, host: str | None) -> tuple[Inventory, HostConfig, Playbook]:
    inv = load_inventory(inventory)
    return inv, inv.get(host), load_playbook(playbook)


def diagnose(*, inventory: str | Path = DEFAULT_INVENTORY, playbook: str | Path = DEFAULT_PLAYBOOK,
             host: str | None = None, runs_dir: str | Path = "runs", profiles: list[str] | None = None,
             resume: str | None = None, hooks: Hooks | None = None, c=None,
             overrides: dict | None = None) -> DiagnoseResult:
    """Run the speculative vs baseline experiment of ``playbook`` on ``host`` and write the run directory.

    ``resume`` continues an earlier run id (stored samples are not requested again); ``overrides`` updates
    playbook fields (e.g. ``{"samples": 2}``). Returns the summary and the exit code (0 healthy, 1 a
    speculative profile corrupts output or failed to launch). Raises MtpRemoteError when the run cannot be
    done; the samples stored so far are kept."""
    _, host_cfg, pb = load_config(inventory, playbook, host)
    if overrides:
        try:
            pb = Playbook.model_validate({**pb.model_dump(), **overrides})
        except ValueError as e:
            raise ConfigError(f"invalid override: {e}", file=str(playbook)) from None
    started = datetime.now(timezone.utc)
    run_id = resume or new_run_id(started)
    run_dir = Path(runs_dir) / run_id
    if resume and not run_dir.exists():
        raise ConfigError(f"no run {resume!r} to resume in {runs_dir}/", field="--resume")
    run_dir.mkdir(parents=True, exist_ok=True)
    runner = Runner(host_cfg, pb, run_dir, run_id=run_id, python=remote_python(host_cfg), profiles=profiles,
                    hooks=hooks, c=c)
    try:
        profile_runs = runner.run()
    except BaseException:
        _write_partial(run_dir, runner)
        raise
    samples = load_samples(run_dir / "samples.jsonl")
    spec = {pr.profile: pr.speculative for pr in profile_runs}
    failures = {pr.profile: (pr.cause or "unknown", pr.hint or "") for pr in profile_runs
                if not pr.launched and (pr.outcome or {}).get("kind") != "skipped"}
    diag = diagnose_samples(baseline=pb.baseline, profiles=spec, samples=samples, launch_failures=failures,
                            alpha=pb.compare.alpha)
    code = verdicts_exit_code(diag.verdicts)
    doc = build_summary(run_id=run_id, host=host_cfg, playbook=pb, profile_runs=profile_runs, diagnosis=diag,
                        exit_code=code, started_at=started, n_samples=len(samples), playbook_file=str(playbook))
    save_summary(doc, run_dir)
    write_markdown(doc, samples, run_dir)
    write_html(doc, samples, run_dir)
    write_ci_outputs(doc, run_dir)
    return DiagnoseResult(run_id=run_id, run_dir=run_dir, summary=doc, exit_code=code)


def _write_partial(run_dir: Path, runner: Runner) -> None:
    """Keep a note of how far an aborted run got (samples.jsonl is already on disk)."""
    import json

    note = {"aborted": True, "profiles": [pr.profile for pr in runner.profile_runs],
            "exit_code": EXIT_RUN_FAILED,
            "resume": f"mtp-remote diagnose --resume {runner.run_id}"}
    (run_dir / "partial.json").write_text(json.dumps(note, indent=2) + "\n")


@contextlib.contextmanager
def open_host(inventory: str | Path = DEFAULT_INVENTORY, host: str | None = None, c=None):
    """Yield (HostConfig, transport, remote python) for an inventory host; closes the connection after."""
    inv = load_inventory(inventory)
    cfg = inv.get(host)
    own = c is None
    conn = c or transport.connect(cfg)
    try:
        yield cfg, conn, remote_python(cfg)
    finally:
        if own:
            transport.close(conn)
