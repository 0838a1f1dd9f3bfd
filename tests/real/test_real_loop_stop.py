"""Real SGLang 0.5.9 aborts a request the tool stops, and frees its slot: the abort path of the loop stop.

``make test-real`` only (``MTP_REMOTE_REAL_FULL=1``): ``make test`` has the abort and the closed stream inside
``test_real_lifecycle.py``'s one real start (its stop then has a request in flight, this one's none).

Measured on this engine (CPU, tiny Qwen3): ``/abort_request`` ends a running request at the scheduler's next step
(``/flush_cache``, which the scheduler refuses while any request is pending, answers 200 at once); a stream only
closed is aborted by SGLang's own abort task 2 s later; the stop that follows drains with 0 requests left and
needs no SIGKILL. ``sglang:num_running_reqs`` on ``/metrics`` is no witness here: SGLang updates that gauge with
its batch statistics, so after an abort it keeps the last value until the next batch.
"""

from __future__ import annotations

import os
import re
import time

import pytest

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.remote import connect as transport
from mtp_remote.remote.commands import server_argv, server_env
from mtp_remote.serving.process import ProcessServer
from tests.conftest import free_port
from tests.real.conftest import wait_ready_with_health
from tests.support.real_hosts import abort_then_close

pytestmark = [pytest.mark.real, pytest.mark.timeout(2400),
              pytest.mark.skipif(os.environ.get("MTP_REMOTE_REAL_FULL") != "1", reason="make test-real runs it")]

PLAYBOOK = Playbook.model_validate(dict(
    name="real-loop-stop", base_flags="--device cpu --disable-overlap-schedule --max-total-tokens 8192 "
                                      "--attention-backend triton --triton-attention-num-kv-splits 1 "
                                      "--disable-cuda-graph",
    profiles={"baseline": {"flags": ""}}, prompts=[{"id": "p", "text": "What is 2+2?"}], api="generate"))
PROMPT = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n"


def test_real_sglang_aborts_a_stopped_stream_frees_its_slot_and_the_stop_drains_nothing(real_engine, tmp_path):
    host = HostConfig.model_validate(dict(
        name="real-stop", transport="local", engine="sglang", python=real_engine.python,
        model_path=real_engine.model_path, workdir=str(tmp_path / "wd"), port=free_port(),
        env={"SGLANG_USE_CPU_ENGINE": "1", "TRITON_INTERPRET": "1"}))
    c = transport.connect(host)
    lc = ProcessServer(c, host, python=host.python, workdir=host.workdir, run_id="real-stop")
    url = f"http://127.0.0.1:{host.port}"
    try:
        lc.prepare()
        rec = lc.launch("baseline", server_argv(host, PLAYBOOK, "baseline"),
                        server_env(host, PLAYBOOK, "baseline", lc.workdir))
        wait_ready_with_health(lc, rec, url)

        freed, closed = abort_then_close(url, PROMPT)
        # the aborted request's slot is free sooner than a closed stream's, which SGLang's abort task ends 2 s
        # later (compared, not bounded: the scheduler's steps slow down on a loaded machine, for both alike)
        assert freed < closed and closed > 1.0, (freed, closed)
        print(f"abort: slot free after {freed:.3f} s; closed stream: after {closed:.2f} s")

        t0 = time.monotonic()
        res = lc.stop(term_s=60, drain_s=8, gpu_release_s=20)
        took = time.monotonic() - t0
        log = lc.read_log(rec.log_path)
        assert "with TERM" in res.describe(), res.describe()  # the drain held nothing: no SIGKILL
        assert re.findall(r"Remaining number of requests (\d+)", log) == ["0"]
        assert '"POST /abort_request HTTP/1.1" 200' in log
        print(f"stop: {took:.2f} s, {res.describe()}")
    finally:
        lc.stop(term_s=30, drain_s=5, gpu_release_s=20, unlock=True)
        transport.close(c)
