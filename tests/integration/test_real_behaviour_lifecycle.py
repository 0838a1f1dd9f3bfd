"""The lifecycle against what real SGLang 0.5.9 does (the sim now does it too; docs/sim.md has the table).

A stop with a request in flight: the drain never ends, so the stop escalates to SIGKILL after
``timeouts.drain_s``, says so, and the port is free afterwards. A bind failure (``[Errno 98]``, after which
SGLang hangs deaf to SIGTERM) is caught by the readiness wait at once, with its cause, and the server stopped.
A request's 500 and its logged traceback are that request's error: the live watcher does not end the profile.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from mtp_remote.experiment.watch import server_failure, without_request_tracebacks
from mtp_remote.experiment.watch import watch as watch_server
from mtp_remote.remote import process
from mtp_remote.remote.commands import server_argv, server_env
from mtp_remote.remote.logs import classify_log
from tests.conftest import CORPUS
from tests.integration.test_lifecycle import (
    PLAYBOOK,
    _stop_what_tests_started,
    launch_ready,
    lifecycle,
    sim_host,
)

__all__ = ["_stop_what_tests_started"]  # the autouse fixture that stops what a test left running

pytestmark = pytest.mark.sim


def _port_bound(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _request_in_flight(port: int) -> threading.Thread:
    def ask():
        try:
            httpx.post(f"http://127.0.0.1:{port}/generate", timeout=30, json={
                "text": "What is 2+2?", "sampling_params": {"max_new_tokens": 100000, "ignore_eos": True}})
        except httpx.HTTPError:
            pass  # the connection dies with the server

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    return t


def _ready_with_a_request_in_flight(tmp_path):
    """A ready sim server whose log shows one request running: (lifecycle, record)."""
    lc = lifecycle(sim_host(tmp_path))
    rec, _ = launch_ready(lc)
    _request_in_flight(lc.host.port)
    deadline = time.monotonic() + 10
    while "#new-seq: 1" not in Path(rec.log_path).read_text().split("fired up")[-1] and time.monotonic() < deadline:
        time.sleep(0.01)
    return lc, rec


def test_stop_with_a_request_in_flight_escalates_after_drain_s_says_why_and_frees_the_port(tmp_path):
    lc, rec = _ready_with_a_request_in_flight(tmp_path)
    t0 = time.monotonic()
    res = lc.stop(term_s=60, drain_s=1.5, gpu_release_s=20)
    took = time.monotonic() - t0
    assert res.signals == ["TERM", "KILL"]
    assert 1.5 <= took < 10
    assert "did not finish within 2 s (timeouts.drain_s)" in res.kill_reason
    assert "still reported 1 request(s) in flight" in res.kill_reason
    assert res.kill_reason in res.describe()
    log = Path(rec.log_path).read_text()
    assert process.drain_report(log) == 1
    assert not _port_bound(lc.host.port)


def test_the_stop_command_gives_the_drain_30_s_by_default_and_names_term_timeout_when_it_runs_out(tmp_path):
    """`mtp-remote stop` waited 60 s (its --term-timeout) for a drain that never ends, where a run waits its
    timeouts.drain_s (30 s), and its kill reason named timeouts.term_s, a playbook field the command has not."""
    from click.testing import CliRunner

    from mtp_remote.cli.host import stop as stop_command
    from mtp_remote.host import ops

    defaults = {o.name: o.default for o in stop_command.params}
    assert defaults["term_timeout"] == ops.STOP_TERM_S == 30.0
    lc, rec = _ready_with_a_request_in_flight(tmp_path)
    out = ops.stop(lc.c, lc.host, sys.executable, term_s=1.5)
    assert out.ours.signals == ["TERM", "KILL"]
    assert "did not finish within 2 s (--term-timeout)" in out.ours.kill_reason
    assert out.to_dict()["ours"]["signals"] == ["TERM", "KILL"] and out.forced == [] and out.gpu_release_s is None
    assert not _port_bound(lc.host.port)
    assert CliRunner().invoke(stop_command, ["--term-timeout", "0"]).exit_code == 2  # refused before any host


def test_an_idle_server_stops_on_sigterm_alone(tmp_path):
    lc = lifecycle(sim_host(tmp_path))
    rec, _ = launch_ready(lc)
    res = lc.stop(term_s=60, drain_s=20, gpu_release_s=20)
    assert res.signals == ["TERM"] and res.kill_reason == ""
    assert process.drain_report(Path(rec.log_path).read_text()) == 0
    assert not _port_bound(lc.host.port)


def test_a_bind_failure_is_caught_at_once_with_its_cause_and_the_hung_server_is_stopped(tmp_path):
    lc = lifecycle(sim_host(tmp_path, SGLANG_SIM_FAULTS="port_in_use"))
    host = lc.host
    rec = lc.launch("baseline", server_argv(host, PLAYBOOK, "baseline"),
                    server_env(host, PLAYBOOK, "baseline", lc.workdir))
    t0 = time.monotonic()
    outcome = lc.wait_ready(rec, timeout_s=60)
    assert outcome.kind == "crashed" and outcome.cause == "port_in_use"
    assert "[Errno 98]" in outcome.fatal_line and str(host.port) in outcome.hint
    assert time.monotonic() - t0 < 20
    res = lc.stop(term_s=60, drain_s=1.0, gpu_release_s=20)
    assert res.signals == ["TERM", "KILL"], "SGLang ignores SIGTERM after a failed bind"
    assert process.read_record(lc.c, lc.workdir) is None


def test_the_ready_line_after_a_bind_failure_is_not_readiness(tmp_path):
    """Measured: relaunched onto a port a healthy server holds, SGLang 0.5.9 logs [Errno 98], then its warmup
    reaches the other server and it prints the ready line (then exits)."""
    from mtp_remote.serving.readiness import Watch

    text = (CORPUS / "logs" / "l05_http_port_in_use.log").read_text()
    text += "[2026-11-02 09:15:00] The server is fired up and ready to roll!\n"

    class _Lc:
        on_progress = staticmethod(lambda msg: None)

    class _Rec:
        profile = "baseline"

    outcome = Watch(_Lc(), _Rec(), 60, lambda: True).step(text, alive=True)
    assert outcome is not None and (outcome.kind, outcome.cause) == ("crashed", "port_in_use")


def test_request_tracebacks_are_not_server_failures_in_the_real_log(corpus):
    text = (corpus / "logs" / "l18_real_request_error_then_clean_stop.log").read_text()
    assert "Exception in ASGI application" in text
    judged = classify_log(without_request_tracebacks(text))
    assert not judged.is_fatal, judged.fatal_line
    assert "Exception in ASGI application" not in without_request_tracebacks(text)
    assert "The server is fired up and ready to roll!" in without_request_tracebacks(text)


@pytest.mark.parametrize("watch", ["stream", "poll"])
def test_a_500_on_one_request_does_not_end_the_profile(tmp_path, watch):
    lc = lifecycle(sim_host(tmp_path))
    rec, _ = launch_ready(lc)
    stream = lc.follow(rec) if watch == "stream" else None
    bad = httpx.post(f"http://127.0.0.1:{lc.host.port}/generate", timeout=30,
                     json={"text": "What is 2+2?", "sampling_params": {"seed": 1}})
    assert bad.status_code == 500
    assert "Exception in ASGI application" in Path(rec.log_path).read_text()

    async def watch_briefly():
        try:
            return await asyncio.wait_for(watch_server(lc, rec, stream, stall_s=PLAYBOOK.timeouts.stall_s,
                                                       interval_s=0.1), timeout=1.5)
        except asyncio.TimeoutError:
            return None

    assert asyncio.run(watch_briefly()) is None, "the watcher ended the profile on a request's 500"
    assert server_failure(lc, rec, stream, failed=False) is None
    if stream is not None:
        assert "Exception in ASGI application" in stream.text, "the stream saw the traceback it judged"
        lc.stop(term_s=10, gpu_release_s=10)
        assert stream.wait_end(3.0) and stream.complete
        assert stream.text == Path(rec.log_path).read_text(), "the stream holds the whole log once it ends"
