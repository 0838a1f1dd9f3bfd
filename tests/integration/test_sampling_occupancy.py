"""The runner keeps the server's slots busy (the sim as a real process, local transport)."""

from __future__ import annotations

import pytest

from mtp_remote.experiment import diagnose as api
from tests.integration.test_scenarios import FAST_START, write_config

pytestmark = pytest.mark.sim


@pytest.mark.parametrize("early_stop", [False, True])
def test_sampling_keeps_every_slot_busy_until_nothing_is_left_to_send(tmp_path, early_stop):
    # time scale 0.05, not the suite's 0.01: at 0.01 an arm's span before its queue empties was 0.27-0.5 s, so one
    # scheduling hiccup of the loaded CI machine weighed like a slot left idle (share 0.74 in one CI run, 0.95-0.99
    # here under two CPU hogs); at 0.05 the span is about twice as long (0.42-0.85 s measured)
    inv, pb = write_config(tmp_path, "state_leak", time_scale="0.05", startup_scale=FAST_START, samples=8,
                           max_tokens=256, early_stop=early_stop)
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs")
    assert "mtp" in [p["profile"] for p in res.summary["profiles"]], res.summary["profiles"]  # the loop has cases
    for p in res.summary["profiles"]:
        occ = p["occupancy"]
        assert occ["limit"] == 16 and occ["sent"] >= 16, occ
        # the defect this catches: the old round-by-round early stopping kept 4 of 16 busy here (one request per
        # prompt), share 0.25. Measured with the slots kept busy: 0.95-0.99 quiet, 0.77 in one CI run whose machine
        # was loaded (a 0.8 bar failed there: a test that fails only because the machine is busy is a defect of the
        # test). The >= 95 % goal is measured by bench/ (docs/PERFORMANCE.md), on a quiet machine
        assert occ["share"] >= 0.6, (p["profile"], occ)
    if early_stop:
        stopping = {p["profile"]: p["stopping"] for p in res.summary["profiles"]}
        assert stopping["mtp"]["0.7"]["settled"], stopping
