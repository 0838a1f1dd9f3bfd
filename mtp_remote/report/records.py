"""What a run that could not be done still leaves behind, so no run (and no night) goes missing.

A failed or interrupted run writes, in its run directory: ``summary.json`` with ``status`` (``failed`` or
``interrupted``) and ``cause`` (the error's one line, its type and evidence tail), ``junit.xml`` (one failing
test case ``run`` with the cause), ``metrics.prom`` (``mtp_remote_up 0``, ``mtp_remote_run_failed 1`` and the
timestamp) and a row in the history (:mod:`mtp_remote.report.history`). A completed run's artefacts are written by
``api.diagnose``; both kinds go into the same history.

A run directory without ``run.json`` cannot be resumed: a failure before any sample leaves only these
artefacts, never a directory posing as resumable.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from . import history as store
from .ci import write_ci_outputs
from ..records.summary import SCHEMA_VERSION, Cause, Summary
from .document import save_summary

log = logging.getLogger(__name__)


def failed_summary(*, run_id: str, host: dict, playbook: dict, started_at: datetime, error: BaseException,
                   status: str = "failed", exit_code: int | None = None, n_samples: int = 0,
                   resume: str | None = None) -> Summary:
    """The summary document of a run that did not complete. ``host``/``playbook``: at least ``{"name"}``
    (``report.document.host_facts`` when the inventory was read). ``exit_code`` defaults to the error's
    (2 for a run that could not be done, 130 interrupted)."""
    finished = datetime.now(timezone.utc)
    code = exit_code if exit_code is not None else getattr(error, "exit_code", 2)
    evidence = getattr(error, "evidence", None)
    return Summary(
        schema_version=SCHEMA_VERSION, tool="mtp-remote", tool_version=__version__, run_id=run_id, status=status,
        cause=Cause(message=str(error) or type(error).__name__, type=type(error).__name__,
                    evidence=evidence[-2000:] if evidence else None),
        started_at=started_at.isoformat(), finished_at=finished.isoformat(),
        duration_s=round((finished - started_at).total_seconds(), 2),
        host=host, simulated=host.get("simulated"), playbook=playbook,
        profiles=[], cells=[], verdicts=[], n_samples=n_samples, resume=resume, exit_code=code,
        files={"junit": "junit.xml", "metrics": "metrics.prom"})


def cause_line(doc: Summary | dict) -> str | None:
    """The one-line cause of a failed run's document (None for a completed run)."""
    return Summary.of(doc).cause_line


def write_failed_run(run_dir: Path, doc: dict, history_db: str | Path | None) -> None:
    """Write summary.json, junit.xml and metrics.prom of a failed run into ``run_dir`` (created) and its
    history row (``history_db`` None: no history). A history that cannot be written is logged, not raised:
    the run's own error is the one the operator must see."""
    run_dir.mkdir(parents=True, exist_ok=True)
    save_summary(doc, run_dir)
    write_ci_outputs(doc, run_dir)
    if history_db is not None:
        record_history(history_db, doc, run_dir)


def record_history(history_db: str | Path, doc: dict, run_dir: Path) -> bool:
    """Add the run to the history; False (and a warning) when the history cannot be written."""
    try:
        store.record_run(history_db, doc, run_dir)
        return True
    except Exception as e:  # noqa: BLE001 - sqlite3, OS or config errors: never lose the run over its history
        log.warning("could not record run %s in %s: %s", doc.get("run_id"), history_db, e)
        return False
