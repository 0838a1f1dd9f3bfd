"""Round trips over a real sshd: a run of one launch cycle (prepare + lock, stop of a leftover, launch with
exec wait and identity record, one log stream for the server's life — readiness, children recorded at the
ready line, the log text —, stop with group gone and GPU release + unlock) costs 5 SSH exec sessions (31
before launch/stop/children became host-side scripts, 10 before the log stream), and the identity read over
SSH is right: PGID == PID of the server, not of the SSH session's shell."""

from __future__ import annotations

import sys
import time

import pytest

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.serving.process import ProcessServer
from mtp_remote.remote import connect as transport
from mtp_remote.remote import facts
from mtp_remote.remote.commands import server_argv, server_env
from tests.conftest import free_port

pytestmark = [pytest.mark.ssh, pytest.mark.sim]

PB = Playbook.model_validate({"name": "t", "base_flags": "--tp-size 2 --max-running-requests 8",
                              "profiles": {"baseline": {"flags": ""}}, "prompts": [{"id": "a", "text": "hi"}]})


class Counting:
    """A Fabric Connection whose ``run`` calls (one SSH exec session each) are counted."""

    def __init__(self, c):
        self._c = c
        self.calls = 0

    def run(self, *a, **kw):
        self.calls += 1
        return self._c.run(*a, **kw)

    def __getattr__(self, k):
        return getattr(self._c, k)


def test_a_launch_cycle_over_ssh_is_five_exec_sessions(sshd, tmp_path):
    host = HostConfig(**sshd.host_config(engine="sim", workdir=str(tmp_path / "wd"), port=free_port(),
                                         env={"SGLANG_SIM_TIME_SCALE": "0.01", "A_SECRET": "s3cr3t v'al"}), name="h")
    conn = transport.connect(host)
    c = Counting(conn)
    rec = None
    try:
        lc = ProcessServer(c, host, python=sys.executable, workdir=host.workdir, run_id="r1")
        lc.prepare(lock_owner="me@here")
        assert (tmp_path / "wd" / "lock").read_text().startswith("me@here r1 ")
        lc.stop(term_s=10, gpu_release_s=10)
        rec = lc.launch("baseline", server_argv(host, PB, "baseline"), server_env(host, PB, "baseline", lc.workdir))
        calls_before_follow = c.calls
        info = facts.get_process_info(conn, rec.pid)
        assert rec.pgid == rec.pid == info.pgid and info.cmdline[1:3] == ("-m", "mtp_remote.sim.launch_server")
        with open(f"/proc/{rec.pid}/environ", "rb") as f:
            assert b"A_SECRET=s3cr3t v'al\0" in f.read(), "the environment reached the server intact"
        stream = lc.follow(rec)
        outcome = lc.wait_ready(rec, timeout_s=60, stream=stream)
        assert outcome.ok, outcome.describe()
        kids = (tmp_path / "wd" / "server.children").read_text().split()
        assert len(kids) >= 4, "children recorded on the host before the ready line reached us"
        deadline = time.monotonic() + 2  # the report comes on stderr, which may arrive after the ready line
        while stream.children is None and time.monotonic() < deadline:
            stream.read(0.05)
        assert [str(x) for kid in stream.children for x in kid] == kids, "and reported on the stream"
        res = lc.stop(term_s=10, gpu_release_s=10, unlock=True)
        assert res.found == "running" and res.signals == ["TERM"] and res.unlocked
        assert not (tmp_path / "wd" / "lock").exists()
        assert stream.wait_end(3.0) and stream.complete
        assert stream.text == open(rec.log_path).read(), "the stream carried the whole log, stop lines included"
        assert c.calls - calls_before_follow == 2, c.calls  # follow + stop: nothing else on the cycle's path
        assert c.calls == 5, c.calls
    finally:
        if rec is not None and (tmp_path / "wd" / "server.ident").exists():  # an assertion failed half-way
            lc.stop(term_s=10, gpu_release_s=10)
        transport.close(conn)
