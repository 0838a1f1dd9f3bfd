"""Issue 33 major 8: a connection dropped without a reset (a blackholing proxy between the tool and the real sshd:
no byte forwarded, no socket closed) is found by SSH keepalives and is ``transport_lost`` — never a hang, and never
the server's verdict (``hung:stalled`` of a healthy server while its requests sat on the dead connection).
Keepalives at 1 s × 2 here (``ssh.KEEPALIVE_S``/``KEEPALIVE_COUNT``; 5 s × 3 by default)."""

from __future__ import annotations

import time

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.config.inventory import load_inventory
from mtp_remote.errors import TransportLost
from mtp_remote.experiment import diagnose as api
from mtp_remote.experiment.runner import Hooks
from mtp_remote.remote import connect as transport
from mtp_remote.remote import ssh
from tests.conftest import ROOT, free_port
from tests.support.blackhole import blackhole_proxy

pytestmark = [pytest.mark.ssh, pytest.mark.sim]


@pytest.fixture
def fast_keepalives(monkeypatch):
    monkeypatch.setattr(ssh, "KEEPALIVE_S", 1.0)
    monkeypatch.setattr(ssh, "KEEPALIVE_COUNT", 2)


def _inventory(tmp_path, sshd, port: int) -> str:
    cfg = sshd.host_config(engine="sim", workdir=str(tmp_path / "wd"), port=free_port(), ssh_port=port,
                           known_hosts=str(tmp_path / "known_hosts"), accept_new_host_key=True, connect_timeout=1,
                           env={"SGLANG_SIM_TIME_SCALE": "0.05", "SGLANG_SIM_STARTUP_SCALE": "0.002"})
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"default_host": "h", "hosts": {"h": cfg}}))
    return str(path)


def test_a_silently_dropped_connection_is_transport_lost_within_the_keepalive_bound(sshd, tmp_path, fast_keepalives):
    with blackhole_proxy(sshd.port) as proxy:
        host = load_inventory(_inventory(tmp_path, sshd, proxy.port)).get(None)
        c = transport.connect(host)
        try:
            assert c.run("echo hi", hide=True).stdout.strip() == "hi"
            proxy.blackhole()
            t0 = time.monotonic()
            with pytest.raises(TransportLost):
                c.run("sleep 0.5; echo hi", hide=True)
            took = time.monotonic() - t0
            assert took < 20, f"the dead connection was found after {took:.1f} s"
        finally:
            transport.close(c)


def test_a_silent_drop_while_sampling_is_transport_lost_not_a_stalled_server(sshd, tmp_path, fast_keepalives):
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=3, max_tokens=512)
    pb["prompts"] = pb["prompts"][:4]
    pb.setdefault("timeouts", {})["stall_s"] = 2.0
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))
    with blackhole_proxy(sshd.port) as proxy:
        inv = _inventory(tmp_path, sshd, proxy.port)
        seen = []

        def on_sample(profile, done, total):
            seen.append(profile)
            if len(seen) == 2:
                proxy.blackhole()

        t0 = time.monotonic()
        try:
            with pytest.raises(TransportLost) as e:
                api.diagnose(inventory=inv, playbook=str(tmp_path / "pb.yaml"), host="h",
                             runs_dir=tmp_path / "runs", hooks=Hooks(on_sample=on_sample))
            took = time.monotonic() - t0
        finally:  # the server the lost run left on the host (its record kept) is stopped as the run said to
            direct = yaml.safe_load(open(inv))
            direct["hosts"]["h"]["ssh_port"] = sshd.port
            (tmp_path / "direct.yaml").write_text(yaml.safe_dump(direct))
            (tmp_path / "wd" / "lock").unlink(missing_ok=True)  # the lost run is over: its lock is ours to drop
            stopped = CliRunner().invoke(main, ["stop", "-i", str(tmp_path / "direct.yaml")])
    assert "lost" in str(e.value) and took < 90
    assert stopped.exit_code == 0, stopped.output
    runs = list((tmp_path / "runs").iterdir())
    summaries = [p / "summary.json" for p in runs if (p / "summary.json").exists()]
    for s in summaries:
        text = s.read_text()
        assert "stalled" not in text, "a dead connection was read as a hung server"
