"""The server lifecycle against the simulated engine as a real process (local transport).

Launch → wait ready → stop with GPU memory release; a leftover server from an earlier launch is stopped and
its log kept; processes we did not start are never signalled, whatever their command line says.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from invoke import Context

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.serving.process import ProcessServer
from mtp_remote.remote import facts, process
from tests.conftest import free_port
from tests.support import serving

pytestmark = pytest.mark.sim

PLAYBOOK = Playbook.model_validate(dict(
    name="t", base_flags="--tp-size 2 --max-running-requests 8 --reasoning-parser qwen3",
    profiles={"baseline": {"flags": ""},
              "mtp": {"flags": "--speculative-algorithm NEXTN --speculative-num-steps 3 "
                               "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4"}},
    prompts=[{"id": "two-plus-two", "text": "What is 2+2?"}], temperatures=[0.7], samples=1, max_tokens=64))


def sim_host(tmp_path: Path, **env) -> HostConfig:
    return HostConfig(name="sim-test", transport="local", engine="sim", workdir=str(tmp_path / "wd"),
                      port=free_port(), python=sys.executable,
                      env={"SGLANG_SIM_TIME_SCALE": "0.01", **env})


_STARTED: list[ProcessServer] = []


def lifecycle(host: HostConfig, run_id: str = "r1") -> ProcessServer:
    lc = ProcessServer(Context(), host, python=sys.executable, workdir=host.workdir, run_id=run_id)
    lc.prepare()
    _STARTED.append(lc)
    return lc


@pytest.fixture(autouse=True)
def _stop_what_tests_started():
    """A failing test must not leave a sim server running: stop every lifecycle's server afterwards."""
    yield
    while _STARTED:
        _STARTED.pop().stop(term_s=10, gpu_release_s=10)


def launch_ready(lc: ProcessServer, profile: str = "baseline"):
    """``profile`` of this module's playbook launched and ready: (record, outcome)."""
    return serving.launch_ready(lc, PLAYBOOK, profile)


def alive(pid: int) -> bool:
    info = facts.get_process_info(Context(), pid)
    return info is not None and info.alive


def test_launch_waits_for_the_ready_line_and_stop_releases_the_gpu_memory(tmp_path):
    lc = lifecycle(sim_host(tmp_path))
    rec, outcome = launch_ready(lc)
    assert [m["name"] for m in outcome.milestones][-1] == "ready"
    assert {"weights_loaded", "kv_cache_allocated", "http_up", "ready"} <= {m["name"] for m in outcome.milestones}
    assert rec.pgid == rec.pid  # setsid made it a process-group leader
    assert rec.cmdline[1:3] == ["-m", "mtp_remote.sim.launch_server"], "recorded after exec, not env/setsid's line"
    members = facts.group_members(facts.get_ps(lc.c), rec.pgid)
    held = {a.pid for a in facts.get_gpu_apps(lc.c, lc.smi)}
    assert held & {m.pid for m in members}, "the sim's GPU stand-in shows our processes holding memory"

    res = lc.stop(term_s=20, gpu_release_s=20)
    assert res.found == "running" and res.signals == ["TERM"]
    assert res.gpu_mib_held > 0
    assert not alive(rec.pid)
    assert not {a.pid for a in facts.get_gpu_apps(lc.c, lc.smi)} & {m.pid for m in members}
    assert process.read_record(lc.c, lc.workdir) is None
    assert Path(rec.log_path).exists(), "the log is kept"


def test_a_process_with_sglang_in_its_command_line_that_we_did_not_start_survives_stop(tmp_path):
    foreign = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "-m", "sglang.launch_server",
                                "--port", "30000"], start_new_session=True)
    try:
        lc = lifecycle(sim_host(tmp_path))
        rec, _ = launch_ready(lc)
        res = lc.stop(term_s=20, gpu_release_s=20)
        assert res.found == "running" and not alive(rec.pid)
        assert foreign.poll() is None, "a process we did not start was signalled"
    finally:
        foreign.kill()
        foreign.wait()


def test_a_reused_pid_in_the_record_is_not_signalled(tmp_path):
    foreign = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "mtp_remote.sim.launch_server"],
                               start_new_session=True)
    try:
        host = sim_host(tmp_path)
        lc = lifecycle(host)
        info = facts.get_process_info(lc.c, foreign.pid)
        # a record that names the foreign PID, as if our server had died and the PID been reused
        rec = process.ServerRecord(pid=foreign.pid, pgid=foreign.pid, start_ticks=info.start_ticks - 1,
                                   cmdline=list(info.cmdline), profile="baseline", port=host.port,
                                   log_path=f"{lc.workdir}/logs/old/baseline.log", run_id="old", started_at=0.0)
        process.write_record(lc.c, lc.workdir, rec)
        res = lc.stop(term_s=5, gpu_release_s=5)
        assert res.found == "not-ours" and res.signals == []
        time.sleep(0.2)
        assert foreign.poll() is None
        assert process.read_record(lc.c, lc.workdir) is None, "the stale record is dropped"
    finally:
        foreign.kill()
        foreign.wait()


def test_a_server_left_by_an_earlier_launch_is_stopped_and_its_log_archived(tmp_path):
    from mtp_remote.experiment import diagnose as api

    host = sim_host(tmp_path)
    old = lifecycle(host, run_id="earlier-run")
    old_rec, _ = launch_ready(old)  # left running, as a crashed driver would leave it

    inv = tmp_path / "inventory.yaml"
    inv.write_text(json.dumps({"default_host": "sim-test", "hosts": {"sim-test": host.model_dump(exclude={"name"})}}))
    pb = tmp_path / "pb.yaml"
    pb.write_text(json.dumps(PLAYBOOK.model_dump()))
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs", profiles=["baseline"])

    assert not alive(old_rec.pid)
    assert Path(old_rec.log_path).exists(), "the earlier log stays where it was"
    copy = res.run_dir / "logs" / f"previous-{old_rec.pid}.log"
    assert "The server is fired up and ready to roll!" in copy.read_text()
    assert (res.run_dir / "logs" / "baseline.log").exists()
    assert res.summary["n_samples"] == 1


def test_a_scheduler_that_left_the_process_group_is_still_stopped(tmp_path):
    lc = lifecycle(sim_host(tmp_path, SGLANG_SIM_FAULTS="stale_orphan"))
    rec, _ = launch_ready(lc)
    rec = process.read_record(lc.c, lc.workdir)
    assert len(rec.children) >= 2, "the scheduler children were recorded at readiness"
    res = lc.stop(term_s=20, gpu_release_s=20)
    assert "KILL(orphans)" in res.signals
    kids = {pid for pid, _ in rec.children}
    assert not [p for p in facts.get_ps(lc.c) if p.pid in kids and not p.args.startswith("[")]
    assert not {a.pid for a in facts.get_gpu_apps(lc.c, lc.smi)} & kids, "their GPU memory was released"
