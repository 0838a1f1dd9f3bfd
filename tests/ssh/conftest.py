"""A private sshd for the SSH fault tests: one the test may kill, restart on the same port, or give a new key.

The shared ``sshd`` fixture serves the whole session; tests that break the connection use ``own_sshd`` instead,
so no other test's connection is touched. Every process this fixture starts is stopped at teardown, by PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.sshd import SshdError, SshServer, running_sshd, sshd_binary


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # a session may end by itself between listing and kill
        os.kill(pid, signal.SIGKILL)


def _wait_gone(pid: int, timeout_s: float = 5.0) -> None:
    """Until ``pid`` has exited (gone, or a zombie: its listening socket is closed either way)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.002)


class SshdControl:
    """Kill the sessions (our connections drop), kill the listener (sshd gone), start it again, rotate its key."""

    def __init__(self, server: SshServer):
        self.server = server
        self.restarted: list[subprocess.Popen] = []

    @property
    def dir(self) -> Path:
        return self.server.dir

    def listener_pid(self) -> int | None:
        for p in reversed(self.restarted):
            if p.poll() is None:
                return p.pid
        try:
            pid = int((self.dir / "sshd.pid").read_text())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def session_pids(self) -> list[int]:
        """Per-connection sshd processes: the listener's children (only this test's connections use it)."""
        listener = self.listener_pid()
        out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
        return [int(a) for a, b in (ln.split() for ln in out.splitlines()) if listener and int(b) == listener]

    def kill_sessions(self) -> list[int]:
        pids = self.session_pids()
        for pid in pids:
            _kill(pid)
        return pids

    def stop(self) -> None:
        """sshd gone: the listener first (no reconnect possible), then the sessions."""
        listener = self.listener_pid()
        sessions = self.session_pids()
        if listener:
            _kill(listener)
            _wait_gone(listener)  # SIGKILL lands later: a reconnect accepted meanwhile reads a reset, not a refusal
        for pid in sessions:
            _kill(pid)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.server.port), timeout=0.2):
                    time.sleep(0.02)
            except OSError:
                return

    def start(self) -> None:
        """Start sshd again on the same port with the same config (and whatever host key is there now)."""
        p = subprocess.Popen([sshd_binary(), "-D", "-e", "-f", str(self.dir / "sshd_config")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.restarted.append(p)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.server.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise SshdError("sshd did not restart")

    def rotate_host_key(self) -> str:
        """Restart sshd with a new host key; returns the new public key line ("type base64")."""
        self.stop()
        for suffix in ("", ".pub"):
            (self.dir / f"host_key{suffix}").unlink()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.dir / "host_key")], check=True)
        self.start()
        return " ".join((self.dir / "host_key.pub").read_text().split()[:2])

    def close(self) -> None:
        for p in self.restarted:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def own_sshd(tmp_path_factory):
    if sshd_binary() is None:
        pytest.skip("no sshd binary: install openssh-server (make test does it when run as root)")
    with running_sshd(tmp_path_factory.mktemp("own-sshd")) as server:
        ctl = SshdControl(server)
        try:
            yield ctl
        finally:
            ctl.close()
