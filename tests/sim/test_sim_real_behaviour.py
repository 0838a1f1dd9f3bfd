"""The sim does what real SGLang 0.5.9 does where the lifecycle depends on it (measured: docs/sim.md).

A SIGTERM to the process group kills the scheduler and the detokenizer at once, so a request in flight is
never finished and the main process reports it every 5 s (scaled) without end, keeping the port; a busy port
logs ``[Errno 98]`` and the process then hangs, deaf to SIGTERM; a bad sampling parameter is that request's
500 with a traceback in the log, and the server keeps serving.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time

import httpx

from mtp_remote.remote.logs import classify_log
from tests.sim.conftest import FIELD_FLAGS

GRACEFUL = re.compile(r"Gracefully exiting\.\.\. Remaining number of requests (\d+)\. Remaining requests "
                      r"remaining_rids=\[(.*)\]\.")


def _port_bound(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _admitted(s, n: int = 1, timeout: float = 10.0) -> bool:
    """True once ``n`` requests besides the warmup (the first prefill) have been admitted."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(int(k) for k in re.findall(r"#new-seq: (\d+)", s.log)) >= n + 1:
            return True
        time.sleep(0.005)
    return False


def _long_request(s, out: list) -> threading.Thread:
    def ask():
        try:
            with s.client() as c:
                out.append(c.post("/generate", json={"text": "What is 2+2?", "sampling_params": {
                    "temperature": 0.7, "max_new_tokens": 100000, "ignore_eos": True}}).status_code)
        except httpx.HTTPError as e:
            out.append(type(e).__name__)

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    return t


def test_group_sigterm_with_a_request_in_flight_drains_forever_and_keeps_the_port(sim):
    s = sim(FIELD_FLAGS)  # time scale 0.01: the 5 s report interval is 0.05 s
    out: list = []
    _long_request(s, out)
    assert _admitted(s)
    os.killpg(s.proc.pid, signal.SIGTERM)
    assert s.wait_line("SIGTERM received. signum=None frame=None. Draining requests and shutting down...", 5)
    time.sleep(1.0)  # = 100 s of SGLang time
    assert s.proc.poll() is None and _port_bound(s.port)
    reports = GRACEFUL.findall(s.log)
    assert len(reports) >= 5 and {n for n, _ in reports} == {"1"}
    os.killpg(s.proc.pid, signal.SIGKILL)
    assert s.wait_exit(5) == -signal.SIGKILL
    assert not _port_bound(s.port)


def test_sigterm_to_the_leader_only_lets_the_request_finish_then_the_server_kills_itself(sim):
    s = sim(FIELD_FLAGS)
    out: list = []
    t = threading.Thread(target=lambda: out.append(s.client().post("/generate", json={
        "text": "What is 2+2?", "sampling_params": {"temperature": 0.7, "max_new_tokens": 300,
                                                    "ignore_eos": True}}).json()), daemon=True)
    t.start()
    assert _admitted(s)
    os.kill(s.proc.pid, signal.SIGTERM)  # the leader alone: its scheduler lives and finishes the request
    t.join(30)
    assert out and out[0]["meta_info"]["completion_tokens"] == 300
    assert s.wait_exit(20) == -signal.SIGKILL  # SGLang ends with kill_process_tree(include_parent=True)
    assert GRACEFUL.findall(s.log)[-1] == ("0", "")


def test_idle_server_exits_on_sigterm_after_reporting_zero_requests(sim):
    s = sim(FIELD_FLAGS)
    os.killpg(s.proc.pid, signal.SIGTERM)
    assert s.wait_exit(10) == -signal.SIGKILL
    assert GRACEFUL.findall(s.log) == [("0", "")]
    assert not _port_bound(s.port)


def test_force_shutdown_env_exits_at_once_with_requests_in_flight(sim):
    s = sim(FIELD_FLAGS, extra_env={"SGL_FORCE_SHUTDOWN": "1"})
    out: list = []
    _long_request(s, out)
    assert _admitted(s)
    os.killpg(s.proc.pid, signal.SIGTERM)
    assert s.wait_exit(10) == -signal.SIGKILL
    assert "Signal SIGTERM received while force shutdown flag set. Force exiting." in s.log


def test_busy_port_logs_errno_98_then_hangs_and_ignores_sigterm(sim):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        s = sim(FIELD_FLAGS, wait=False, port=port)
        assert s.wait_line("[Errno 98] error while attempting to bind on address", 30)
        assert "Load weight end." in s.log  # found only after the weights are loaded, as in SGLang
        cls = classify_log(s.log)
        assert (cls.cls, cls.port) == ("port_in_use", port)
        os.killpg(s.proc.pid, signal.SIGTERM)
        assert s.wait_exit(1.0) is None  # still there: SIGTERM kills the children, not the main process
        os.killpg(s.proc.pid, signal.SIGKILL)
        assert s.wait_exit(5) == -signal.SIGKILL
    finally:
        holder.close()


def test_port_in_use_fault_hangs_like_a_real_busy_port(sim):
    s = sim(FIELD_FLAGS, faults="port_in_use", wait=False)
    assert s.wait_line("address already in use", 30)
    assert s.wait_exit(0.5) is None
    assert classify_log(s.log).cls == "port_in_use"


def test_a_bad_sampling_parameter_is_that_requests_500_and_the_server_keeps_serving(sim):
    s = sim(FIELD_FLAGS)
    with s.client() as c:
        bad = c.post("/generate", json={"text": "What is 2+2?", "sampling_params": {"seed": 7}})
        good = c.post("/generate", json={"text": "What is 2+2?", "sampling_params": {
            "temperature": 0.7, "max_new_tokens": 16, "sampling_seed": 7}})
        again = c.post("/generate", json={"text": "What is 2+2?", "sampling_params": {
            "temperature": 0.7, "max_new_tokens": 16, "sampling_seed": 7}})
    assert (bad.status_code, bad.text) == (500, "Internal Server Error")
    assert good.status_code == 200 and good.json()["output_ids"] == again.json()["output_ids"]
    log = s.log
    access = log.index('"POST /generate HTTP/1.1" 500 Internal Server Error')
    error = log.index("ERROR:    Exception in ASGI application\nTraceback (most recent call last):")
    assert access < error
    assert "TypeError: SamplingParams.__init__() got an unexpected keyword argument 'seed'" in log[error:]
    assert s.proc.poll() is None
