"""Verdicts that depend on measured speed: ``healthy`` needs the speed-up (otherwise ``spec-slower``).

They run on the one xdist worker that runs the timed and real-engine files (``TIMED_FILES``), never beside
real SGLang on the CPU: its torch threads take every core, and an arm sampled then was measured at a fraction
of its speed (a healthy spec arm at 0.69x its baseline in a full run, 2.5x alone).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mtp_remote.experiment import diagnose as api
from tests.integration.test_scenarios import FAST_START, write_config

pytestmark = pytest.mark.sim

#: The sim's time scale here. At 0.01 (the other sim tests') a decode step is 0.3 ms of modelled time, less
#: than the CPU the sim and the client spend per step, so tokens/s measured the CPU each arm got. At 0.1 the
#: modelled step leads: 1.96x quiet, 2.03x with four CPU hogs on the two cores. (Over SSH the tunnel's CPU
#: still caps the faster arm under such load, 0.79x, so the SSH test checks loops, not speed.)
SPEED_SCALE = "0.1"


def _scaled(inventory: str) -> str:
    """``inventory`` with every host's sim at :data:`SPEED_SCALE` (its start fast: only decode speed counts)."""
    inv = yaml.safe_load(Path(inventory).read_text())
    for h in inv["hosts"].values():
        h.setdefault("env", {}).update(SGLANG_SIM_TIME_SCALE=SPEED_SCALE, SGLANG_SIM_STARTUP_SCALE=FAST_START)
    Path(inventory).write_text(yaml.safe_dump(inv))
    return inventory


def test_a_healthy_sim_is_healthy_with_its_speed_up(tmp_path):
    inv, pb = write_config(tmp_path, None, compare={"margin": 0.25})
    res = api.diagnose(inventory=_scaled(inv), playbook=pb, runs_dir=tmp_path / "runs")
    (v,) = res.summary["verdicts"]
    assert v["kind"] == "healthy", v["evidence"]
    assert res.exit_code == 0
    assert "tokens/s" in v["evidence"] and "x baseline" in v["evidence"]
