"""Shell completion of host names and run ids (issue 30), through click's own completion protocol, as bash asks
for it (``_MTP_REMOTE_COMPLETE=bash_complete`` with ``COMP_WORDS``/``COMP_CWORD``) of the installed entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

MTP_REMOTE = os.path.join(os.path.dirname(sys.executable), "mtp-remote")


def _complete(cwd: Path, words: str) -> list[str]:
    env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
           "_MTP_REMOTE_COMPLETE": "bash_complete"}
    env.pop("MTP_REMOTE_INVENTORY", None)
    env.pop("MTP_REMOTE_RUNS_DIR", None)
    r = subprocess.run([MTP_REMOTE], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.split(",", 1)[1] for line in r.stdout.splitlines() if line]


def _project(tmp_path: Path) -> Path:
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump({"default_host": "sim-a", "hosts": {
        n: {"transport": "local", "engine": "sim"} for n in ("sim-a", "sim-b", "other")},
        "groups": {"sims": ["sim-a", "sim-b"]}}))
    for name in ("20261201-000000-abcd", "20261202-000000-beef", "fleet-20261203-000000-cafe", "not a run"):
        (tmp_path / "runs" / name).mkdir(parents=True)
    return tmp_path


def test_host_names_and_groups_complete_from_the_inventory_a_command_would_read(tmp_path):
    cwd = _project(tmp_path)
    assert sorted(_complete(cwd, "mtp-remote diagnose -H s")) == ["sim-a", "sim-b", "sims"]
    assert sorted(_complete(cwd, "mtp-remote status -H sim-a,")) == ["sim-a,other", "sim-a,sim-a", "sim-a,sim-b"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _complete(elsewhere, f"mtp-remote launch -i {cwd / 'inventory.yaml'} -H o") == ["other"]
    (elsewhere / "inventory.yaml").write_text("hosts: [unclosed\n")
    assert _complete(elsewhere, "mtp-remote diagnose -H ") == [], "a broken inventory completes nothing"


def test_run_ids_complete_newest_first_from_the_runs_directory(tmp_path):
    cwd = _project(tmp_path)
    ids = ["fleet-20261203-000000-cafe", "20261202-000000-beef", "20261201-000000-abcd"]
    assert _complete(cwd, "mtp-remote bug-report ") == ids
    assert _complete(cwd, "mtp-remote diagnose --resume 202612") == ids[1:]
    assert _complete(cwd, "mtp-remote mitigate --from 20261201") == ids[2:]
    assert _complete(cwd, "mtp-remote report ") == ["last", *ids]
    assert _complete(cwd, f"mtp-remote bug-report --runs-dir {tmp_path / 'none'} 2") == []
