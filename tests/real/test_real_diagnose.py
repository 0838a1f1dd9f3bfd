"""``diagnose`` on the embedded ``real-cpu`` host, against real SGLang 0.5.9 on this CPU.

In ``make test``: the baseline profile only, one sample per prompt and temperature, 12 tokens each (the
interpreted attention kernels take ~0.1 s per token here: 32 tokens made this the suite's longest test). ``make test-real`` (``MTP_REMOTE_REAL_FULL=1``) runs the whole playbook, baseline vs STANDALONE,
and checks that the acceptance length comes from SGLang's own meta_info. The host is the inventory's
``real-cpu`` entry as shipped, with only the port and workdir moved (the machine is shared) and the paths of
the venv and model this test session built.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from tests.conftest import ROOT, free_port
from tests.support.real_hosts import budgeted_playbook

pytestmark = [pytest.mark.real, pytest.mark.timeout(3600)]


def _inventory(tmp_path: Path, engine) -> str:
    shipped = yaml.safe_load((ROOT / "inventory.yaml").read_text())["hosts"]["real-cpu"]
    playbook = budgeted_playbook(ROOT / "playbooks" / "real-cpu.yaml", tmp_path / "real-cpu.playbook.yaml")
    host = dict(shipped, port=free_port(), workdir=str(tmp_path / "wd"), python=engine.python,
                model_path=engine.model_path, playbook=playbook)
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "real-cpu", "hosts": {"real-cpu": host}}))
    return str(inv)


def _diagnose(tmp_path: Path, engine, *extra: str) -> tuple[int, dict, list[dict], str]:
    runs = tmp_path / "runs"
    r = CliRunner().invoke(main, ["diagnose", "-i", _inventory(tmp_path, engine), "-H", "real-cpu",
                                  "--runs-dir", str(runs), *extra])
    run_dir = next(p for p in runs.iterdir() if p.is_dir())  # (runs/ also holds history.sqlite)
    doc = json.loads((run_dir / "summary.json").read_text())
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    return r.exit_code, doc, samples, r.output


def test_diagnose_baseline_on_real_sglang(real_engine, tmp_path):
    code, doc, samples, output = _diagnose(tmp_path, real_engine, "--profile", "baseline", "--samples", "1",
                                           "--max-tokens", "12")
    assert code == 0, output
    assert doc["simulated"] is False and doc["host"]["engine"] == "sglang"
    assert doc["playbook"]["name"] == "real-cpu"
    (pr,) = doc["profiles"]
    assert pr["launched"] and pr["server_info"]["version"] == "0.5.9"
    assert pr["server_info"]["model_path"] == real_engine.model_path
    assert len(samples) == 6  # 3 prompts x (1 greedy + 1 at T=0.7)
    assert all(s["completion_tokens"] == 12 or s["finish_reason"] == "stop" for s in samples)
    assert all(not s.get("error") for s in samples)
    assert "real SGLang 0.5.9" in output


@pytest.mark.skipif(os.environ.get("MTP_REMOTE_REAL_FULL") != "1", reason="make test-real runs it (a few minutes)")
def test_diagnose_baseline_vs_standalone_on_real_sglang(real_engine, tmp_path):
    code, doc, samples, output = _diagnose(tmp_path, real_engine)
    assert code in (0, 1, 3), output  # 3: inconclusive
    (verdict,) = doc["verdicts"]
    assert verdict["profile"] == "standalone"
    spec = [s for s in samples if s["profile"] == "standalone"]
    assert spec and all(s["spec_verify_ct"] > 0 for s in spec)
    for s in spec:  # acceptance length as SGLang computes it, from its own meta_info
        assert s["accept_length"] == pytest.approx(s["completion_tokens"] / s["spec_verify_ct"], rel=1e-3)
    assert 1.0 <= sum(s["completion_tokens"] for s in spec) / sum(s["spec_verify_ct"] for s in spec) <= 4.0
    assert verdict["kind"] in ("healthy", "inconclusive", "spec-slower", "spec-ineffective", "spec-corrupts-output",
                               "base-model-degenerates"), verdict
    assert "real SGLang 0.5.9" in output
    print(f"verdict: {verdict['kind']}: {verdict['evidence']}")
