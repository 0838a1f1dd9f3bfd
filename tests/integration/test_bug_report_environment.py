"""bug-report's Environment said `torch: unknown`, `GPU: unknown`, `architectures: unknown` (and `SGLang: unknown`
on a hung run) where preflight knows them (issue 30). A diagnose run now reads the host's facts once, as
preflight does (remote/envfacts.py), into summary.json's ``environment``; the report prints them, and a hung
profile (whose server never answered /server_info) takes the SGLang release the host's other server reported.
The sim as a real process; its speculative server hangs while sampling."""

from __future__ import annotations

import sys

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.experiment import diagnose as api
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.sim


def test_a_hung_runs_bug_report_names_the_hosts_sglang_gpus_and_driver(tmp_path):
    inv = {"default_host": "box", "hosts": {"box": {
        "transport": "local", "engine": "sim", "workdir": str(tmp_path / "wd"), "port": free_port(),
        "python": sys.executable, "env": {"SGLANG_SIM_TIME_SCALE": "0.01", "SGLANG_SIM_VERSION": "0.5.9"}}}}
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(inv))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=2, max_tokens=512, temperatures=[0.7], prompts=pb["prompts"][:3],
              timeouts={"stall_s": 2, "drain_s": 2, "request_s": 60})
    pb["base_flags"] += " --watchdog-timeout 3000"
    pb["profiles"]["mtp"]["env"] = {"SGLANG_SIM_FAULTS": "hang_after=2"}
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))
    res = api.diagnose(inventory=str(tmp_path / "inventory.yaml"), playbook=str(tmp_path / "pb.yaml"),
                       runs_dir=tmp_path / "runs")
    (v,) = [v for v in res.summary["verdicts"] if v["profile"] == "mtp"]
    assert v["kind"] == "hung:stalled", v
    env = res.summary["environment"]
    assert env["sglang"] == "0.5.9" and env["gpus"] == ["NVIDIA RTX A6000", "NVIDIA RTX A6000"] and env["driver"]
    r = CliRunner().invoke(main, ["bug-report", res.run_id, "--runs-dir", str(tmp_path / "runs")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "runs" / res.run_id / "bug-report.md").read_text()
    assert "- SGLang: 0.5.9\n" in text
    assert "- GPU: NVIDIA RTX A6000, NVIDIA RTX A6000\n" in text and f"- driver: {env['driver']}\n" in text


def test_the_environment_takes_torch_and_architectures_from_the_runs_facts_and_a_hung_profiles_release_from_another(
        tmp_path):
    from mtp_remote.runs.bugreport import render_bug_report

    doc = {"run_id": "r", "tool_version": "x", "host": {"name": "gpu-1", "model_path": "/models/q"},
           "verdicts": [{"profile": "mtp", "kind": "hung:stalled", "evidence": "stalled"}],
           "profiles": [{"profile": "baseline", "server_info": {"version": "0.5.9"}}, {"profile": "mtp"}],
           "environment": {"sglang": None, "torch": "2.9.1+cu128", "gpus": ["NVIDIA H100 80GB HBM3"],
                           "driver": "580.95", "architectures": ["Qwen3NextForCausalLM"]}}
    text = render_bug_report(doc, tmp_path / "none.jsonl", None, None)
    assert "- SGLang: 0.5.9\n- torch: 2.9.1+cu128\n- GPU: NVIDIA H100 80GB HBM3\n- driver: 580.95\n" in text
    assert "- model: `/models/q`; architectures: Qwen3NextForCausalLM\n" in text
