"""`stop -H a,b` (and `fab fleet --command stop`): each host's outcome is read from what ``ops.stop`` returns, a
dict. The fleet read it as a StopResult (``res.describe()``), so every host ended `AttributeError: 'dict' object
has no attribute 'describe'`, exit 2, even when the stop itself was done."""

from __future__ import annotations

from mtp_remote.fleet import run_fleet
from tests.conftest import free_port


def test_a_fleet_stop_of_hosts_with_no_server_is_a_clean_outcome_per_host(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("default_host: a\nhosts:\n" + "".join(
        f"  {h}:\n    transport: local\n    engine: sim\n    workdir: {tmp_path / h}\n    port: {free_port()}\n"
        for h in ("a", "b")))
    report = run_fleet("stop", ["a", "b"], inventory=str(inv), write=False)
    assert [(h.host, h.exit_code, h.verdicts, h.detail, h.error) for h in report.hosts] == [
        ("a", 0, {"stop": "none"}, "no server recorded", None),
        ("b", 0, {"stop": "none"}, "no server recorded", None)]
    assert report.exit_code == 0
