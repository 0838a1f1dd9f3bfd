"""``fab -H GROUP nightly`` is the same fleet nightly as ``mtp-remote nightly -H GROUP``: with every host of
the group unreachable (closed ports on 127.0.0.1) each host still gets its artefacts and a history row with
the group, and the fleet junit has one failing case per host carrying the cause. Fabric as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from xml.etree import ElementTree as ET

import yaml

from mtp_remote.config import paths
from mtp_remote.report import history as store
from tests.conftest import ROOT, free_port


def test_fab_nightly_over_a_group_of_unreachable_hosts_records_every_host(tmp_path):
    hosts = {name: {"transport": "ssh", "address": "127.0.0.1", "ssh_port": free_port(), "connect_timeout": 5}
             for name in ("gpu-a", "gpu-b")}
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump({"default_host": "gpu-a", "hosts": hosts,
                                                             "groups": {"dead": ["gpu-a", "gpu-b"]}}))
    env = {k: v for k, v in os.environ.items() if k != paths.INVENTORY_ENV} | {"COLUMNS": "200"}
    r = subprocess.run([sys.executable, "-m", "fabric", "-r", str(ROOT), "-H", "dead", "nightly",
                        "--inventory", str(tmp_path / "inventory.yaml"),
                        "--playbook", str(ROOT / "playbooks" / "nightly.yaml"), "--runs-dir", str(tmp_path / "runs")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    (fleet_dir,) = (tmp_path / "runs").glob("fleet-*")
    suite = ET.parse(fleet_dir / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("2", "2")
    for case in suite.iter("testcase"):
        msg = case.find("failure").get("message")
        assert msg.startswith(f"could not run (failed): [{case.get('name')}] cannot reach root@127.0.0.1:")
        assert "connection refused" in msg, msg
    summary = json.loads((fleet_dir / "summary.json").read_text())
    assert summary["could_not_run"] == ["gpu-a", "gpu-b"] and summary["exit_code"] == 2
    rows = store.history(tmp_path / "runs" / "history.sqlite", group="dead")
    assert sorted((x["host"], x["status"], x["fleet_id"]) for x in rows) == [
        ("gpu-a", "failed", fleet_dir.name), ("gpu-b", "failed", fleet_dir.name)]
    for x in rows:
        assert json.loads((tmp_path / "runs" / x["run_id"] / "summary.json").read_text())["exit_code"] == 2
    assert "gpu-a" in r.stdout and "could not run" not in r.stderr


def test_both_entry_points_document_the_nightly_over_a_group():
    from click.testing import CliRunner

    from mtp_remote.cli.main import main

    r = CliRunner().invoke(main, ["nightly", "--help"])
    assert r.exit_code == 0 and "-H GROUP" in r.output and "--workers" in r.output, r.output
    h = CliRunner().invoke(main, ["history", "--help"])
    assert "--group" in h.output
    fab = subprocess.run([sys.executable, "-m", "fabric", "-r", str(ROOT), "-l"], capture_output=True, text=True,
                         check=False)
    assert "  nightly " in fab.stdout and "-H GROUP" in fab.stdout, fab.stdout + fab.stderr
