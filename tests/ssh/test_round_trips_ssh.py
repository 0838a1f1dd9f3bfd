"""Round trips over a real sshd: one launch cycle (prepare, lock, stop of a leftover, launch with exec wait
and identity record, follow to ready, children, log read, stop with group gone and GPU release, unlock)
costs 10 SSH exec sessions (31 before launch/stop/children became host-side scripts), and the identity
read over SSH is right: PGID == PID of the server, not of the SSH session's shell."""

from __future__ import annotations

import sys

import pytest

from mtp_remote.config import HostConfig, Playbook
from mtp_remote.remote import connect as transport
from mtp_remote.remote import facts
from mtp_remote.remote.commands import server_argv, server_env
from mtp_remote.server import ServerLifecycle
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


def test_a_launch_cycle_over_ssh_is_ten_exec_sessions(sshd, tmp_path):
    host = HostConfig(**sshd.host_config(engine="sim", workdir=str(tmp_path / "wd"), port=free_port(),
                                         env={"SGLANG_SIM_TIME_SCALE": "0.01", "A_SECRET": "s3cr3t v'al"}), name="h")
    conn = transport.connect(host)
    c = Counting(conn)
    try:
        lc = ServerLifecycle(c, host, python=sys.executable, workdir=host.workdir, run_id="r1")
        lc.prepare()
        lc.acquire_lock("me@here")
        lc.stop(term_s=10, gpu_release_s=10)
        rec = lc.launch("baseline", server_argv(host, PB, "baseline"), server_env(host, PB, "baseline", lc.workdir))
        info = facts.get_process_info(conn, rec.pid)
        assert rec.pgid == rec.pid == info.pgid and info.cmdline[1:3] == ("-m", "mtp_remote.sim.launch_server")
        with open(f"/proc/{rec.pid}/environ", "rb") as f:
            assert b"A_SECRET=s3cr3t v'al\0" in f.read(), "the environment reached the server intact"
        outcome = lc.wait_ready(rec, timeout_s=60)
        assert outcome.ok, outcome.describe()
        lc.read_log(rec.log_path)
        res = lc.stop(term_s=10, gpu_release_s=10)
        lc.release_lock()
        assert res.found == "running" and res.signals == ["TERM"]
        assert c.calls <= 10, c.calls
    finally:
        transport.close(conn)
