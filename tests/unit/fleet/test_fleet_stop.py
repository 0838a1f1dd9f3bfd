"""`stop -H a,b` (and `fab fleet --command stop`): each host's outcome is read from what ``ops.stop`` returns, a
dict. The fleet read it as a StopResult (``res.describe()``), so every host ended `AttributeError: 'dict' object
has no attribute 'describe'`, exit 2, even when the stop itself was done."""

from __future__ import annotations

from mtp_remote.fleet.fleet import run_fleet
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


def _two_hosts(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("default_host: a\nhosts:\n" + "".join(
        f"  {h}:\n    transport: local\n    engine: sim\n    workdir: {tmp_path / h}\n    port: {free_port()}\n"
        for h in ("a", "b")))
    return inv


def test_a_fleet_stop_passes_term_timeout_to_every_host(tmp_path, monkeypatch):
    """`stop -H a,b --term-timeout 5` waited the default 30 s on each host: the option was not passed on."""
    from click.testing import CliRunner

    from mtp_remote.cli.main import main
    from mtp_remote.host import ops

    seen = []
    real = ops.stop
    monkeypatch.setattr(ops, "stop", lambda *a, **kw: seen.append(kw["term_s"]) or real(*a, **kw))
    r = CliRunner().invoke(main, ["stop", "-i", str(_two_hosts(tmp_path)), "-H", "a,b", "--term-timeout", "5"])
    assert r.exit_code == 0, r.output
    assert seen == [5.0, 5.0]
    seen.clear()
    assert CliRunner().invoke(main, ["stop", "-i", str(_two_hosts(tmp_path)), "-H", "a,b"]).exit_code == 0
    assert seen == [ops.STOP_TERM_S] * 2


def test_fleet_status_and_preflight_honour_json(tmp_path):
    """`status -H a,b --json` printed the fleet table; now the fleet report as JSON on stdout."""
    import json

    from click.testing import CliRunner

    from mtp_remote.cli.main import main

    r = CliRunner().invoke(main, ["status", "-i", str(_two_hosts(tmp_path)), "-H", "a,b", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["command"] == "status" and [h["host"] for h in doc["hosts"]] == ["a", "b"]
    assert {h["verdicts"]["server"] for h in doc["hosts"]} == {"none"}, doc


def test_smoke_without_a_server_names_the_launch_for_this_host_and_inventory(tmp_path):
    """The hint said `mtp-remote launch --profile NAME`: run as printed it launches on the default inventory's
    default host, not the one smoke was pointed at."""
    import os
    import subprocess
    import sys

    from click.testing import CliRunner

    from mtp_remote.cli.main import main
    from tests.conftest import ROOT

    inv = _two_hosts(tmp_path)
    r = CliRunner().invoke(main, ["smoke", "-i", str(inv), "-H", "b"])
    assert r.exit_code == 2
    assert f"start one with `mtp-remote launch -H b -i {inv} --profile NAME`" in r.stderr, r.stderr
    fab = os.path.join(os.path.dirname(sys.executable), "fab")
    p = subprocess.run([fab, "-r", str(ROOT), "-H", "b", "smoke", "--inventory", str(inv)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and f"start one with `fab -H b launch --profile NAME --inventory {inv}`" in p.stderr, p
