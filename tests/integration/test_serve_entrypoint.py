"""``sglang serve`` as a launch form (``entrypoint: serve``), against the simulated engine as a real process.

The sim's ``python -m mtp_remote.sim serve`` stands in for ``sglang serve`` (the console script that replaces
``python -m sglang.launch_server``): launched, recorded with the words ``/proc`` shows, ours for ``status``
(not foreign), stopped.
"""

from __future__ import annotations

import sys

import pytest
from invoke import Context

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.serving.process import ProcessServer
from mtp_remote.host import ops
from mtp_remote.remote import facts
from mtp_remote.remote.commands import server_argv, server_env
from tests.conftest import free_port
from tests.support import serving

pytestmark = pytest.mark.sim

PLAYBOOK = Playbook.model_validate(dict(
    name="t", base_flags="--tp-size 2 --max-running-requests 8", profiles={"baseline": {"flags": ""}},
    prompts=[{"id": "p", "text": "What is 2+2?"}], temperatures=[0.0], samples=1, max_tokens=16))


def test_a_server_started_with_sglang_serve_is_recorded_ours_and_stopped(tmp_path):
    host = HostConfig(name="sim-serve", transport="local", engine="sim", entrypoint="serve",
                      workdir=str(tmp_path / "wd"), port=free_port(), python=sys.executable,
                      env={"SGLANG_SIM_TIME_SCALE": "0.01"})
    lc = ProcessServer(Context(), host, python=sys.executable, workdir=host.workdir, run_id="r1")
    lc.prepare()
    try:
        rec = lc.launch("baseline", server_argv(host, PLAYBOOK, "baseline"),
                        server_env(host, PLAYBOOK, "baseline", lc.workdir))
        assert rec.cmdline[1:4] == ["-m", "mtp_remote.sim", "serve"]
        info = facts.get_process_info(lc.c, rec.pid)
        assert info.cmdline[1:4] == ("-m", "mtp_remote.sim", "serve"), "the record is what /proc shows"
        assert lc.wait_ready(rec, timeout_s=60, health=serving.health_check(f"http://127.0.0.1:{host.port}")).ok
        st = ops.status(lc.c, host, sys.executable)
        assert st.server_state == "running"
        assert rec.pid not in {f.pid for f in st.foreign}, "our `serve` server is not foreign"
    finally:
        res = lc.stop(term_s=10, gpu_release_s=10)
    assert res.found == "running" and res.signals == ["TERM"]
