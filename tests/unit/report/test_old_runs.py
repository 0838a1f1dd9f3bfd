"""Runs written by an earlier mtp-remote stay readable and render the same: ``tests/data/runs-v1`` holds runs the sim
wrote before the records became typed (schema 1; ``mtp-remote diagnose -H sim-local`` with the shipped playbook,
``--samples 2 --max-tokens 256``, then ``mitigate --from`` and ``bisect --from`` it; a healthy host's run with
``--max-tokens 128``; a failed run's artefacts from ``report.records.write_failed_run``). ``expected/`` holds what
that code rendered from them: the reports, the console's closing lines, junit and metrics, the history rows, the
bug report and a comparison. Today's code, reading the files through ``mtp_remote.records``, must render the same
bytes, and the records must write the files back unchanged."""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from mtp_remote.records.sample import Sample
from mtp_remote.records.summary import Summary
from mtp_remote.report.ci import render_junit, render_prometheus
from mtp_remote.report.console import cells_table, print_run_end, verdict_table
from mtp_remote.report.document import load_summary
from mtp_remote.report.history import record_run
from mtp_remote.runs.bugreport import write_bug_report
from mtp_remote.runs.compare import compare_runs, rerender

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "runs-v1"
EXPECTED = FIXTURE / "expected"
RUN = "20261203-132933-797c"  # diagnose on sim-local: baseline, baseline-aa, mtp (state_leak): corrupts
HEALTHY = "20261203-133404-1c95"  # diagnose on sim-healthy: inconclusive
FAILED = "20261203-133000-fa11"  # could not connect
MITIGATION, BISECT = "20261203-133020-6564", "20261203-133141-ce88"
COMPLETED = (RUN, HEALTHY)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A copy of the fixture's runs directory (re-rendering writes into it)."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "runs", ignore=shutil.ignore_patterns("expected")))


def console_text(runs: Path, run_id: str) -> str:
    """What ``mtp-remote report`` shows of a run on a console 200 columns wide: cells, verdicts, closing lines."""
    doc = load_summary(runs / run_id)
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False, color_system=None, soft_wrap=True)
    if doc.get("status", "completed") == "completed":
        console.print(cells_table(doc))
        console.print(verdict_table(doc))
    print_run_end(console, doc, runs / run_id, doc["exit_code"], afterwards=True)
    return out.getvalue().replace(str(runs), "RUNS")


def history_rows(runs: Path) -> str:
    """The history's rows of every run, as JSON (the runs directory written as RUNS)."""
    db = runs / "history.sqlite"
    for run_id in (*COMPLETED, FAILED):
        record_run(db, load_summary(runs / run_id), runs / run_id)
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    rows = {t: [dict(r) for r in con.execute(f"SELECT * FROM {t} ORDER BY rowid")] for t in tables}  # noqa: S608
    con.close()
    return json.dumps(rows, indent=1, default=str).replace(str(runs), "RUNS") + "\n"


def outputs(runs: Path) -> dict[str, str]:
    """Everything today's code renders from the fixture's runs in ``runs``: ``{name in expected/: text}``."""
    out: dict[str, str] = {}
    for run_id in COMPLETED:
        written = rerender(runs / run_id)
        for kind, path in written.items():
            out[f"{run_id}.report.{kind}"] = path.read_text().replace(str(runs), "RUNS")
    for run_id in (*COMPLETED, FAILED):
        doc = load_summary(runs / run_id)
        out[f"{run_id}.console.txt"] = console_text(runs, run_id)
        out[f"{run_id}.junit.xml"] = render_junit(doc)
        out[f"{run_id}.metrics.prom"] = render_prometheus(doc)
    out["history.json"] = history_rows(runs)
    _, text = write_bug_report(RUN, runs_dir=runs, output=runs / "bug-report.md")
    out["bug-report.md"] = text
    res = compare_runs(runs / HEALTHY, runs / RUN)
    out["compare.json"] = json.dumps(res, indent=2, default=lambda v: v.to_dict()).replace(str(runs), "RUNS") + "\n"
    return out


def test_old_runs_render_as_they_did(runs: Path):
    got = outputs(runs)
    assert sorted(got) == sorted(p.name for p in EXPECTED.iterdir())
    for name, text in got.items():
        assert text == (EXPECTED / name).read_text(), name
    assert "--speculative-algorithm NEXTN" in got["bug-report.md"]  # the bisect's minimal change is quoted


@pytest.mark.parametrize("run_id", [*COMPLETED, FAILED])
def test_a_summary_is_read_and_written_back_byte_for_byte(run_id: str):
    text = (FIXTURE / run_id / "summary.json").read_text()
    doc = Summary.model_validate_json(text)
    assert doc.to_json() == text
    assert doc.run_id == run_id


@pytest.mark.parametrize("run_id", COMPLETED)
def test_samples_are_read_and_written_back_byte_for_byte(run_id: str):
    lines = (FIXTURE / run_id / "samples.jsonl").read_text().splitlines()
    samples = [Sample.model_validate_json(line) for line in lines]
    assert [s.to_json_line() for s in samples] == lines
    assert {s.profile for s in samples} >= {"baseline", "mtp"}


def test_a_summary_reads_typed():
    doc = load_summary(FIXTURE / RUN)
    assert isinstance(doc, Summary)
    assert [v.kind for v in doc.verdicts] == ["spec-corrupts-output"]
    assert doc.verdicts[0].comparisons[0].spec_loops == 4
    assert doc.calibration.profile == "baseline-aa"
    failed = load_summary(FIXTURE / FAILED)
    assert (failed.status, failed.cause_line) == ("failed", "[gpu-node-7] cannot connect: connection refused")
