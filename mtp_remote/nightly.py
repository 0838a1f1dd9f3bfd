"""The nightly job: diagnose, record, check for regressions — and leave the four artefacts whatever happens.

:func:`run_nightly` never lets a night go missing: a run that cannot be done (inventory or playbook invalid,
SSH down, lock held, baseline failed) still leaves ``runs/<run-id>/summary.json`` (status and cause),
``junit.xml`` (a failing case ``run``), ``metrics.prom`` (``mtp_remote_up 0`` and the timestamp) and a history
row. A completed run is checked against the last good run and the spread of earlier ones
(:mod:`mtp_remote.regression`); the result is added to its summary.json, junit.xml and metrics.prom.

:func:`run_nightly_fleet` (``nightly -H GROUP`` or ``-H a,b,c``) runs that nightly on every host at once
(:func:`mtp_remote.fleet.run_fleet`: a thread and a connection per host, a concurrency limit, one host's
failure never stops the others). Each host keeps its own run directory and history row — the row carrying the
group and the fleet id — and is checked against *its own* last good run. The fleet adds
``runs/fleet-<id>/`` with ``summary.json`` (every host's verdicts, the hosts that disagree, the hosts that
could not run), ``junit.xml`` (one case per host) and ``metrics.prom`` (every host's gauges with a ``group``
label, plus fleet counts), beside the fleet report's ``fleet.json``/``fleet.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from . import __version__, api, store
from .errors import EXIT_CORRUPT, ConfigError, MtpRemoteError, worst_exit
from .records import failed_summary, record_history, write_failed_run
from .regression import RegressionReport, check_regressions
from .report.ci import write_ci_outputs
from .report.document import load_summary, save_summary
from .runner import Hooks, new_run_id

DEFAULT_NIGHTLY_PLAYBOOK = "playbooks/nightly.yaml"


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
    import os

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
    import os

    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(src.read_bytes())
        os.replace(tmp, dest)
    except OSError as e:
        raise ConfigError(f"cannot write it ({e.strerror}); the run's own metrics.prom is {src}", file=str(dest),
                          field="--metrics-file") from None


def _run(inventory, host, playbook, runs_dir, history_db, hooks, fleet=None) -> NightlyResult:
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
            if fleet:
                doc["fleet"] = fleet
            write_failed_run(run_dir, doc, db)
        else:
            run_id = e.run_id
        doc = load_summary(run_dir)
        if fleet and doc.get("fleet") != fleet:  # recorded by diagnose without its group: record it again
            doc["fleet"] = fleet
            save_summary(doc, Path(run_dir))
            record_history(db, doc, Path(run_dir))
        return NightlyResult(run_id, Path(run_dir), doc, e.exit_code, db, error=e)
    doc = res.summary
    if fleet:
        doc["fleet"] = fleet
    earlier = store.good_runs(db, host=doc["host"]["name"], playbook=doc["playbook"]["name"], before_run=res.run_id)
    rep = check_regressions(doc, earlier)
    doc["regression"] = rep.to_dict()
    code = worst_exit([res.exit_code, EXIT_CORRUPT if rep.regressed else 0])
    doc["exit_code"] = code
    save_summary(doc, res.run_dir)
    write_ci_outputs(doc, res.run_dir)
    record_history(db, doc, res.run_dir)
    return NightlyResult(res.run_id, res.run_dir, doc, code, db, regression=rep)


# -- a nightly over a group ------------------------------------------------------------------------------

@dataclass
class FleetNightlyResult:
    """``summary``: the fleet document (:func:`fleet_summary`); ``report``: the per-host outcomes
    (:class:`mtp_remote.fleet.FleetReport`); ``fleet_dir``: ``RUNS_DIR/fleet-<id>/``."""

    fleet_id: str
    fleet_dir: Path
    summary: dict
    report: object
    exit_code: int
    history_db: Path


def fleet_spec(inventory, spec: str | None) -> tuple[list[str], str] | None:
    """``(hosts, group)`` when ``-H`` names a group or ``a,b,c`` (``group``: the group's name, or the hosts
    joined by commas); None for one host, and when the inventory cannot be read (the single-host nightly
    then records that failure, so the night does not go missing)."""
    if not spec:
        return None
    from .config import load_inventory

    try:
        inv = load_inventory(api.find_inventory(inventory))
        hosts = inv.expand(spec)
    except MtpRemoteError:
        return None
    if spec.strip() in inv.groups:
        return hosts, spec.strip()
    return (hosts, ",".join(hosts)) if "," in spec else None


def run_nightly_fleet(hosts: list[str], *, group: str, inventory=None, playbook=DEFAULT_NIGHTLY_PLAYBOOK,
                      runs_dir: str | Path = "runs", history_db: str | Path | None = None,
                      hooks: Hooks | None = None, metrics_file: str | Path | None = None,
                      max_workers: int = 8,
                      on_progress: Callable[[str, str], None] = lambda host, msg: None) -> FleetNightlyResult:
    """The nightly on every host of ``hosts`` at once (at most ``max_workers``); each host exactly as
    :func:`run_nightly` (own run directory, artefacts and history row with ``group`` and the fleet id, its own
    regression check). Then the fleet's summary.json, junit.xml and metrics.prom in ``RUNS_DIR/fleet-<id>/``
    (``metrics_file``: the fleet's metrics.prom is also published there). Exit code: the largest of the
    hosts' (2 when some host could not run, else 1 when some host corrupts or regressed). Never raises
    MtpRemoteError for a host; raises ConfigError only for an unusable ``history_db`` or ``metrics_file``."""
    from .fleet import run_fleet
    from .report.fleet_ci import write_fleet_ci_outputs

    if metrics_file is not None:
        check_metrics_file(metrics_file)
    db = store.check_history_path(history_db or Path(runs_dir) / api.HISTORY_FILE)
    started = datetime.now(timezone.utc)
    report = run_fleet("nightly", hosts, inventory=inventory, playbook=playbook, runs_dir=runs_dir,
                       max_workers=max_workers, on_progress=on_progress, hooks=hooks,
                       nightly={"history_db": db, "group": group})
    fleet_dir = Path(runs_dir) / f"fleet-{report.run_id}"
    host_docs = {h.host: _host_doc(Path(runs_dir), h, playbook) for h in report.hosts}
    doc = fleet_summary(report, group=group, host_docs=host_docs, started_at=started, playbook=playbook,
                        runs_dir=Path(runs_dir))
    fleet_dir.mkdir(parents=True, exist_ok=True)
    (fleet_dir / "summary.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    write_fleet_ci_outputs(doc, host_docs, fleet_dir)
    if metrics_file is not None:
        publish_metrics(fleet_dir / "metrics.prom", Path(metrics_file))
    return FleetNightlyResult(doc["fleet_id"], fleet_dir, doc, report, doc["exit_code"], db)


def _host_doc(runs_dir: Path, outcome, playbook) -> dict:
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


def fleet_summary(report, *, group: str, host_docs: dict[str, dict], started_at: datetime, playbook,
                  runs_dir: Path) -> dict:
    """The fleet nightly's document: per host its status, exit code, run id and directory, verdicts, the
    profiles that corrupt (or did not launch), its regressions and the cause when it could not run; the
    hosts that disagree (:func:`mtp_remote.fleet.disagreements`, with the facts they differ in), the hosts
    that could not run and those that corrupt. JSON-able."""
    from .fleet import describe_disagreement
    from .records import cause_line

    finished = datetime.now(timezone.utc)
    hosts = []
    for h in report.hosts:
        d = host_docs[h.host]
        reg = d.get("regression") or {}
        hosts.append({
            "host": h.host, "status": d.get("status", "completed"), "exit_code": h.exit_code, "run_id": h.run_id,
            "run_dir": str(runs_dir / h.run_id) if h.run_id else None, "duration_s": h.duration_s,
            "verdicts": [{"profile": v["profile"], "kind": v["kind"], "evidence": v.get("evidence")}
                         for v in d.get("verdicts", [])],
            "corrupts": [v["profile"] for v in d.get("verdicts", []) if v["kind"].startswith(_BAD_KINDS)],
            "regressed": reg.get("regressed", []), "regression_baseline": reg.get("baseline_run"),
            "cause": cause_line(d) if d.get("status", "completed") != "completed" else None,
            "facts": h.facts})
    names = [x["playbook"]["name"] for x in host_docs.values() if x.get("playbook", {}).get("name")]
    return {
        "schema_version": 1, "kind": "nightly-fleet", "tool": "mtp-remote", "tool_version": __version__,
        "fleet_id": f"fleet-{report.run_id}", "group": group, "hosts_planned": [h.host for h in report.hosts],
        "playbook": {"name": names[0] if names else Path(str(playbook)).stem, "file": str(playbook)},
        "started_at": started_at.isoformat(), "finished_at": finished.isoformat(), "wall_s": report.wall_s,
        "max_workers": report.max_workers, "exit_code": report.exit_code, "hosts": hosts,
        "could_not_run": [x["host"] for x in hosts if x["status"] != "completed"],
        "corrupt_hosts": [x["host"] for x in hosts if x["corrupts"]],
        "regressed_hosts": [x["host"] for x in hosts if x["regressed"]],
        "disagreements": report.disagreements,
        "disagreement_lines": [describe_disagreement(x) for x in report.disagreements],
        "files": {"junit": "junit.xml", "metrics": "metrics.prom", "report": "fleet.md"},
    }
