"""The runner keeps the server's slots busy (the sim as a real process, local transport)."""

from __future__ import annotations

import pytest

from mtp_remote import api
from tests.integration.test_scenarios import write_config

pytestmark = pytest.mark.sim


@pytest.mark.parametrize("early_stop", [False, True])
def test_sampling_keeps_every_slot_busy_until_nothing_is_left_to_send(tmp_path, early_stop):
    inv, pb = write_config(tmp_path, "state_leak", samples=8, max_tokens=256, early_stop=early_stop)
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs")
    for p in res.summary["profiles"]:
        occ = p["occupancy"]
        assert occ["limit"] == 16 and occ["sent"] >= 16, occ
        # the old round-by-round early stopping kept 4 of 16 busy here (one request per prompt)
        assert occ["share"] >= 0.9, (p["profile"], occ)
    if early_stop:
        stopping = {p["profile"]: p["stopping"] for p in res.summary["profiles"]}
        assert stopping["mtp"]["0.7"]["settled"], stopping
