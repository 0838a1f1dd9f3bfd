"""Shared fixtures: the corpus path, free ports, and a real OpenSSH sshd on 127.0.0.1.

The sshd fixture uses throwaway host and user keys in a temporary directory, a random port, and nothing
from ~/.ssh; it logs in as the user running the tests (root in CI). Tests that need it are skipped, with the
reason, when no sshd binary exists (``make test`` installs openssh-server when it runs as root).
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.exists():
        pytest.fail(f"corpus not found at {CORPUS}: ../shared must sit beside the repository")
    return CORPUS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sshd_binary() -> str | None:
    return shutil.which("sshd") or next((p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd")
                                         if os.path.exists(p)), None)


@dataclass
class SshServer:
    """A running sshd: where it listens and the throwaway credentials that log in to it."""

    port: int
    user: str
    key_file: str
    known_hosts: str
    host_key_pub: str
    dir: Path

    def host_config(self, **extra) -> dict:
        """A HostConfig dict reaching this sshd (transport ssh, our python as the remote python)."""
        cfg = dict(transport="ssh", address="127.0.0.1", ssh_port=self.port, user=self.user,
                   key_file=self.key_file, known_hosts=self.known_hosts, python=sys.executable)
        cfg.update(extra)
        return cfg


@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> SshServer:
    binary = _sshd_binary()
    if binary is None:
        pytest.skip("no sshd binary: install openssh-server (make test does it when run as root)")
    d = tmp_path_factory.mktemp("sshd")
    os.chmod(d, 0o700)
    for name in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "user_key.pub").read_text())
    os.chmod(d / "authorized_keys", 0o600)
    port = free_port()
    user = getpass.getuser()
    config = d / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {d / 'host_key'}", f"PidFile {d / 'sshd.pid'}",
        f"AuthorizedKeysFile {d / 'authorized_keys'}", "PubkeyAuthentication yes",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
        "PermitRootLogin prohibit-password", f"AllowUsers {user}", "AllowTcpForwarding yes",
        "MaxSessions 64", "MaxStartups 64", "LogLevel ERROR", "PrintMotd no", "",
    ]))
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)
    proc = subprocess.Popen([binary, "-D", "-e", "-f", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                out = proc.stdout.read().decode() if proc.poll() is not None else ""
                proc.kill()
                pytest.fail(f"sshd did not start on 127.0.0.1:{port}: {out}")
            time.sleep(0.05)
    pub = (d / "host_key.pub").read_text().split()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {pub[0]} {pub[1]}\n")
    yield SshServer(port=port, user=user, key_file=str(d / "user_key"), known_hosts=str(d / "known_hosts"),
                    host_key_pub=f"{pub[0]} {pub[1]}", dir=d)
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
