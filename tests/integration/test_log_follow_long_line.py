"""Issue 33 major 9: a long log line before the ready line (20 MB without a newline) no longer delays the tool by
minutes. ``follow.sh`` read the log line by line before the ready line — the shell reads a pipe one byte at a time
(~70 KB/s: 20 MB took ~5 min, 300 MB never finished); it now reads a pipe's worth at a time (``dd count=1``) and
still passes the ready line on only after the server's children are recorded.

A real process stands in for the server (``sleep``); its log is written before the stream opens. Local transport
and over the real sshd on 127.0.0.1 (the same script).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from invoke import Context

from mtp_remote.config.inventory import HostConfig
from mtp_remote.remote import connect as transport
from mtp_remote.remote.follow import LogStream
from mtp_remote.remote.log_state import READY_LINE

LINE_MB = 20
BOUND_S = 30.0  # measured: see docs/RELIABILITY.md (before: ~290 s at 70 KB/s)


def _follow_until_ready(c, wd: Path) -> tuple[float, LogStream, subprocess.Popen, int]:
    log = wd / "server.log"
    with log.open("wb") as f:
        f.write(b"[2026-12-03 07:00:00] start\n")
        f.write(b"x" * (LINE_MB << 20))
        f.write(f"\n[2026-12-03 07:00:01] {READY_LINE}\n".encode())
    size = log.stat().st_size
    server = subprocess.Popen(["sleep", "300"])
    time.sleep(0.1)
    start = int(Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    t0 = time.monotonic()
    stream = LogStream(c, str(log), server.pid, workdir=str(wd), start_ticks=start, python=sys.executable)
    tail = ""
    while READY_LINE not in tail and time.monotonic() - t0 < BOUND_S * 3:
        tail = (tail + stream.read(0.5))[-4096:]
    return time.monotonic() - t0, stream, server, size


def _check(c, tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    wd.mkdir(mode=0o700)
    took, stream, server, size = _follow_until_ready(c, wd)
    try:
        assert took < BOUND_S, f"the ready line after a {LINE_MB} MB line took {took:.1f} s"
        assert (wd / "server.children").exists(), "the ready line was passed on before the children were recorded"
        deadline = time.monotonic() + 5
        while stream.children is None and time.monotonic() < deadline:  # their report comes on stderr
            stream.read(0.1)
        assert stream.children == []
    finally:
        server.kill()
        server.wait()
    assert stream.wait_end(15), "the stream did not end after the server exited"
    assert stream.nbytes == size and stream.text.count("x") == LINE_MB << 20
    assert not list(wd.glob(".follow-*")), "the reader's held read was left"
    print(f"ready after a {LINE_MB} MB line in {took:.2f} s")


def test_a_20_mb_line_before_the_ready_line_is_followed_in_seconds_locally(tmp_path):
    _check(Context(), tmp_path)


@pytest.mark.ssh
def test_a_20_mb_line_before_the_ready_line_is_followed_in_seconds_over_ssh(sshd, tmp_path):
    host = HostConfig.model_validate({"name": "h", **sshd.host_config(engine="sim", workdir=str(tmp_path / "wd"))})
    c = transport.connect(host)
    try:
        _check(c, tmp_path)
    finally:
        transport.close(c)
