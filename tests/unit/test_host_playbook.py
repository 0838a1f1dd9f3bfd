"""A host's own ``playbook:`` in the inventory is the playbook of every command run on that host without
``-p``: not only ``diagnose``/``mitigate``/``bisect`` but ``preflight`` (whose lint covers its profiles),
``launch`` (whose ``--profile`` names one of them) and ``smoke``. Before, those three read
``playbooks/diagnose-mtp.yaml`` whatever the host said: ``launch -H real-cpu --profile standalone`` was refused
and ``preflight -H real-cpu`` linted the field case's profiles instead of the host's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from click.testing import CliRunner

from mtp_remote.cli import main
from mtp_remote.fleet import run_fleet
from tests.conftest import ROOT, free_port


def _host_with_its_own_playbook(tmp_path):
    pb = (ROOT / "playbooks" / "diagnose-mtp.yaml").read_text().replace("\n  mtp:\n", "\n  standalone:\n")
    (tmp_path / "own.yaml").write_text(pb)
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"""default_host: cpu-box
hosts:
  cpu-box:
    transport: local
    engine: sim
    workdir: {tmp_path / 'wd'}
    port: {free_port()}
    playbook: {tmp_path / 'own.yaml'}
""")
    return inv


def test_preflight_lints_the_profiles_of_the_hosts_own_playbook(tmp_path):
    inv = _host_with_its_own_playbook(tmp_path)
    r = CliRunner().invoke(main, ["preflight", "-i", str(inv), "--json"])
    names = [ch["name"] for ch in json.loads(r.stdout)]
    assert "lint:standalone" in names and "lint:mtp" not in names, names


def test_launch_takes_a_profile_of_the_hosts_own_playbook_and_lists_its_profiles(tmp_path):
    inv = _host_with_its_own_playbook(tmp_path)
    r = CliRunner().invoke(main, ["launch", "-i", str(inv), "--profile", "nosuch"])
    assert r.exit_code == 2
    assert "unknown profile 'nosuch'; choose one of: baseline, standalone" in r.stderr


def test_fab_launch_and_preflight_read_the_hosts_own_playbook_too(tmp_path):
    inv = _host_with_its_own_playbook(tmp_path)
    fab = os.path.join(os.path.dirname(sys.executable), "fab")
    env = {k: v for k, v in os.environ.items() if k != "MTP_REMOTE_INVENTORY"}
    r = subprocess.run([fab, "-r", str(ROOT), "launch", "--profile", "nosuch", "--inventory", str(inv)],
                       capture_output=True, text=True, env=env, timeout=60, check=False)
    assert r.returncode == 2
    assert "unknown profile 'nosuch'; choose one of: baseline, standalone" in r.stderr, r.stderr
    p = subprocess.run([fab, "-r", str(ROOT), "preflight", "--json", "--inventory", str(inv)],
                       capture_output=True, text=True, env=env, timeout=60, check=False)
    assert "lint:standalone" in [ch["name"] for ch in json.loads(p.stdout)], p.stderr


def test_fleet_preflight_lints_each_hosts_own_playbook(tmp_path):
    inv = _host_with_its_own_playbook(tmp_path)
    text = inv.read_text() + f"""  plain:
    transport: local
    engine: sim
    workdir: {tmp_path / 'wd2'}
    port: {free_port()}
"""
    inv.write_text(text)
    report = run_fleet("preflight", ["cpu-box", "plain"], inventory=str(inv), write=False)
    by_host = {h.host: h.verdicts for h in report.hosts}
    assert "lint:standalone" in by_host["cpu-box"] and "lint:mtp" not in by_host["cpu-box"], by_host
    assert "lint:mtp" in by_host["plain"], by_host
