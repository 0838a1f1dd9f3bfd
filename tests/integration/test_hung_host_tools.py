"""Issue 33 major 7: a hung ``nvidia-smi`` (a wedged driver) no longer hangs ``preflight``, ``status`` or ``stop``:
every call of it on the host runs under ``timeout`` (``facts.SMI_TIMEOUT_S``, 1 s here), and a stop whose GPU check
did not answer says so ("GPU memory not checked") instead of waiting for ever. Local transport (the same commands
and ``stop.sh`` as over SSH); the hung tool is an ``nvidia-smi`` on PATH that sleeps an hour.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

import pytest
from invoke import Context

from mtp_remote.config.inventory import HostConfig
from mtp_remote.host import ops, preflight as host_preflight
from mtp_remote.remote import facts, process
from tests.conftest import free_port

BOUND_S = 1.0


@pytest.fixture
def hung_smi(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "hungbin"
    d.mkdir()
    (d / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 3607\n")
    (d / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{d}:{__import__('os').environ['PATH']}")
    monkeypatch.setattr(facts, "SMI_TIMEOUT_S", BOUND_S)
    return d


@pytest.fixture
def gpu_host(tmp_path) -> HostConfig:
    (tmp_path / "wd").mkdir(mode=0o700)
    return HostConfig(name="gpu", transport="local", engine="sglang", workdir=str(tmp_path / "wd"),
                      port=free_port(), python=sys.executable, model_path=str(tmp_path / "model"))


def _no_hung_smi_left(hung_dir: Path) -> bool:
    out = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True).stdout
    return "sleep 3607" not in out


def test_preflight_and_status_end_within_the_bound_and_say_nvidia_smi_did_not_answer(hung_smi, gpu_host):
    t0 = time.monotonic()
    checks = {ch.name: ch for ch in host_preflight.preflight(Context(), gpu_host, None, sys.executable)}
    took = time.monotonic() - t0
    assert checks["gpus"].status == "fail" and "nvidia-smi did not answer within 1 s" in checks["gpus"].detail
    assert took < 15, f"preflight took {took:.1f} s"
    t0 = time.monotonic()
    ops.status(Context(), gpu_host, sys.executable)
    assert time.monotonic() - t0 < 10
    assert _no_hung_smi_left(hung_smi), "a hung nvidia-smi was left running on the host"


def test_a_stop_with_a_hung_nvidia_smi_stops_the_server_and_says_the_gpu_was_not_checked(hung_smi, gpu_host):
    victim = subprocess.Popen(["setsid", "sleep", "301"])
    try:
        time.sleep(0.2)
        stat = Path(f"/proc/{victim.pid}/stat").read_text().rsplit(")", 1)[1].split()
        sha = hashlib.sha256(Path(f"/proc/{victim.pid}/cmdline").read_bytes()).hexdigest()
        rec = process.ServerRecord(
            pid=victim.pid, pgid=victim.pid, start_ticks=int(stat[19]), cmdline=["sleep", "301"], profile="p",
            port=gpu_host.port, log_path="/nonexistent.log", run_id="r", started_at=0.0, cmdline_sha256=sha,
            boot_id=Path("/proc/sys/kernel/random/boot_id").read_text().strip())
        process.write_record(Context(), gpu_host.workdir, rec)
        t0 = time.monotonic()
        out = ops.stop(Context(), gpu_host, sys.executable, term_s=2, gpu_release_s=60)
        took = time.monotonic() - t0
        res = out.ours
        assert res.found == "running" and res.gpu_unchecked
        assert "GPU memory not checked: nvidia-smi did not answer within 1 s" in res.describe()
        assert victim.wait(timeout=5) is not None
        assert took < 15, f"stop took {took:.1f} s (bound 1 s per nvidia-smi call)"
        assert _no_hung_smi_left(hung_smi)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
