"""The sim's ``SGLANG_SIM_STARTUP_SCALE`` and its forked children, in process.

The startup milestones sleep ``seconds x startup scale`` and nothing else does; unset, the startup scale is the
time scale. The scheduler and detokenizer children are forks of the server, titled as SGLang's, that die with
the SIGKILL sent to them and are reaped by ``poll()``.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from mtp_remote.sim import children, gpu
from mtp_remote.sim.args import parse_server_args
from mtp_remote.sim.faults import parse_faults
from mtp_remote.sim.logfmt import SimLog
from mtp_remote.sim.memory import plan_memory
from mtp_remote.sim.server import SimServer

FLAGS = ["--model-path", "/models/Qwen3.6-27B", "--tp-size", "2", "--speculative-algorithm", "NEXTN",
         "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]


def _server(monkeypatch, tmp_path, scale: float, startup_scale: float | None) -> SimServer:
    monkeypatch.setenv("SGLANG_SIM_STATE_DIR", str(tmp_path / "state"))
    args, _ = parse_server_args(FLAGS)
    gpus = gpu.load_gpus()
    return SimServer(args, parse_faults(""), scale, SimLog(args.tp_size), plan_memory(args, gpus[0].total_mib,
                                                                                      parse_faults("")),
                     gpus, startup_scale)


@pytest.mark.parametrize("scale,startup_scale,expected", [(0.5, 0.002, 0.002), (0.5, None, 0.5)])
def test_only_the_startup_milestones_follow_the_startup_scale(monkeypatch, tmp_path, capsys, scale, startup_scale,
                                                              expected):
    srv = _server(monkeypatch, tmp_path, scale, startup_scale)
    slept: list[float] = []
    monkeypatch.setattr("mtp_remote.sim.server.time.sleep", slept.append)
    srv.load()
    # init 1.0 + 0.92, weights 41.6 (27B on TP 2), pool 0.3, graphs 16.62 (12 batch sizes), the draft: 1.12 + 2.4
    assert sum(slept) == pytest.approx(63.96 * expected, rel=1e-3), slept
    assert "max_total_num_tokens=" in capsys.readouterr().out
    slept.clear()
    srv.pause(2.0)  # everything after the startup keeps the time scale
    assert slept == [pytest.approx(2.0 * scale)]


def test_a_forked_child_is_titled_dies_on_sigkill_and_is_reaped(tmp_path):
    child = children.spawn("sglang::scheduler_TP0")
    try:
        deadline = time.monotonic() + 10
        cmdline = ""
        while time.monotonic() < deadline and "sglang::scheduler_TP0" not in cmdline:
            cmdline = (open(f"/proc/{child.pid}/cmdline", "rb").read().replace(b"\0", b" ").decode())
            time.sleep(0.02)
        assert cmdline.startswith("sglang::scheduler_TP0"), cmdline
        assert os.getpgid(child.pid) == os.getpgid(0)  # in the server's process group, as SGLang's
        assert child.poll() is None
    finally:
        child.kill()
    deadline = time.monotonic() + 10
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert child.returncode == -signal.SIGKILL
    assert not os.path.exists(f"/proc/{child.pid}")  # reaped: no zombie left
