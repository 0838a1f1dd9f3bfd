"""A throwaway OpenSSH sshd on 127.0.0.1 (random port, fresh host and user keys, nothing from ~/.ssh).

Used by the test fixture ``sshd`` and by the benchmarks. It logs in as the user running it (root in CI).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tests.support.ports import free_port


def sshd_binary() -> str | None:
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
        """A HostConfig dict reaching this sshd (transport ssh, this python as the remote python)."""
        cfg = dict(transport="ssh", address="127.0.0.1", ssh_port=self.port, user=self.user,
                   key_file=self.key_file, known_hosts=self.known_hosts, python=sys.executable)
        cfg.update(extra)
        return cfg


class SshdError(RuntimeError):
    pass


@contextlib.contextmanager
def running_sshd(directory: Path | None = None) -> Iterator[SshServer]:
    """Start sshd in ``directory`` (a new temp dir by default); stop it on exit. Raises SshdError."""
    binary = sshd_binary()
    if binary is None:
        raise SshdError("no sshd binary: install openssh-server")
    d = Path(directory or tempfile.mkdtemp(prefix="mtp-sshd-"))
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
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read().decode() if proc.poll() is not None else ""
                    raise SshdError(f"sshd did not start on 127.0.0.1:{port}: {out}") from None
                time.sleep(0.05)
        pub = (d / "host_key.pub").read_text().split()
        (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {pub[0]} {pub[1]}\n")
        yield SshServer(port=port, user=user, key_file=str(d / "user_key"), known_hosts=str(d / "known_hosts"),
                        host_key_pub=f"{pub[0]} {pub[1]}", dir=d)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
