"""The nightly job: diagnose, record, check for regressions — and leave the four artefacts whatever happens.

:func:`run_nightly` never lets a night go missing: a run that cannot be done (inventory or playbook invalid,
SSH down, lock held, baseline failed) still leaves ``runs/<run-id>/summary.json`` (status and cause),
``junit.xml`` (a failing case ``run``), ``metrics.prom`` (``mtp_remote_up 0`` and the timestamp) and a history
row. A completed run is checked against the earlier good runs (loops pooled, speed against their spread)
(:mod:`mtp_remote.fleet.regression`); the result is added to its summary.json, junit.xml and metrics.prom.

:func:`~mtp_remote.fleet.nightly_fleet.run_nightly_fleet` (``nightly -H GROUP`` or ``-H a,b,c``) runs that nightly on every host at once
(:func:`mtp_remote.fleet.fleet.run_fleet`: a thread and a connection per host, a concurrency limit, one host's
failure never stops the others). Each host keeps its own run directory and history row — the row carrying the
group and the fleet id — and is checked against *its own* earlier runs. The fleet adds
``runs/fleet-<id>/`` with ``summary.json`` (every host's verdicts, the hosts that disagree, the hosts that
could not run), ``junit.xml`` (one case per host) and ``metrics.prom`` (every host's gauges with a ``group``
label, plus fleet counts), beside the fleet report's ``fleet.json``/``fleet.md``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..config.loaded import as_loaded, find_playbook, inventory_file
from ..config.paths import DEFAULT_NIGHTLY_PLAYBOOK, HISTORY_FILE
from ..config.playbook import load_playbook
from ..errors import EXIT_CORRUPT, ConfigError, MtpRemoteError, worst_exit
from ..experiment import diagnose as api
from ..experiment.run_id import new_run_id
from ..experiment.runner import Hooks
from ..report import history as store
from ..report.ci import write_ci_outputs
from ..report.document import load_summary, save_summary
from ..records.summary import Summary
from ..report.records import failed_summary, record_history, write_failed_run
from .regression import RegressionReport, check_regressions

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
    h, p = host or "unknown", Path(str(playbook)).stem
    try:
        h = as_loaded(inventory).host(host).name
    except MtpRemoteError:
        pass
    try:
        p = load_playbook(find_playbook(playbook, inventory_file(inventory))).name
    except MtpRemoteError:
        pass
    return h, p


def run_nightly(*, inventory=None, host: str | None = None, playbook=DEFAULT_NIGHTLY_PLAYBOOK,
                runs_dir: str | Path = "runs", history_db: str | Path | None = None,
                hooks: Hooks | None = None, metrics_file: str | Path | None = None,
                fleet: dict | None = None) -> NightlyResult:
    """Run the nightly playbook on ``host``; returns a :class:`NightlyResult` (never raises MtpRemoteError:
    the error is in ``result.error`` and the artefacts are on disk). Exit code: the run's, 1 when a tested
    regression was found, 2 when the run could not be done, 130 when interrupted. ``metrics_file``: also
    copy the run's metrics.prom there (atomically: a node-exporter textfile collector never reads half a
    file). ``fleet``: ``{"group", "fleet_id"}`` when the run is one host of a fleet nightly (stored in
    summary.json and the history row). Raises ConfigError for a ``metrics_file`` that cannot be written,
    before the run (:func:`check_metrics_file`)."""
    if metrics_file is not None:
        check_metrics_file(metrics_file)
    res = _run(inventory, host, playbook, runs_dir, history_db, hooks, fleet)
    if metrics_file is not None:
        publish_metrics(res.run_dir / "metrics.prom", Path(metrics_file))
    return res


def check_metrics_file(path: str | Path) -> Path:
    """``--metrics-file`` checked before a night runs (a night can take hours; finding out after it, with a
    traceback, lost the metrics): its directory exists and is writable, and the path is not a directory.
    Raises ConfigError naming the file and what is wrong."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    problem = ("is a directory; give a file name (e.g. mtp_remote.prom)" if p.is_dir()
               else f"its directory {parent} does not exist" if not parent.is_dir()
               else f"its directory {parent} is not writable" if not os.access(parent, os.W_OK | os.X_OK)
               else None)
    if problem:
        raise ConfigError(problem, file=str(p), field="--metrics-file")
    return p


def publish_metrics(src: Path, dest: Path) -> None:
    """Copy ``src`` to ``dest`` through a temporary file in the same directory and a rename. Raises ConfigError
    naming ``dest`` when it cannot be written (the run's own artefacts are on disk already)."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(src.read_bytes())
        os.replace(tmp, dest)
    except OSError as e:
        raise ConfigError(f"cannot write it ({e.strerror}); the run's own metrics.prom is {src}", file=str(dest),
                          field="--metrics-file") from None


def _run(inventory, host, playbook, runs_dir, history_db, hooks, fleet=None) -> NightlyResult:
    db = store.check_history_path(history_db or Path(runs_dir) / HISTORY_FILE)
    started = datetime.now(timezone.utc)
    try:
        res = api.diagnose(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir, hooks=hooks,
                           history=db)
    except MtpRemoteError as e:
        run_dir = e.run_dir
        if run_dir is None:  # failed before the run directory existed (config): write the artefacts here
            run_id = new_run_id(started)
            run_dir = Path(runs_dir) / run_id
            h, p = _names(inventory, host, playbook)
            doc = failed_summary(run_id=run_id, host={"name": h}, playbook={"name": p, "file": str(playbook)},
                                 started_at=started, error=e)
            if fleet:
                doc.fleet = fleet
            write_failed_run(run_dir, doc, db)
        else:
            run_id = e.run_id
        doc = load_summary(run_dir)
        if fleet and doc.fleet != fleet:  # recorded by diagnose without its group: record it again
            doc.fleet = fleet
            save_summary(doc, Path(run_dir))
            record_history(db, doc, Path(run_dir))
        return NightlyResult(run_id, Path(run_dir), doc, e.exit_code, db, error=e)
    doc = res.summary
    if fleet:
        doc.fleet = fleet
    code, rep = check_and_record(doc, Path(res.run_dir), db, res.exit_code)
    return NightlyResult(res.run_id, res.run_dir, doc, code, db, regression=rep)


def check_and_record(doc: Summary, run_dir: Path, db: Path, exit_code: int) -> tuple[int, RegressionReport]:
    """A completed run's nightly tail: the regression check against the host's earlier good runs in ``db``, the
    result added to its summary.json, junit.xml and metrics.prom, its history row. Returns (the exit code, 1
    when a tested regression was found; the check)."""
    earlier = store.good_runs(db, host=doc.host.name, playbook=doc.playbook.name, before_run=doc.run_id)
    rep = check_regressions(doc, earlier)
    doc.regression = rep.to_dict()
    code = worst_exit([exit_code, EXIT_CORRUPT if rep.regressed else 0])
    doc.exit_code = code
    save_summary(doc, run_dir)
    write_ci_outputs(doc, run_dir)
    record_history(db, doc, run_dir)
    return code, rep


# -- a nightly over a group ------------------------------------------------------------------------------

def fleet_spec(inventory, spec: str | None) -> tuple[list[str], str] | None:
    """``(hosts, group)`` when ``-H`` names a group or ``a,b,c`` (``group``: the group's name, or the hosts
    joined by commas); None for one host, and when the inventory cannot be read (the single-host nightly
    then records that failure, so the night does not go missing)."""
    if not spec:
        return None

    try:
        inv = as_loaded(inventory).inventory
        hosts = inv.expand(spec)
    except MtpRemoteError:
        return None
    if spec.strip() in inv.groups:
        return hosts, spec.strip()
    return (hosts, ",".join(hosts)) if "," in spec else None
