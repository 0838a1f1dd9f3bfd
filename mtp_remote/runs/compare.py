"""Runs on disk: find one (``last``, a run id, a directory), re-render its reports, compare two of them.

``compare_runs(a, b)`` pairs the cells (profile, temperature) of two run directories and tests each
difference: loop rate by Fisher's exact test (one-sided "b loops more" and two-sided), acceptance length side
by side, speed by Welch's t-test and the Mann-Whitney U test on the per-sample decode speeds
(completion_tokens / latency_s of each successful request in ``samples.jsonl``); see
:mod:`mtp_remote.analysis.runstats`. Reads files only, never the network.

The speed tests are per sample, and each run is one launch per profile: a small p says the two *launches*
differ, which launch-to-launch drift alone (host load, clocks, other tenants, a warm or cold cache) can do --
two nightlies of one healthy host: baseline 293 -> 210 tok/s, Welch p = 0.00056. With one launch per side no
test at the launch level is possible, so the comparison says so (``speed.scope``) and gives what drift of the
whole host cancels: each speculative arm's speed over its own run's baseline at the same temperature
(``spec_over_base``).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from ..analysis.runstats import loop_diff, speed_diff
from ..config.validation import is_name
from ..errors import ConfigError
from ..experiment.sampling import latest_samples, load_samples
from ..report.document import load_summary
from ..report.html import write_html
from ..report.markdown import write_markdown
from ..records.compare import CellChange, RunComparison, RunHead, VerdictChange
from ..records.sample import Sample
from ..records.summary import Summary


#: The kinds of run directory, as :func:`run_kind` names them: ``run`` (a ``diagnose``/``nightly`` of one host:
#: summary.json with cells and verdicts, what ``report``, ``compare`` and ``bug-report`` read) and
#: ``nightly-fleet`` (``runs/fleet-<id>/``: one row per host, what ``history --group`` lists).
RUN_KINDS = ("run", "nightly-fleet")


def run_kind(doc: Summary | dict) -> str:
    """The kind of a summary.json document: its ``kind`` field (fleet summaries carry one), else ``run``."""
    return str(Summary.of(doc).kind or "run")


def _started(doc: Summary, d: Path) -> tuple:
    """Sort key by start time: the summary's ``started_at`` (ISO-8601 UTC), else the directory's mtime."""
    try:
        if doc.started_at is None:
            raise ValueError("no start time")
        at = datetime.fromisoformat(str(doc.started_at).replace("Z", "+00:00"))
        if at.tzinfo is None:
            at = at.replace(tzinfo=timezone.utc)
        return at.timestamp(), d.name
    except (ValueError, TypeError):
        return d.stat().st_mtime, d.name


def run_dirs(runs_dir: str | Path, kinds: tuple[str, ...] | None = ("run",)) -> list[Path]:
    """Run directories under ``runs_dir`` that hold a summary.json of one of ``kinds`` (None: any), oldest
    first by start time. Names do not order runs: ``fleet-<id>`` sorts after every dated run id, so a fleet
    nightly would stay "last" for ever. A summary.json that cannot be read counts by its directory's mtime
    and as kind ``run`` (the command that reads it then says what is wrong with it)."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    found = []
    for p in root.glob("*/summary.json"):
        try:
            doc = Summary.model_validate_json(p.read_text())
        except (OSError, ValueError):  # unreadable, not JSON, not a summary (pydantic's ValidationError)
            doc = Summary()
        if kinds is None or run_kind(doc) in kinds:
            found.append((_started(doc, p.parent), p.parent))
    return [d for _, d in sorted(found)]


def resolve_run(ref: str | None, runs_dir: str | Path = "runs", kinds: tuple[str, ...] = ("run",)) -> Path:
    """The run directory for ``ref``: ``last`` (or None) the newest run by start time among those of
    ``kinds`` (what the calling command can read: by default a host's ``diagnose``/``nightly`` run, never a
    fleet summary), a run id under ``runs_dir``, or a path to a run directory or its summary.json. Raises
    ConfigError naming what exists."""
    if ref in (None, "", "last"):
        runs = run_dirs(runs_dir, kinds)
        if not runs:
            raise ConfigError("no run with a summary.json yet (`mtp-remote diagnose` writes one)", file=str(runs_dir))
        return runs[-1]
    p = Path(ref)
    if p.name == "summary.json" and p.is_file():
        return p.parent
    if (p / "summary.json").is_file():
        return p
    if is_name(ref) and (Path(runs_dir) / ref / "summary.json").is_file():
        return Path(runs_dir) / ref
    recent = ", ".join(d.name for d in run_dirs(runs_dir, kinds)[-5:]) or "none"
    raise ConfigError(f"no run {ref!r} (no summary.json); recent runs: {recent}; or give 'last' or a directory",
                      file=str(runs_dir), field="RUN")


def readable_run(run_dir: Path, kinds: tuple[str, ...], command: str) -> Path:
    """``run_dir`` when its summary is of one of ``kinds``; else a ConfigError that says what it is and what
    ``command`` reads (a fleet nightly's directory given to ``compare``: its hosts' runs are the ones to name)."""
    doc = load_summary(run_dir)
    kind = run_kind(doc)
    if kind in kinds:
        return run_dir
    hosts = [h.get("run_id") for h in doc.get("hosts", []) if h.get("run_id")]
    more = f"; its hosts' runs: {', '.join(hosts)}" if hosts else ""
    raise ConfigError(f"{run_dir.name} is a {kind} summary, and {command} reads a host's run{more}",
                      file=str(run_dir / "summary.json"), field="RUN")


def load_run(run_dir: Path) -> tuple[Summary, list[dict]]:
    """(summary document, latest samples) of a run directory; samples [] when samples.jsonl is absent."""
    return load_summary(run_dir), latest_samples(load_samples(run_dir / "samples.jsonl"))


def rerender(run_dir: Path) -> dict[str, Path]:
    """Write report.md and report.html of a completed run again from its summary.json and samples.jsonl
    (e.g. after upgrading mtp-remote). Raises ConfigError for a run that did not complete (no cells)."""
    doc, samples = load_run(run_dir)
    if not doc.completed:
        raise ConfigError(f"run {doc.run_id} {doc.status}: {doc.cause_line}; it has no report "
                          f"(summary.json, junit.xml and metrics.prom say why)", file=str(run_dir / "summary.json"))
    return {"md": write_markdown(doc, samples, run_dir), "html": write_html(doc, samples, run_dir)}


def _speeds(samples: list[Sample | dict]) -> dict[tuple[str, float], list[float]]:
    out: dict[tuple[str, float], list[float]] = {}
    for s in map(Sample.of, samples):
        lat = float(s.latency_s or 0.0)
        if s.error is None and lat > 0:
            out.setdefault((s.profile, float(s.temperature)), []).append(int(s.completion_tokens or 0) / lat)
    return out


#: What the per-sample speed tests can say: the samples of one launch against those of another.
SPEED_SCOPE = "per-sample, one launch per run: launch-to-launch drift is not excluded"


def _over(speeds: dict, key: tuple, base: tuple) -> float | None:
    """Mean speed of cell ``key`` over the mean speed of ``base`` (the baseline at the same temperature) in the
    same run, or None when either has no speed."""
    a, b = speeds.get(key), speeds.get(base)
    return (sum(a) / len(a)) / (sum(b) / len(b)) if a and b and sum(b) > 0 else None


def compare_runs(run_a: Path, run_b: Path) -> dict:
    """Cell-by-cell comparison of two runs (``a`` the reference, ``b`` the one under test).

    Returns ``{"a": {run_id, host, playbook, status}, "b": {...}, "verdicts": [{profile, a, b}],
    "cells": [{profile, temperature, loops: LoopDiff dict, accept_a, accept_b, speed: SpeedDiff dict + scope,
    spec_over_base: {a, b}, only_in}]}``; ``only_in`` is "a"/"b" for a cell present in one run only (no test);
    ``spec_over_base`` (not on the baseline's rows): the cell's mean speed over its own run's baseline's."""
    (doc_a, s_a), (doc_b, s_b) = load_run(run_a), load_run(run_b)
    cells_a, cells_b = doc_a.cells_by_key(), doc_b.cells_by_key()
    speed_a, speed_b = _speeds(s_a), _speeds(s_b)
    rows = []
    for key in list(dict.fromkeys([*cells_a, *cells_b])):
        ca, cb = cells_a.get(key), cells_b.get(key)
        if not (ca and cb):
            rows.append(CellChange(profile=key[0], temperature=key[1], only_in="a" if ca else "b"))
            continue
        base = (doc_a.playbook.baseline if "baseline" in doc_a.playbook else None, key[1])
        over = {"spec_over_base": {"a": _over(speed_a, key, base), "b": _over(speed_b, key, base)}} \
            if key[0] != base[0] else {}
        rows.append(CellChange(profile=key[0], temperature=key[1], only_in=None,
                               loops=loop_diff(ca.loops, ca.n, cb.loops, cb.n).to_dict(),
                               accept_a=ca.accept_length, accept_b=cb.accept_length,
                               speed={**speed_diff(speed_a.get(key, []), speed_b.get(key, [])).to_dict(),
                                      "scope": SPEED_SCOPE}, **over))
    va = {v.profile: v.kind for v in doc_a.verdicts}
    vb = {v.profile: v.kind for v in doc_b.verdicts}

    def head(doc: Summary, d: Path) -> RunHead:
        return RunHead(run_id=doc.run_id, dir=str(d), host=doc.host.name, playbook=doc.playbook.name,
                       status=doc.status, started_at=doc.started_at, tool_version=doc.tool_version)

    return RunComparison(a=head(doc_a, run_a), b=head(doc_b, run_b),
                         verdicts=[VerdictChange(profile=p, a=va.get(p), b=vb.get(p)) for p in dict.fromkeys([*va, *vb])],
                         cells=rows).to_dict()
