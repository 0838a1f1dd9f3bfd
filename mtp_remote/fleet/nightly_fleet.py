"""The nightly over a group (``nightly -H GROUP``): every host's nightly at once through the fleet runner, then the
fleet's summary.json, junit.xml and metrics.prom in ``RUNS_DIR/fleet-<id>/``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from ..config.paths import DEFAULT_NIGHTLY_PLAYBOOK, HISTORY_FILE
from ..errors import MtpRemoteError
from ..experiment.runner import Hooks
from ..records.fleet import FleetHost, FleetSummary
from ..records.summary import Summary
from ..report import history as store
from ..report.document import load_summary
from ..report.fleet_ci import write_fleet_ci_outputs
from ..report.records import cause_line, failed_summary
from .fleet import run_fleet
from .nightly import check_metrics_file, publish_metrics
from .nightly_array import is_array_group, run_array
from .outcomes import describe_disagreement


@dataclass
class FleetNightlyResult:
    """``summary``: the fleet document (:func:`fleet_summary`); ``report``: the per-host outcomes
    (:class:`mtp_remote.fleet.fleet.FleetReport`); ``fleet_dir``: ``RUNS_DIR/fleet-<id>/``."""

    fleet_id: str
    fleet_dir: Path
    summary: FleetSummary
    report: object
    exit_code: int
    history_db: Path


def run_nightly_fleet(hosts: list[str], *, group: str, inventory=None, playbook=DEFAULT_NIGHTLY_PLAYBOOK,
                      runs_dir: str | Path = "runs", history_db: str | Path | None = None,
                      hooks: Hooks | None = None, metrics_file: str | Path | None = None,
                      max_workers: int = 8,
                      on_progress: Callable[[str, str], None] = lambda host, msg: None) -> FleetNightlyResult:
    """The nightly on every host of ``hosts`` at once (at most ``max_workers``); each host exactly as
    :func:`run_nightly` (own run directory, artefacts and history row with ``group`` and the fleet id, its own
    regression check). Then the fleet's summary.json, junit.xml and metrics.prom in ``RUNS_DIR/fleet-<id>/``
    (``metrics_file``: the fleet's metrics.prom is also published there). Exit code: the most severe of the
    hosts' (2 when some host could not run, else 1 when some host corrupts or regressed, else 3 when some is
    inconclusive). Never raises
    MtpRemoteError for a host; raises ConfigError only for an unusable ``history_db`` or ``metrics_file``.

    When every host is a SLURM host behind one login node the hosts run as one job array instead of one thread
    each (:func:`mtp_remote.fleet.nightly_array.run_array`): the summary then has a ``slurm`` part (the array's
    job id, each host's node and task, the hosts whose task never ran); a login node that cannot be reached or
    an array the scheduler refuses raises RemoteError."""
    if metrics_file is not None:
        check_metrics_file(metrics_file)
    db = store.check_history_path(history_db or Path(runs_dir) / HISTORY_FILE)
    started = datetime.now(timezone.utc)
    slurm = None
    if is_array_group(inventory, hosts):  # SLURM hosts behind one login node: one job array, a task per host
        report, slurm = run_array(hosts, group=group, inventory=inventory, playbook=playbook, runs_dir=runs_dir,
                                  history_db=db, on_progress=on_progress)
    else:
        report = run_fleet("nightly", hosts, inventory=inventory, playbook=playbook, runs_dir=runs_dir,
                           max_workers=max_workers, on_progress=on_progress, hooks=hooks,
                           nightly={"history_db": db, "group": group})
    fleet_dir = Path(runs_dir) / f"fleet-{report.run_id}"
    host_docs = {h.host: _host_doc(Path(runs_dir), h, playbook) for h in report.hosts}
    doc = fleet_summary(report, group=group, host_docs=host_docs, started_at=started, playbook=playbook,
                        runs_dir=Path(runs_dir))
    if slurm is not None:
        doc.slurm = slurm
    fleet_dir.mkdir(parents=True, exist_ok=True)
    (fleet_dir / "summary.json").write_text(json.dumps(doc.to_dict(), indent=2, default=str) + "\n")
    write_fleet_ci_outputs(doc, host_docs, fleet_dir)
    if metrics_file is not None:
        publish_metrics(fleet_dir / "metrics.prom", Path(metrics_file))
    return FleetNightlyResult(doc.fleet_id, fleet_dir, doc, report, doc.exit_code, db)


def _host_doc(runs_dir: Path, outcome, playbook) -> Summary:
    """The host's summary.json; for a host whose run left none (a bug on that host), a failed document built
    from its outcome."""
    if outcome.run_id:
        try:
            return load_summary(runs_dir / outcome.run_id)
        except (OSError, ValueError):
            pass
    err = MtpRemoteError(outcome.error or "the host's run left no summary")
    return failed_summary(run_id=outcome.run_id or "none", host={"name": outcome.host},
                          playbook={"name": Path(str(playbook)).stem, "file": str(playbook)},
                          started_at=datetime.now(timezone.utc), error=err, exit_code=outcome.exit_code)


_BAD_KINDS = ("spec-corrupts-output", "launch-failed", "crashed", "hung")


def fleet_summary(report, *, group: str, host_docs: dict[str, Summary], started_at: datetime, playbook,
                  runs_dir: Path) -> FleetSummary:
    """The fleet nightly's document: per host its status, exit code, run id and directory, verdicts, the
    profiles that corrupt (or did not launch), its regressions and the cause when it could not run; the
    hosts that disagree (:func:`mtp_remote.fleet.fleet.disagreements`, with the facts they differ in), the hosts
    that could not run and those that corrupt. JSON-able (``to_dict``)."""
    finished = datetime.now(timezone.utc)
    hosts = [_host_line(h, Summary.of(host_docs[h.host]), runs_dir) for h in report.hosts]
    names = [d.playbook.name for d in map(Summary.of, host_docs.values()) if d.playbook.name]
    return FleetSummary(
        schema_version=1, kind="nightly-fleet", tool="mtp-remote", tool_version=__version__,
        fleet_id=f"fleet-{report.run_id}", group=group, hosts_planned=[h.host for h in report.hosts],
        playbook={"name": names[0] if names else Path(str(playbook)).stem, "file": str(playbook)},
        started_at=started_at.isoformat(), finished_at=finished.isoformat(), wall_s=report.wall_s,
        max_workers=report.max_workers, exit_code=report.exit_code, hosts=hosts,
        could_not_run=[x.host for x in hosts if x.status != "completed"],
        corrupt_hosts=[x.host for x in hosts if x.corrupts], regressed_hosts=[x.host for x in hosts if x.regressed],
        disagreements=[d.to_dict() for d in report.disagreements],
        disagreement_lines=[describe_disagreement(x) for x in report.disagreements],
        files={"junit": "junit.xml", "metrics": "metrics.prom", "report": "fleet.md"})


def _host_line(h, d: Summary, runs_dir: Path) -> FleetHost:
    """One host's line of the fleet summary, from its outcome ``h`` and its run's summary ``d``."""
    reg = d.regression
    return FleetHost(
        host=h.host, status=d.status, exit_code=h.exit_code, run_id=h.run_id,
        run_dir=str(runs_dir / h.run_id) if h.run_id else None, duration_s=h.duration_s,
        verdicts=[{"profile": v.profile, "kind": v.kind, "evidence": v.evidence} for v in d.verdicts],
        corrupts=[v.profile for v in d.verdicts if v.kind.startswith(_BAD_KINDS)],
        regressed=reg.regressed if reg else [], regression_baseline=reg.baseline_run if reg else None,
        cause=cause_line(d) if d.status != "completed" else None, facts=h.facts)
