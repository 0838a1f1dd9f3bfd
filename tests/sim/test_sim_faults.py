"""Each fault of the simulated engine reproduces its field failure, as the log classifier sees it.

Startup faults are checked through ``mtp_remote.remote.logs.classify_log`` (the same classifier that reads
real SGLang logs from ``corpus/logs``); runtime faults through the HTTP API and the process state.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mtp_remote.remote.logs import classify_log
from tests.sim.conftest import FIELD_FLAGS, MTP_FLAGS

GENERATE = {"text": "What is 2+2?", "sampling_params": {"temperature": 0, "max_new_tokens": 16}}


@pytest.mark.parametrize(("faults", "flags", "cls"), [
    ("kv_pool_too_small", [], "kv_pool_too_small"),
    ("cuda_graph_oom", [], "cuda_graph_capture_failed"),
    ("nccl_error", [], "nccl_error"),
    ("radix_incompatible", MTP_FLAGS, "config_error"),
])
def test_startup_fault_exits_with_sglangs_message(sim, faults, flags, cls):
    s = sim(FIELD_FLAGS + flags, faults=faults, wait=False)
    assert s.wait_exit(30) == 1
    result = classify_log(s.log)
    assert result.cls == cls, s.log[-2000:]


@pytest.mark.parametrize(("faults", "flags"), [
    ("kv_pool_too_small", ["--mem-fraction-static", "0.92"]),
    ("cuda_graph_oom", ["--mem-fraction-static", "0.80"]),
    ("cuda_graph_oom", ["--disable-cuda-graph"]),
    ("radix_incompatible", MTP_FLAGS + ["--disable-radix-cache"]),
    ("radix_incompatible", MTP_FLAGS + ["--mamba-scheduler-strategy", "extra_buffer"]),
    ("nccl_error", ["--tp", "1", "--model-path", "/models/Qwen3.5-9B"]),
])
def test_startup_fault_goes_away_with_the_flag_that_fixes_it(sim, faults, flags):
    s = sim(FIELD_FLAGS + flags, faults=faults)
    assert classify_log(s.log).cls == "ready"


def test_a_27b_model_does_not_fit_one_48gib_gpu(sim):
    s = sim(["--model-path", "/models/Qwen3.6-27B"], wait=False)
    assert s.wait_exit(30) == 1
    assert classify_log(s.log).cls == "cuda_oom"


def test_crash_after_n_requests_kills_the_server_mid_run(sim):
    s = sim(FIELD_FLAGS + MTP_FLAGS, faults="crash_after=2")
    with s.client() as c:
        for _ in range(2):
            assert c.post("/generate", json=GENERATE).status_code == 200
        with pytest.raises(httpx.TransportError):
            c.post("/generate", json=GENERATE)
    assert s.wait_exit(10) == 1
    assert classify_log(s.log).cls == "cuda_error"


def test_hang_after_n_requests_keeps_health_200_until_the_watchdog_fires(sim):
    s = sim(FIELD_FLAGS + ["--watchdog-timeout", "300"], faults="hang_after=1")  # 300 s * 0.01 = 3 s
    with s.client() as c:
        assert c.post("/generate", json=GENERATE).status_code == 200
        with pytest.raises(httpx.TimeoutException):
            c.post("/generate", json=GENERATE, timeout=0.5)
        assert c.get("/health").status_code == 200
        assert c.get("/health_generate", timeout=5).status_code == 503
    assert classify_log(s.log).cls == "health_check_failed"
    assert s.wait_exit(10) == 1
    assert classify_log(s.log).cls == "watchdog_timeout"


def test_slow_release_keeps_gpu_memory_reported_after_exit(sim):
    s = sim(FIELD_FLAGS, faults="slow_release=1.5")
    query = ("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
    assert len(s.nvidia_smi(*query).splitlines()) == 2
    os.killpg(s.proc.pid, signal.SIGKILL)
    s.wait_exit(5)
    time.sleep(0.3)
    assert len(s.nvidia_smi(*query).splitlines()) == 2
    time.sleep(1.6)
    assert s.nvidia_smi(*query).strip() == ""


def test_stale_orphan_scheduler_outlives_the_server_group_and_keeps_memory(sim):
    s = sim(FIELD_FLAGS, faults="stale_orphan=30")
    os.killpg(s.proc.pid, signal.SIGKILL)
    s.wait_exit(5)
    time.sleep(0.3)
    s.nvidia_smi("--query-compute-apps=pid")  # first sight of the dead ranks starts their release delay
    time.sleep(0.2)
    rows = s.nvidia_smi("--query-compute-apps=pid,process_name,used_memory",
                        "--format=csv,noheader,nounits").strip().splitlines()
    assert len(rows) == 1
    pid, name, mib = (f.strip() for f in rows[0].split(","))
    try:
        assert name == "sglang::scheduler_TP1" and int(mib) > 20000
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        assert cmdline == "sglang::scheduler_TP1"
        assert os.getpgid(int(pid)) != s.proc.pid
    finally:
        os.kill(int(pid), signal.SIGKILL)


def test_unknown_flag_is_an_argparse_error_with_exit_2():
    r = subprocess.run([sys.executable, "-m", "mtp_remote.sim.launch_server", "--model-path", "/m",
                        "--speculative-num-stpes", "3"], capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 2
    assert "launch_server.py: error: unrecognized arguments: --speculative-num-stpes 3" in r.stderr
    assert classify_log(r.stderr).cls == "argparse_error"
