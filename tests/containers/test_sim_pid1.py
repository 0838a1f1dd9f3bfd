"""The simulated engine as a container's PID 1 behaves like real SGLang on ``docker stop``.

Real SGLang 0.5.9 exits by itself on the SIGTERM of ``docker stop`` (7.6 s, exit 0): after its drain it SIGKILLs
its process tree and itself, and — as PID 1, where the kernel drops a SIGKILL sent from inside the namespace —
exits 0. The sim used to wait for the runtime's SIGKILL (10.2 s, exit 137).
"""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from tests.support import containers
from tests.support.ports import free_port

pytestmark = pytest.mark.sim


def test_stop_of_a_container_whose_pid_1_is_the_sim_ends_with_exit_0_before_the_kill(runtime, image,
                                                                                      container_name):
    port = free_port()
    subprocess.run([runtime, "run", "-d", "--name", container_name, "--network", "host",
                    "--label", f"{containers.LABEL}=test", "-e", "SGLANG_SIM_TIME_SCALE=0.01", *containers.mounts(),
                    image, sys.executable, "-m", "mtp_remote.sim.launch_server", "--model-path",
                    "/models/Qwen3.6-27B", "--tp-size", "2", "--host", "127.0.0.1", "--port", str(port)],
                   check=True, capture_output=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    else:
        pytest.fail("the sim in the container never answered /health")
    t0 = time.monotonic()
    subprocess.run([runtime, "stop", "-t", "10", container_name], check=True, capture_output=True)
    took = time.monotonic() - t0
    code = subprocess.run([runtime, "inspect", "--format", "{{.State.ExitCode}}", container_name],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert code == "0", "the sim exited by itself after its drain, as SGLang does, not by the runtime's SIGKILL"
    assert took < 8.0, f"stop took {took:.1f} s: it waited for the kill at 10 s"
