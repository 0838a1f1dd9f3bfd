"""Issue 33 blocker 1: a host without ``python:`` (the default ``python3``, a bare name) launches and diagnoses the
sim — over the real sshd on 127.0.0.1 and on the local transport — and a bare name is looked up in PATH, never in
the workdir the launch stands in: an executable named like the python planted there (and ``.`` or an empty entry
in PATH) is never run.

The hosts' ``env`` puts this venv's ``bin`` in PATH (the sim is installed there, not in the system python): the
server's python is found through the PATH of the server's environment, as the shell would find it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from mtp_remote.errors import LaunchError
from mtp_remote.experiment import diagnose as api
from mtp_remote.serving.process import ProcessServer
from mtp_remote.config.inventory import load_inventory
from mtp_remote.remote import connect as transport
from mtp_remote.remote import facts
from tests.conftest import ROOT, free_port

pytestmark = [pytest.mark.ssh, pytest.mark.sim]

VENV_BIN = str(Path(sys.executable).parent)


def _plant_python(workdir: Path, marker: Path) -> None:
    """WORKDIR/python3: an executable that leaves ``marker`` if it is ever run (then runs the real one)."""
    workdir.mkdir(mode=0o700, parents=True)
    fake = workdir / "python3"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\nexec {sys.executable} \"$@\"\n")
    fake.chmod(0o755)


def _playbook(tmp_path: Path) -> str:
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=3, max_tokens=768, compare={"margin": 0.25})
    pb["prompts"] = pb["prompts"][:4]
    path = tmp_path / "pb.yaml"
    path.write_text(yaml.safe_dump(pb))
    return str(path)


def _host(base: dict, tmp_path: Path, **extra) -> dict:
    base = {k: v for k, v in base.items() if k != "python"}
    return {**base, "engine": "sim", "workdir": str(tmp_path / "wd"), "port": free_port(),
           # "." and an empty entry first: the workdir must still not be searched
           "env": {"SGLANG_SIM_TIME_SCALE": "0.01", "SGLANG_SIM_FAULTS": "state_leak",
                   "PATH": f".::{VENV_BIN}:/usr/bin:/bin"}, **extra}


def _diagnose_and_check(tmp_path: Path, cfg: dict, marker: Path) -> None:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "h", "hosts": {"h": cfg}}))
    res = api.diagnose(inventory=str(inv), playbook=_playbook(tmp_path), host="h", runs_dir=tmp_path / "runs")
    (verdict,) = res.summary["verdicts"]
    assert verdict["kind"] == "spec-corrupts-output", verdict["evidence"]
    assert res.exit_code == 1
    assert [p["outcome"]["kind"] for p in res.summary["profiles"]] == ["ready", "ready"]
    lines = (res.run_dir / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 2 * 4 * (1 + 3) and all(json.loads(ln)["error"] is None for ln in lines)
    assert not marker.exists(), "the python3 planted in the workdir was run"


def test_a_host_without_python_launches_and_diagnoses_over_ssh(sshd, tmp_path):
    cfg = _host(sshd.host_config(), tmp_path)
    assert "python" not in cfg and load_inventory_host(tmp_path, cfg).python is None
    marker = tmp_path / "planted-python-ran"
    _plant_python(tmp_path / "wd", marker)
    _diagnose_and_check(tmp_path, cfg, marker)


def test_a_bare_python_name_launches_and_diagnoses_locally(tmp_path):
    cfg = _host({"transport": "local"}, tmp_path, python="python3")
    marker = tmp_path / "planted-python-ran"
    _plant_python(tmp_path / "wd", marker)
    _diagnose_and_check(tmp_path, cfg, marker)


def test_a_python_found_nowhere_in_path_is_a_clear_launch_error_and_the_workdir_one_is_not_run(sshd, tmp_path):
    cfg = _host(sshd.host_config(), tmp_path, python="mtp-no-such-python")
    cfg["env"]["PATH"] = ".:/usr/bin:/bin"
    marker = tmp_path / "planted-python-ran"
    _plant_python(tmp_path / "wd", marker)
    (tmp_path / "wd" / "python3").rename(tmp_path / "wd" / "mtp-no-such-python")
    host = load_inventory_host(tmp_path, cfg)
    c = transport.connect(host)
    try:
        lc = ProcessServer(c, host, python="mtp-no-such-python", workdir=host.workdir, run_id="r1")
        lc.prepare()
        from mtp_remote.remote.commands import server_argv, server_env
        from tests.integration.test_lifecycle import PLAYBOOK
        with pytest.raises(LaunchError, match="not found on h .*PATH, never in the workdir") as e:
            lc.launch("baseline", server_argv(host, PLAYBOOK, "baseline"),
                      server_env(host, PLAYBOOK, "baseline", lc.workdir))
        assert e.value.cause == "no_python"
        assert not marker.exists(), "the executable planted in the workdir was run"
        assert not [p for p in facts.get_ps(c) if f"--port {host.port}" in p.args]
    finally:
        transport.close(c)


def load_inventory_host(tmp_path: Path, cfg: dict):
    inv = tmp_path / "inv-check.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "h", "hosts": {"h": cfg}}))
    return load_inventory(inv).get(None)
