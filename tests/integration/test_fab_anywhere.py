"""`fab` worked only inside the clone (issue 30): with an inventory elsewhere it said "Can't find any collection
named 'fabfile'!". The installed `fab` (mtp_remote/cli/fab.py) finds a fabfile.py from the current directory up as
Fabric does, and otherwise takes mtp-remote's own tasks. Real processes: the venv's `fab`, a sim host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.test_scenarios import write_config

pytestmark = pytest.mark.sim
FAB = str(Path(sys.executable).parent / "fab")


def _fab(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MTP_REMOTE_INVENTORY"}
    return subprocess.run([FAB, *args], cwd=cwd, env={**env, "COLUMNS": "200"}, capture_output=True, text=True,
                          timeout=120, check=False)


def _tasks(listing: str) -> list[str]:
    return [ln.split()[0] for ln in listing.splitlines() if ln.startswith("  ") and ln.split()]


def test_fab_outside_the_clone_lists_and_runs_mtp_remotes_tasks(tmp_path):
    elsewhere = tmp_path / "ops"
    elsewhere.mkdir()
    here = _fab(elsewhere, "-l")
    clone = _fab(ROOT, "-l")
    assert here.returncode == 0 and "Can't find any collection" not in here.stderr, here.stderr
    assert _tasks(here.stdout) == _tasks(clone.stdout) and "diagnose" in _tasks(here.stdout), here.stdout
    inv, _ = write_config(tmp_path, None)
    r = _fab(elsewhere, "status", "--inventory", inv)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Status — sim" in r.stdout and "none recorded" in r.stdout, r.stdout + r.stderr


def test_an_operators_own_fabfile_still_comes_first(tmp_path):
    (tmp_path / "fabfile.py").write_text("from invoke import task\n\n\n@task\ndef hello(c):\n    print('hello')\n")
    r = _fab(tmp_path, "-l")
    assert r.returncode == 0 and _tasks(r.stdout) == ["hello"], r.stdout + r.stderr
