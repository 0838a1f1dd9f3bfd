"""The nightly job: diagnose, record, check for regressions — and leave the four artefacts whatever happens.

:func:`run_nightly` never lets a night go missing: a run that cannot be done (inventory or playbook invalid,
SSH down, lock held, baseline failed) still leaves ``runs/<run-id>/summary.json`` (status and cause),
``junit.xml`` (a failing case ``run``), ``metrics.prom`` (``mtp_remote_up 0`` and the timestamp) and a history
row. A completed run is checked against the last good run and the spread of earlier ones
(:mod:`mtp_remote.regression`); the result is added to its summary.json, junit.xml and metrics.prom.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from . import api, store
from .errors import EXIT_CORRUPT, MtpRemoteError
from .records import failed_summary, record_history, write_failed_run
from .regression import RegressionReport, check_regressions
from .report.ci import write_ci_outputs
from .report.document import save_summary
from .runner import Hooks, new_run_id


@dataclass
class NightlyResult:
    """``error``: the run's error when it could not be done (its artefacts are written anyway)."""

    run_id: str
    run_dir: Path
    summary: dict
    exit_code: int
    history_db: Path
    regression: RegressionReport | None = None
    error: MtpRemoteError | None = None


def _names(inventory, host: str | None, playbook) -> tuple[str, str]:
    """Host and playbook names for a run that failed before its config was read: best effort, never raises."""
    from .config import load_inventory, load_playbook

    h, p = host or "unknown", Path(str(playbook)).stem
    try:
        h = load_inventory(api.find_inventory(inventory)).get(host).name
    except MtpRemoteError:
        pass
    try:
        p = load_playbook(api.find_playbook(playbook, inventory)).name
    except MtpRemoteError:
        pass
    return h, p


def run_nightly(*, inventory=None, host: str | None = None, playbook="playbooks/nightly.yaml",
                runs_dir: str | Path = "runs", history_db: str | Path | None = None,
                hooks: Hooks | None = None, metrics_file: str | Path | None = None) -> NightlyResult:
    """Run the nightly playbook on ``host``; returns a :class:`NightlyResult` (never raises MtpRemoteError:
    the error is in ``result.error`` and the artefacts are on disk). Exit code: the run's, 1 when a tested
    regression was found, 2 when the run could not be done, 130 when interrupted. ``metrics_file``: also
    copy the run's metrics.prom there (atomically: a node-exporter textfile collector never reads half a
    file)."""
    res = _run(inventory, host, playbook, runs_dir, history_db, hooks)
    if metrics_file is not None:
        publish_metrics(res.run_dir / "metrics.prom", Path(metrics_file))
    return res


def publish_metrics(src: Path, dest: Path) -> None:
    """Copy ``src`` to ``dest`` through a temporary file in the same directory and a rename."""
    import os

    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    tmp.write_bytes(src.read_bytes())
    os.replace(tmp, dest)


def _run(inventory, host, playbook, runs_dir, history_db, hooks) -> NightlyResult:
    db = store.check_history_path(history_db or Path(runs_dir) / api.HISTORY_FILE)
    started = datetime.now(timezone.utc)
    try:
        res = api.diagnose(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir, hooks=hooks,
                           history=db)
    except MtpRemoteError as e:
        run_dir = getattr(e, "run_dir", None)
        if run_dir is None:  # failed before the run directory existed (config): write the artefacts here
            run_id = new_run_id(started)
            run_dir = Path(runs_dir) / run_id
            h, p = _names(inventory, host, playbook)
            doc = failed_summary(run_id=run_id, host={"name": h}, playbook={"name": p, "file": str(playbook)},
                                 started_at=started, error=e)
            write_failed_run(run_dir, doc, db)
        else:
            run_id = e.run_id
        from .report.document import load_summary

        return NightlyResult(run_id, Path(run_dir), load_summary(run_dir), e.exit_code, db, error=e)
    doc = res.summary
    earlier = store.good_runs(db, host=doc["host"]["name"], playbook=doc["playbook"]["name"], before_run=res.run_id)
    rep = check_regressions(doc, earlier)
    doc["regression"] = rep.to_dict()
    code = max(res.exit_code, EXIT_CORRUPT if rep.regressed else 0)
    doc["exit_code"] = code
    save_summary(doc, res.run_dir)
    write_ci_outputs(doc, res.run_dir)
    record_history(db, doc, res.run_dir)
    return NightlyResult(res.run_id, res.run_dir, doc, code, db, regression=rep)
