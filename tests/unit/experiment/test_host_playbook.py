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
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.errors import ConfigError
from mtp_remote.fleet.fleet import run_fleet
from tests.conftest import ROOT, free_port


def _host_with_its_own_playbook(tmp_path):
    pb = (ROOT / "playbooks" / "diagnose-mtp.yaml").read_text().replace("\n  mtp:\n", "\n  standalone:\n")
    (tmp_path / "own.yaml").write_text(pb)
    return _inventory_of_one_host(tmp_path / "inv.yaml", tmp_path, tmp_path / "own.yaml")


def _inventory_of_one_host(inv, tmp_path, playbook) -> Path:
    """``inv``: one local sim host, cpu-box, whose own ``playbook:`` is ``playbook`` (as written)."""
    inv.write_text(f"""default_host: cpu-box
hosts:
  cpu-box:
    transport: local
    engine: sim
    workdir: {tmp_path / 'wd'}
    port: {free_port()}
    playbook: {playbook}
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


def test_a_command_run_from_a_subdirectory_still_reads_the_hosts_own_playbook(tmp_path, monkeypatch):
    """`diagnose` resolved the default playbook to the project's `playbooks/diagnose-mtp.yaml` (a path, no longer
    the default as typed) before asking the host, so from a subdirectory the host's `playbook:` was skipped."""
    from mtp_remote.experiment import diagnose as api
    from mtp_remote.experiment import hosts

    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "diagnose-mtp.yaml").write_text((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    (tmp_path / "playbooks" / "own.yaml").write_text(
        (ROOT / "playbooks" / "diagnose-mtp.yaml").read_text().replace("name: diagnose-mtp", "name: own").replace("\n  mtp:\n", "\n  standalone:\n"))
    _inventory_of_one_host(tmp_path / "inventory.yaml", tmp_path, "playbooks/own.yaml")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    monkeypatch.delenv("MTP_REMOTE_INVENTORY", raising=False)
    with pytest.raises(ConfigError) as e:  # refused at planning, before anything is launched
        api.diagnose(inventory=None, runs_dir=tmp_path / "runs", profiles=["nosuch"])
    assert e.value.file == str(tmp_path / "playbooks" / "own.yaml") and "standalone" in str(e.value), str(e.value)
    _, cfg, pb = hosts.load_config(None, "playbooks/diagnose-mtp.yaml", None)
    assert pb.name == "own"
    assert hosts.host_playbook_file("playbooks/diagnose-mtp.yaml", None, cfg) == tmp_path / "playbooks" / "own.yaml"
    assert hosts.host_playbook_file("playbooks/diagnose-mtp.yaml", None, cfg.model_copy(update={"playbook": None})) \
        == tmp_path / "playbooks" / "diagnose-mtp.yaml"
