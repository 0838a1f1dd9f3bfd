"""The shipped sim hosts' fixed ports (30011, 30012, 30021) have an override: ``MTP_REMOTE_PORT_OFFSET=N``
moves every host on this machine by N ports and gives it its own workdir (its own server record and lock),
so a second user or clone runs the demo beside the first; hosts reached over SSH keep theirs."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.config.inventory import apply_port_offset, load_inventory, port_offset
from mtp_remote.errors import ConfigError
from tests.conftest import ROOT


def test_the_offset_moves_the_shipped_local_hosts_and_gives_each_its_own_workdir(monkeypatch):
    monkeypatch.setenv("MTP_REMOTE_PORT_OFFSET", "100")
    inv = load_inventory(ROOT / "inventory.yaml")
    assert [inv.hosts[h].port for h in ("sim-local", "sim-healthy", "real-cpu")] == [30111, 30112, 30121]
    assert inv.hosts["sim-local"].workdir == "~/.mtp-remote/hosts/sim-local-30111"
    monkeypatch.delenv("MTP_REMOTE_PORT_OFFSET")
    assert load_inventory(ROOT / "inventory.yaml").hosts["sim-local"].port == 30011


def test_an_ssh_host_keeps_its_port(tmp_path):
    f = tmp_path / "inv.yaml"
    f.write_text("default_host: gpu\nhosts:\n  gpu: {transport: ssh, address: 10.0.0.5, port: 30000}\n"
                 "  sim: {transport: local, engine: sim, port: 30011}\n")
    inv = apply_port_offset(load_inventory(f), 7)
    assert (inv.hosts["gpu"].port, inv.hosts["sim"].port) == (30000, 30018)


@pytest.mark.parametrize("raw", ["abc", "1.5", "99999999"])
def test_an_offset_that_is_no_whole_number_is_refused_naming_the_variable(raw):
    with pytest.raises(ConfigError, match="MTP_REMOTE_PORT_OFFSET"):
        port_offset({"MTP_REMOTE_PORT_OFFSET": raw})


def test_an_offset_that_moves_a_port_out_of_range_is_refused(monkeypatch):
    monkeypatch.setenv("MTP_REMOTE_PORT_OFFSET", "40000")
    r = CliRunner().invoke(main, ["hosts", "-i", str(ROOT / "inventory.yaml")])
    assert r.exit_code == 2 and "outside 1-65535" in r.output and "MTP_REMOTE_PORT_OFFSET" in r.output
