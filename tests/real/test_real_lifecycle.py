"""Real SGLang 0.5.9 through the real sshd: launch → ready → /generate → the loop stop's abort → stop with a
request in flight → port free.

The same code paths as a GPU host (ProcessServer over a Fabric Connection, the SSH tunnel for HTTP), with the
CPU start options given as host env and playbook flags only. Measured here: a stream the tool's watch stops is
aborted (``/abort_request``) and its slot freed sooner than a stream only closed, which SGLang aborts 2 s later
(``test_real_loop_stop.py`` has the abort path on its own server, with the idle stop after it, in ``make
test-real``; this test gives ``make test`` the same evidence without a second real start). SGLang's SIGTERM drain
never ends with a request in flight (its scheduler dies with the group's SIGTERM), so the stop escalates to
SIGKILL after ``drain_s`` and says so; afterwards no process of the group is left and the port is free.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import httpx
import pytest

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.serving.process import ProcessServer
from mtp_remote.remote import connect as transport
from mtp_remote.remote import facts, process
from mtp_remote.remote.commands import server_argv, server_env
from tests.conftest import free_port
from tests.real.conftest import READY_S, wait_ready_with_health
from tests.support.real_hosts import REQUEST_S, abort_then_close

pytestmark = [pytest.mark.real, pytest.mark.ssh, pytest.mark.timeout(2400)]

PLAYBOOK = Playbook.model_validate(dict(
    name="real-lifecycle", base_flags="--device cpu --disable-overlap-schedule --max-total-tokens 8192",
    profiles={"baseline": {"flags": ""}}, prompts=[{"id": "p", "text": "What is 2+2?"}], temperatures=[0.0],
    max_tokens=32, api="generate"))
PROMPT = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n"


def _port_bound(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_real_sglang_over_ssh_launch_ready_generate_then_stop_with_a_request_in_flight(sshd, real_engine, tmp_path):
    host = HostConfig.model_validate(sshd.host_config(
        name="real-ssh", engine="sglang", python=real_engine.python, model_path=real_engine.model_path,
        workdir=str(tmp_path / "wd"), port=free_port(), env={"SGLANG_USE_CPU_ENGINE": "1"}))
    conn = transport.connect(host)
    lc = ProcessServer(conn, host, python=host.python, workdir=host.workdir, run_id="real-1")
    try:
        lc.prepare()
        rec = lc.launch("baseline", server_argv(host, PLAYBOOK, "baseline"),
                        server_env(host, PLAYBOOK, "baseline", lc.workdir))
        assert rec.cmdline[1:3] == ["-m", "sglang.launch_server"] and rec.pgid == rec.pid
        with transport.tunnel(conn, host) as url:
            outcome = wait_ready_with_health(lc, rec, url)
            seen = [m["name"] for m in outcome.milestones]
            assert {"weights_loaded", "kv_cache_allocated", "http_up", "ready"} <= set(seen)
            members = facts.group_members(facts.get_ps(conn), rec.pgid)
            titles = {m.args.split()[0] for m in members}
            assert {"sglang::scheduler", "sglang::detokenizer"} <= titles, titles

            out = httpx.post(f"{url}/generate", timeout=REQUEST_S, json={
                "text": PROMPT, "sampling_params": {"temperature": 0, "max_new_tokens": 32}}).json()
            meta = out["meta_info"]
            assert meta["completion_tokens"] == len(out["output_ids"]) == 32
            assert meta["finish_reason"] == {"type": "length", "length": 32}
            info = httpx.get(f"{url}/server_info", timeout=10).json()
            assert info["version"] == "0.5.9"
            freed, closed = abort_then_close(url, PROMPT)
            # the aborted request's slot is free sooner than a closed stream's (compared, not bounded: the
            # scheduler's steps slow down on a loaded machine, for both alike)
            assert freed < closed and closed > 1.0, (freed, closed)
            assert '"POST /abort_request HTTP/1.1" 200' in lc.read_log(rec.log_path)

            mark = len(lc.read_log(rec.log_path))  # (the streams above logged running requests too)
            in_flight = threading.Thread(target=lambda: _long_generate(url), daemon=True)
            in_flight.start()
            _wait_for(lambda: "#running-req: 1" in lc.read_log(rec.log_path)[mark:], REQUEST_S)
            t0 = time.monotonic()
            res = lc.stop(term_s=120, drain_s=8, gpu_release_s=20)
            took = time.monotonic() - t0
        assert res.signals == ["TERM", "KILL"], res.describe()
        assert 8 <= took < 120, took  # escalated after drain_s (8 s), not after term_s (120 s)
        assert "did not finish within 8 s (timeouts.drain_s)" in res.kill_reason
        assert "still reported 1 request(s) in flight" in res.kill_reason
        log = lc.read_log(rec.log_path)
        assert "SIGTERM received. signum=None frame=None. Draining requests and shutting down..." in log
        assert process.drain_report(log) == 1
        assert _live_members(conn, rec.pgid) == []
        assert not _port_bound(host.port)
        assert process.read_record(conn, lc.workdir) is None
    finally:
        lc.stop(term_s=10, drain_s=5, gpu_release_s=10)
        transport.close(conn)


def _live_members(c, pgid: int) -> list:
    """Members of the group that are not zombies (an exited process shows as ``[name] <defunct>`` until its
    parent reaps it; in a container that parent may be a PID 1 that reaps late)."""
    return [m for m in facts.group_members(facts.get_ps(c), pgid) if not m.args.startswith("[")]


def _long_generate(url: str) -> None:
    try:
        httpx.post(f"{url}/generate", timeout=REQUEST_S, json={
            "text": "hello", "sampling_params": {"temperature": 0.7, "max_new_tokens": 3000, "ignore_eos": True}})
    except httpx.HTTPError:
        pass  # the server is killed under it


def _wait_for(cond, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


@pytest.mark.skipif(os.environ.get("MTP_REMOTE_REAL_FULL") != "1", reason="make test-real runs it")
def test_real_sglang_on_a_port_taken_after_launch_is_caught_at_errno_98_and_killed(real_engine, tmp_path):
    """The port is free at launch (the pre-check passes) and taken before SGLang binds it, as by a server
    that is still draining: SGLang logs [Errno 98] and hangs; the wait says port_in_use at once and the stop
    needs SIGKILL (SGLang's main process does not exit on SIGTERM then)."""
    from invoke import Context

    host = HostConfig(name="real-local", transport="local", engine="sglang", python=real_engine.python,
                      model_path=real_engine.model_path, workdir=str(tmp_path / "wd"), port=free_port(),
                      env={"SGLANG_USE_CPU_ENGINE": "1"})
    lc = ProcessServer(Context(), host, python=host.python, workdir=host.workdir, run_id="real-2")
    holder = socket.socket()
    try:
        lc.prepare()
        rec = lc.launch("baseline", server_argv(host, PLAYBOOK, "baseline"),
                        server_env(host, PLAYBOOK, "baseline", lc.workdir))
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", host.port))
        holder.listen(8)  # accepts the warmup's connection and never answers, like a stuck server
        outcome = lc.wait_ready(rec, timeout_s=READY_S)
        assert (outcome.kind, outcome.cause) == ("crashed", "port_in_use"), outcome.describe()
        log = lc.read_log(rec.log_path)
        bind_line_at = log.index("[Errno 98]")
        assert "Load weight end." in log[:bind_line_at]
        res = lc.stop(term_s=60, drain_s=5, gpu_release_s=10)
        assert res.signals == ["TERM", "KILL"], res.describe()
        assert _live_members(lc.c, rec.pgid) == []
    finally:
        holder.close()
        lc.stop(term_s=10, drain_s=5, gpu_release_s=10)
