"""Verdicts that depend on measured speed: ``healthy`` needs the speed-up (otherwise ``spec-slower``).

They run on the one xdist worker that runs the timed and real-engine files (``TIMED_FILES``), never beside
real SGLang on the CPU: its torch threads take every core, and an arm sampled then was measured at a fraction
of its speed (a healthy spec arm at 0.69x its baseline in a full run, 2.5x alone).
"""

from __future__ import annotations

import pytest

from mtp_remote import api
from tests.integration.test_scenarios import write_config
from tests.ssh.test_diagnose_ssh import _inventory, _playbook

pytestmark = pytest.mark.sim


def test_a_healthy_sim_is_healthy_with_its_speed_up(tmp_path):
    inv, pb = write_config(tmp_path, None, compare={"margin": 0.2})
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs")
    (v,) = res.summary["verdicts"]
    assert v["kind"] == "healthy", v["evidence"]
    assert res.exit_code == 0
    assert "tokens/s" in v["evidence"] and "x baseline" in v["evidence"]


@pytest.mark.ssh
def test_a_healthy_sim_over_ssh_is_healthy(sshd, tmp_path):
    res = api.diagnose(inventory=_inventory(tmp_path, sshd), playbook=_playbook(tmp_path), host="sim-ssh-healthy",
                       runs_dir=tmp_path / "runs")
    (v,) = res.summary["verdicts"]
    assert v["profile"] == "mtp" and v["kind"] == "healthy", v["evidence"]
    assert res.exit_code == 0
    assert res.summary["host"]["transport"] == "ssh" and res.summary["simulated"] is True
    assert [p["outcome"]["kind"] for p in res.summary["profiles"]] == ["ready", "ready"]
