"""A speculative server that crashes while sampling, end to end on the sim (a real process): diagnose calls
it ``crashed:<cause>``, names bug-report as the next step, and ``bug-report`` writes the issue body with the
cause, the fatal line, the log's last lines and the request that was in flight, replayable with ``curl``."""

from __future__ import annotations

import sys

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.experiment import diagnose as api
from mtp_remote.cli.main import main
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.sim


def test_a_crash_while_sampling_is_crashed_cause_and_bug_report_takes_it(tmp_path):
    inv = {"default_host": "box", "hosts": {"box": {
        "transport": "local", "engine": "sim", "workdir": str(tmp_path / "wd"), "port": free_port(),
        "python": sys.executable, "env": {"SGLANG_SIM_TIME_SCALE": "0.01"}}}}
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(inv))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=2, max_tokens=512, temperatures=[0.7], prompts=pb["prompts"][:3])
    pb["profiles"]["mtp"]["env"] = {"SGLANG_SIM_FAULTS": "crash_after=2"}
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))
    res = api.diagnose(inventory=str(tmp_path / "inventory.yaml"), playbook=str(tmp_path / "pb.yaml"),
                       runs_dir=tmp_path / "runs")
    (v,) = [v for v in res.summary["verdicts"] if v["profile"] == "mtp"]
    assert v["kind"].startswith("crashed:"), v
    r = CliRunner().invoke(main, ["bug-report", res.run_id, "--runs-dir", str(tmp_path / "runs")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "runs" / res.run_id / "bug-report.md").read_text()
    assert f"the `mtp` server crashed while serving (`{v['kind']}`)" in text
    assert "Last 30 lines of its log" in text and "### Replay the request" in text
    assert f"curl -s http://127.0.0.1:{inv['hosts']['box']['port']}/generate" in text
