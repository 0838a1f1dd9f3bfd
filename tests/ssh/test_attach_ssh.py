"""Attach through a real OpenSSH sshd on 127.0.0.1: two servers started by the test on ports of the host (here the
loopback host) are attached by port, reached through the host's SSH tunnel, diagnosed, and left running; the run
takes no lock and leaves nothing in the host's workdir."""

from __future__ import annotations

import pytest
import yaml

from mtp_remote.experiment import diagnose as api
from tests.conftest import ROOT, free_port
from tests.sim.conftest import FIELD_FLAGS, MTP_FLAGS, sim, sim_env  # noqa: F401 - fixtures

pytestmark = [pytest.mark.ssh, pytest.mark.sim]


def test_endpoints_on_host_ports_are_diagnosed_through_the_ssh_tunnel(sshd, sim, tmp_path):  # noqa: F811
    base = sim(FIELD_FLAGS)
    leak = sim(FIELD_FLAGS + MTP_FLAGS, faults="state_leak")
    host = sshd.host_config(engine="sglang", workdir=str(tmp_path / "wd"), port=free_port())
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump({"default_host": "gpu", "hosts": {"gpu": host}}))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=3, max_tokens=768, prompts=pb["prompts"][:4],
              profiles={"baseline": {"attach": {"port": base.port}}, "mtp": {"attach": {"port": leak.port}}})
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))
    res = api.diagnose(inventory=str(tmp_path / "inventory.yaml"), playbook=str(tmp_path / "pb.yaml"), host="gpu",
                       runs_dir=tmp_path / "runs")
    (v,) = res.summary["verdicts"]
    assert v["kind"] == "spec-corrupts-output" and "no A/A relaunch" in v["evidence"], v["evidence"]
    prof = {p["profile"]: p for p in res.summary["profiles"]}
    assert prof["mtp"]["attached"]["where"] == f"host port {leak.port}"
    assert prof["mtp"]["tunnel_channels"] >= 1  # its requests went through SSH channels
    assert base.proc.poll() is None and leak.proc.poll() is None
    assert not (tmp_path / "wd").exists()  # no workdir, no lock: nothing was run on the host for them
