"""fab as the README's table says: ``fab -H a,b TASK`` and ``fab -H GROUP TASK`` run diagnose, mitigate,
preflight, status and stop on every host at once (one fleet report, as ``mtp-remote CMD -H a,b``), ``fab
fleet --help`` answers, and fab and mtp-remote spell the run to start from the same way (``--from``, with
``--from-run`` as the other spelling in both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.cli.tasks import fab_hosts_given
from tests.conftest import ROOT, free_port

FAB = os.path.join(os.path.dirname(sys.executable), "fab")


def fab(*args, cwd):
    return subprocess.run([FAB, "-r", str(ROOT), *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          check=False)


def _inventory(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("default_host: a\nhosts:\n" + "".join(
        f"  {h}: {{transport: local, engine: sim, workdir: {tmp_path / h}, port: {free_port()}}}\n" for h in "ab")
        + "groups:\n  both: [a, b]\n")
    return inv


def test_fab_fleet_help_answers_and_without_its_options_names_them():
    r = fab("fleet", "--help", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "--command=STRING" in r.stdout and "--hosts=STRING" in r.stdout
    r = fab("fleet", cwd=ROOT)
    assert r.returncode == 2 and "fab fleet needs --command CMD and --hosts a,b|GROUP" in r.stderr


def test_fab_with_two_hosts_or_a_group_runs_status_on_all_at_once_in_one_report(tmp_path):
    inv = _inventory(tmp_path)
    for spec in ("a,b", "both"):
        r = fab("-H", spec, "status", "--json", "--inventory", str(inv), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout)  # one document: the later per-host call printed nothing more
        assert report["command"] == "status" and [h["host"] for h in report["hosts"]] == ["a", "b"]


def test_the_hosts_fab_was_given_are_read_whole_in_every_spelling():
    assert fab_hosts_given(["/x/fab", "-H", "a,b", "status"]) == "a,b"
    assert fab_hosts_given(["fab", "--hosts=g", "stop"]) == "g"
    assert fab_hosts_given(["fab", "-Ha,b", "status"]) == "a,b"
    assert fab_hosts_given(["fab", "status"]) is None
    assert fab_hosts_given(["mtp-remote", "-H", "a,b"]) is None


def test_fab_and_mtp_remote_both_take_from_and_from_run():
    for task in ("mitigate", "bisect"):
        r = fab(task, "--help", cwd=ROOT)
        assert "--from=STRING" in r.stdout and "--from-run=STRING" in r.stdout, r.stdout
        out = CliRunner().invoke(main, [task, "--help"]).output
        assert "--from, --from-run RUN_ID" in out, out


def test_fab_nightly_with_two_hosts_is_one_fleet_nightly_not_two_in_a_row(tmp_path):
    """Both hosts are unreachable SSH hosts (a closed port): each night fails at once, and the fleet's own
    summary shows that fab ran them as one fleet nightly."""
    inv = tmp_path / "inv.yaml"
    inv.write_text("default_host: a\nhosts:\n" + "".join(
        f"  {h}: {{transport: ssh, address: 127.0.0.1, ssh_port: {free_port()}, connect_timeout: 5}}\n" for h in "ab"))
    r = fab("-H", "a,b", "nightly", "--inventory", str(inv), "--runs-dir", str(tmp_path / "runs"),
            "--playbook", str(ROOT / "playbooks" / "nightly.yaml"), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    fleets = list((tmp_path / "runs").glob("fleet-*/summary.json"))
    assert len(fleets) == 1, r.stdout
    assert json.loads(fleets[0].read_text())["hosts_planned"] == ["a", "b"]
