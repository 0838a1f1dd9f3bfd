"""SSH failures name their cause: host, port and why (refused, DNS, no SSH banner, which key and user) —
never paramiko's "[Errno None] Unable to connect" or an 18 s wait ending in "No existing session"."""

from __future__ import annotations

import socket
import subprocess
import threading
import time

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.config.inventory import HostConfig
from mtp_remote.errors import ConnectError
from mtp_remote.remote import connect as transport
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.ssh


def test_a_refused_port_says_refused_with_host_and_port(sshd):
    port = free_port()
    host = HostConfig(name="t", **sshd.host_config(ssh_port=port, connect_timeout=2))
    with pytest.raises(ConnectError) as err:
        transport.connect(host)
    msg = str(err.value)
    assert f"cannot reach {sshd.user}@127.0.0.1:{port}: connection refused" in msg
    assert "Errno None" not in msg and "Unable to connect" not in msg


def test_a_name_that_does_not_resolve_says_dns(sshd):
    host = HostConfig(name="t", **sshd.host_config(address="no-such-host.invalid", connect_timeout=2))
    with pytest.raises(ConnectError, match=r"no-such-host.invalid:\d+: the name does not resolve \(DNS"):
        transport.connect(host)


def test_a_port_without_an_ssh_banner_fails_fast_and_says_so(sshd):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    held = []
    stop = threading.Event()

    def accept():  # accept and say nothing, like a wrong service on the port
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                pass

    threading.Thread(target=accept, daemon=True).start()
    port = silent.getsockname()[1]
    host = HostConfig(name="t", **sshd.host_config(ssh_port=port, connect_timeout=2))
    t0 = time.monotonic()
    try:
        with pytest.raises(ConnectError) as err:
            transport.connect(host)
    finally:
        stop.set()
        silent.close()
        for s in held:
            s.close()
    elapsed = time.monotonic() - t0
    assert f"no SSH server answered on {sshd.user}@127.0.0.1:{port} (banner timeout 2 s)" in str(err.value)
    assert "No existing session" not in str(err.value)
    assert elapsed < 10, elapsed  # 2 s per attempt, 3 attempts — not 18 s


def test_an_authentication_failure_names_the_key_and_the_user(sshd, tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    host = HostConfig(name="t", **sshd.host_config(key_file=str(tmp_path / "other")))
    with pytest.raises(ConnectError) as err:
        transport.connect(host)
    msg = str(err.value)
    assert f"SSH authentication failed on {sshd.user}@127.0.0.1:{sshd.port}" in msg
    assert f"user {sshd.user!r} with key {tmp_path / 'other'}" in msg


def test_sshd_down_at_start_is_one_line_exit_2_with_partial_json_and_no_traceback(sshd, tmp_path):
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "gpu", "hosts": {"gpu": sshd.host_config(
        ssh_port=free_port(), connect_timeout=1, engine="sim", workdir=str(tmp_path / "wd"))}}))
    r = CliRunner().invoke(main, ["diagnose", "-i", str(inv), "-p", str(ROOT / "playbooks" / "diagnose-mtp.yaml"),
                                  "--runs-dir", str(tmp_path / "runs")])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit)
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "connection refused" in errors[0], r.output
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    import json

    # failed before its first sample: a failed-run summary with the cause, and no resume suggested
    doc = json.loads((run_dir / "summary.json").read_text())
    assert doc["status"] == "failed" and doc["cause"]["type"] == "ConnectError" and doc["exit_code"] == 2
    assert "--resume" not in r.output and "nothing to resume" in r.output
