"""Issue 33 major 6, end to end: a diagnose run whose server answers malformed JSON (``meta_info`` a list, ``NaN``
tokens, a 100,000-deep body, HTML, output ids of strings, a bad ``/server_info``) ends with its summary, junit,
metrics and history — each bad answer that sample's error, no traceback, no NaN in ``samples.jsonl`` — and its
resume reads the samples back. The server is ``tests/support/hostile_server.py`` launched by the tool as the
engine (a real process, local transport, the same launch and stop as any server)."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from mtp_remote.config.inventory import HostConfig
from mtp_remote.experiment import diagnose as api
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.sim


def _strict(line: str) -> dict:
    def no(name):
        raise AssertionError(f"{name} stored in samples.jsonl")
    return json.loads(line, parse_constant=no)


def _setup(tmp_path, monkeypatch, **env) -> str:
    monkeypatch.setattr(HostConfig, "engine_module", property(lambda self: "tests.support.hostile_server"))
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "h", "hosts": {"h": {
        "transport": "local", "engine": "sim", "python": sys.executable, "workdir": str(tmp_path / "wd"),
        "port": free_port(), "env": {"PYTHONPATH": str(ROOT), **env}}}}))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=2, max_tokens=32)
    pb["prompts"] = pb["prompts"][:2]
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))
    return str(inv)


def test_a_run_against_a_malformed_server_ends_with_its_records_and_resumes(tmp_path, monkeypatch):
    inv = _setup(tmp_path, monkeypatch, HOSTILE_SERVER_INFO="deep",
                 HOSTILE_MODES="meta_list,nan_tokens,ok,deep,not_json,ids_strings,ok")
    res = api.diagnose(inventory=inv, playbook=str(tmp_path / "pb.yaml"), host="h", runs_dir=tmp_path / "runs")
    assert res.exit_code != 1, "malformed answers read as corrupt output"
    lines = (res.run_dir / "samples.jsonl").read_text().splitlines()
    records = [_strict(x) for x in lines]
    errors = [r["error"] for r in records if r["error"]]
    assert errors and all("malformed response" in e for e in errors), errors
    assert any(not r["error"] for r in records), "the well-formed answers were not kept"
    for name in ("summary.json", "junit.xml", "metrics.prom", "report.md"):
        assert (res.run_dir / name).exists(), name
    summary = json.loads((res.run_dir / "summary.json").read_text())
    assert all(not p.get("server_info") for p in summary.get("profiles", []))
    again = api.diagnose(inventory=inv, playbook=str(tmp_path / "pb.yaml"), host="h", runs_dir=tmp_path / "runs",
                         resume=res.run_dir.name)
    assert again.exit_code == res.exit_code


SECRET = "hf_s3cr3t_T0KEN_value_0123456789"


def test_a_secret_the_model_echoes_is_never_stored_or_reported(tmp_path, monkeypatch):
    """Issue 33 minor: secrets echoed back in model output landed unmasked in samples.jsonl, report.md/html and
    the bug-report body."""
    inv = _setup(tmp_path, monkeypatch, HOSTILE_MODES="ok", HOSTILE_ECHO="HF_TOKEN", HF_TOKEN=SECRET)
    res = api.diagnose(inventory=inv, playbook=str(tmp_path / "pb.yaml"), host="h", runs_dir=tmp_path / "runs")
    records = [json.loads(x) for x in (res.run_dir / "samples.jsonl").read_text().splitlines()]
    assert records and all("Your token is ***." in r["text"] for r in records), records[0]["text"]
    for path in res.run_dir.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), f"the echoed secret is in {path}"
