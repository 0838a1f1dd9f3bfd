"""Where runs go without --runs-dir: $MTP_REMOTE_RUNS_DIR, else runs/ beside the project's inventory.yaml
(found here or in a parent, as the inventory is), else ./runs — so a command run from docs/ sees the same
runs and history as one run from the project's root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mtp_remote.config.paths import RUNS_ENV, default_runs_dir


def test_runs_go_beside_the_inventory_found_upward_else_here(tmp_path, monkeypatch):
    monkeypatch.delenv(RUNS_ENV, raising=False)
    project = tmp_path / "proj"
    (project / "docs" / "deep").mkdir(parents=True)
    (project / "inventory.yaml").write_text("hosts: {}\n")
    assert default_runs_dir(cwd=project / "docs" / "deep") == project.resolve() / "runs"
    assert default_runs_dir(cwd=project) == Path("runs")
    lone = tmp_path / "elsewhere"
    lone.mkdir()
    assert default_runs_dir(cwd=lone) == Path("runs")
    monkeypatch.setenv(RUNS_ENV, str(tmp_path / "nightly-runs"))
    assert default_runs_dir(cwd=project / "docs") == tmp_path / "nightly-runs"


def test_history_from_a_subdirectory_reads_the_projects_runs(tmp_path):
    import json
    import os

    from mtp_remote.report.history import record_run

    project = tmp_path / "proj"
    (project / "docs").mkdir(parents=True)
    (project / "inventory.yaml").write_text("hosts: {}\n")
    (project / "runs").mkdir()
    record_run(project / "runs" / "history.sqlite", {
        "run_id": "20261201-010203-abcd", "host": {"name": "gpu-1"}, "playbook": {"name": "diagnose-mtp"},
        "started_at": "2026-12-01T01:02:03", "exit_code": 0, "verdicts": [{"profile": "mtp", "kind": "healthy"}]},
        project / "runs" / "20261201-010203-abcd")
    env = {k: v for k, v in os.environ.items() if k not in (RUNS_ENV, "MTP_REMOTE_INVENTORY")}
    out = subprocess.run([str(Path(sys.executable).parent / "mtp-remote"), "history", "--json"],
                         cwd=project / "docs", capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert [r["run_id"] for r in json.loads(out.stdout)] == ["20261201-010203-abcd"]
    assert not (project / "docs" / "runs").exists()
