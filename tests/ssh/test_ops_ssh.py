"""Operator tasks over a real sshd on 127.0.0.1 against a sim host: preflight lists a planted foreign SGLang
process and a busy port; status and stop --force deal with foreign processes by PID only."""

from __future__ import annotations

import json
import socket

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from tests.conftest import ROOT, free_port
from tests.support.fake_server import spawn_fake_server

pytestmark = [pytest.mark.ssh, pytest.mark.sim]


@pytest.fixture
def host_files(sshd, tmp_path):
    port = free_port()
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "gpu-sim", "hosts": {"gpu-sim": sshd.host_config(
        engine="sim", workdir=str(tmp_path / "wd"), port=port, env={"SGLANG_SIM_TIME_SCALE": "0.01"})}}))
    return str(inv), port


@pytest.fixture
def foreign():
    """A process we did not start whose command line says sglang.launch_server (someone else's server)."""
    p = spawn_fake_server(31999)
    yield p
    p.kill()
    p.wait()


def test_preflight_over_ssh_lists_a_foreign_process_and_a_busy_port(host_files, foreign):
    inv, port = host_files
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen(1)
        r = CliRunner().invoke(main, ["preflight", "-i", inv, "-p", str(ROOT / "playbooks" / "diagnose-mtp.yaml"),
                                      "--json"])
    assert r.exit_code == 2, r.output  # a busy port fails preflight
    checks = {c["name"]: c for c in json.loads(r.output)}
    assert checks["port"]["status"] == "fail" and f"port {port} is already in use" in checks["port"]["detail"]
    assert checks["foreign-processes"]["status"] == "warn"
    assert f"PID {foreign.pid} (server" in checks["foreign-processes"]["detail"]
    assert checks["ssh"]["status"] == checks["python"]["status"] == "ok"
    assert checks["gpus"]["status"] in ("ok", "warn") and "MiB" in checks["gpus"]["detail"]
    assert {"lint:baseline", "lint:mtp"} <= set(checks)


def test_stop_leaves_foreign_processes_alone_unless_forced_and_then_only_those_on_this_host(host_files, foreign):
    inv, port = host_files
    on_our_port = spawn_fake_server(port)
    try:
        r = CliRunner().invoke(main, ["stop", "-i", inv])
        assert r.exit_code == 0, r.output
        assert "no server recorded" in r.output
        assert f"PID {on_our_port.pid} (server" in r.output and "left alone (--force stops it)" in r.output
        assert on_our_port.poll() is None and foreign.poll() is None

        r = CliRunner().invoke(main, ["stop", "-i", inv, "--force", "--term-timeout", "5"])
        assert r.exit_code == 0, r.output
        forced = r.output.split("signalled PIDs [", 1)[1].split("]", 1)[0]
        assert [int(x) for x in forced.split(",")] == [on_our_port.pid]
        on_our_port.wait(timeout=10)
        assert on_our_port.returncode == -15  # SIGTERM, by PID
        assert foreign.poll() is None, "another server on another port is not this host's business"
    finally:
        on_our_port.kill()
        on_our_port.wait()


def test_launch_status_logs_and_smoke_on_a_running_server_with_an_api_key(host_files, tmp_path):
    inv, port = host_files
    data = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    data["base_flags"] += " --api-key sekret-123"
    pb = str(tmp_path / "pb.yaml")
    yaml.safe_dump(data, open(pb, "w"))
    try:
        r = CliRunner().invoke(main, ["launch", "-i", inv, "-p", pb, "--profile", "mtp"])
        assert r.exit_code == 0, r.output
        assert "ready after" in r.output
        r = CliRunner().invoke(main, ["status", "-i", inv, "--json"])
        st = json.loads(r.output)
        assert st["server_state"] == "running" and st["server"]["profile"] == "mtp" and st["port_in_use"]
        r = CliRunner().invoke(main, ["logs", "-i", inv, "-n", "400"])
        assert r.exit_code == 0 and "mtp.log" in r.output
        assert "sekret-123" not in r.output and "api_key='***'" in r.output
        r = CliRunner().invoke(main, ["smoke", "-i", inv, "-p", pb, "--json", "--max-tokens", "512"])
        res = json.loads(r.output)
        assert r.exit_code == 0 and res["verdict"] == "ok" and res["accept_length"] > 2
    finally:
        r = CliRunner().invoke(main, ["stop", "-i", inv])
    assert "stopped PID" in r.output and "released" in r.output
