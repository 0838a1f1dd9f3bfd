"""Fixtures for the simulated engine's tests: start ``mtp_remote.sim.launch_server`` as a real process.

``sim`` is a factory: ``sim(argv, faults="...", wait=True)`` launches the server on a free 127.0.0.1 port
in its own process group (as the lifecycle code does, with ``setsid``), stdout+stderr to a log file, with a
private ``SGLANG_SIM_STATE_DIR`` and ``SGLANG_SIM_TIME_SCALE=0.01``; it waits for the ready line (or the
process exit) and returns a :class:`SimProc`. Every process group started is killed at teardown.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.ports import free_port

READY = "The server is fired up and ready to roll!"
FIELD_FLAGS = ["--model-path", "/models/Qwen3.6-27B", "--tp-size", "2", "--mem-fraction-static", "0.88",
               "--context-length", "32768", "--max-running-requests", "16", "--mamba-full-memory-ratio", "0.5",
               "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder"]
MTP_FLAGS = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", "4"]



@dataclass
class SimProc:
    """A running (or exited) sim server process."""

    proc: subprocess.Popen
    port: int
    log_path: Path
    env: dict

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def client(self, **kw) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, trust_env=False, **kw)

    def wait_line(self, text: str, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log:
                return True
            if self.proc.poll() is not None:
                return text in self.log
            time.sleep(0.01)
        return False

    def wait_exit(self, timeout: float = 20.0) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def nvidia_smi(self, *args: str) -> str:
        return subprocess.run([sys.executable, "-m", "mtp_remote.sim.nvidia_smi", *args], env=self.env,
                              capture_output=True, text=True, timeout=20, check=False).stdout


@pytest.fixture
def sim_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_SIM_")}
    env.update(SGLANG_SIM_STATE_DIR=str(tmp_path / "state"), SGLANG_SIM_TIME_SCALE="0.01")
    return env


@pytest.fixture
def sim(tmp_path, sim_env):
    started: list[SimProc] = []

    def start(argv: list[str], faults: str = "", wait: bool = True, port: int | None = None,
              extra_env: dict | None = None) -> SimProc:
        port = port or free_port()
        env = dict(sim_env, SGLANG_SIM_FAULTS=faults, **(extra_env or {}))
        log = tmp_path / f"sim-{port}-{len(started)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "mtp_remote.sim.launch_server", *argv,
                                     "--host", "127.0.0.1", "--port", str(port)],
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
        sp = SimProc(proc, port, log, env)
        started.append(sp)
        if wait:
            assert sp.wait_line(READY, 30), f"sim did not get ready:\n{sp.log[-3000:]}"
        return sp

    yield start
    for sp in started:
        for sig in (signal.SIGKILL,):
            try:
                os.killpg(sp.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        sp.wait_exit(5)
