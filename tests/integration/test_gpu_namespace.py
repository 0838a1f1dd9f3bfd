"""GPU release across PID namespaces, against the simulated engine as a real process (local transport).

Inside a container (Docker, LXC, a pod) ``nvidia-smi`` lists the driver's PIDs — the host's — or none, so the
stop's PID match finds none of ours and says "released" while the memory is still held: the field's
leftover-memory/OOM-at-relaunch trap. The sim reproduces it: ``pid_namespace`` (its nvidia-smi lists the
server's processes under numbers no process here has) with ``slow_release`` (the memory lingers after exit).
The stop now also waits until the server's GPUs are back to their memory level before the launch
(``server.gpu``, written by launch.sh), and says how long it waited; ``status`` names the memory held by
processes this host cannot see.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from invoke import Context

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.serving.process import ProcessServer
from mtp_remote.host import ops
from mtp_remote.remote import facts, process
from mtp_remote.remote.foreign import describe_unseen
from tests.conftest import free_port
from tests.support import serving

pytestmark = pytest.mark.sim

PLAYBOOK = Playbook.model_validate(dict(
    name="t", base_flags="--tp-size 2 --max-running-requests 8", profiles={"baseline": {"flags": ""}},
    prompts=[{"id": "p", "text": "What is 2+2?"}], temperatures=[0.0], samples=1, max_tokens=16))
RELEASE_S = 3.0  # slow_release: the memory stays held this long after the processes exit


def _host(tmp_path: Path) -> HostConfig:
    return HostConfig(name="sim-ns", transport="local", engine="sim", workdir=str(tmp_path / "wd"),
                      port=free_port(), python=sys.executable,
                      env={"SGLANG_SIM_TIME_SCALE": "0.01",
                           "SGLANG_SIM_FAULTS": f"pid_namespace,slow_release={RELEASE_S}"})


@pytest.fixture
def lc(tmp_path):
    host = _host(tmp_path)
    lc = ProcessServer(Context(), host, python=sys.executable, workdir=host.workdir, run_id="r1")
    lc.prepare()
    yield lc
    lc.stop(term_s=10, gpu_release_s=10)


def _launch_ready(lc: ProcessServer) -> process.ServerRecord:
    return serving.launch_ready(lc, PLAYBOOK)[0]


def _used_mib(lc: ProcessServer) -> int:
    return sum(g.memory_used_mib for g in facts.get_gpus(lc.c, lc.smi))


def test_in_another_pid_namespace_the_pid_rule_says_released_at_once_and_the_level_rule_waits(lc):
    rec = _launch_ready(lc)
    members = {p.pid for p in facts.group_members(facts.get_ps(lc.c), rec.pgid)}
    listed = {a.pid for a in facts.get_gpu_apps(lc.c, lc.smi)}
    assert listed and not listed & members, "nvidia-smi lists PIDs of another namespace, none of ours"
    assert _used_mib(lc) > 10_000

    # the old rule (a record without the GPUs' level, as launch wrote before): "released" at once
    (Path(lc.workdir) / process.GPU_LEVEL).unlink()
    old = lc.stop(term_s=20, gpu_release_s=20)
    assert old.found == "running" and old.gpu_release_by == "pid"
    assert old.gpu_release_s < RELEASE_S / 2 and old.gpu_mib_held == 0  # one look at nvidia-smi
    assert _used_mib(lc) > 10_000, "said released while the GPUs still hold the server's memory"

    # the new rule: wait until the GPUs are back to their level before the launch, and say how long
    deadline = time.monotonic() + RELEASE_S + 5
    while _used_mib(lc) > 0 and time.monotonic() < deadline:  # the first server's memory goes before the
        time.sleep(0.1)  # second launch takes the GPUs' level
    rec = _launch_ready(lc)
    level = (Path(lc.workdir) / process.GPU_LEVEL).read_text().split()
    assert level == ["0", "0", "1", "0"], "both GPUs' level before the launch: nothing held"
    new = lc.stop(term_s=20, gpu_release_s=20)
    assert new.found == "running" and new.gpu_release_by == "level"
    assert new.gpu_level_mib > 10_000
    assert RELEASE_S - 0.5 <= new.gpu_release_s <= RELEASE_S + 5.0
    assert _used_mib(lc) <= 256
    text = new.describe()
    assert f"released after {new.gpu_release_s:.1f} s (held by processes this host cannot see" in text, text
    assert process.read_record(lc.c, lc.workdir) is None


def test_status_names_the_memory_held_by_processes_this_host_cannot_see(lc):
    _launch_ready(lc)
    rep = ops.status(lc.c, lc.host, sys.executable)
    unseen = {u["index"]: u["mib"] for u in rep.gpu_unseen}
    assert set(unseen) == {0, 1} and all(m > 10_000 for m in unseen.values()), rep.gpu_unseen
    lines = describe_unseen(rep.gpu_unseen)
    assert lines[0] == f"{unseen[0]} MiB held on GPU 0 by processes this host cannot see"
