"""The SLURM kind on a real scheduler (the one-node test cluster): a server job launched, followed to ready and
stopped with its drain; a job the scheduler refuses or keeps pending is a launch failure with the scheduler's
words; a job that is not ours is never signalled."""

from __future__ import annotations

import sys
import time

import pytest
from invoke import Context

from mtp_remote.config.inventory import HostConfig
from mtp_remote.errors import LaunchError
from mtp_remote.remote import slurm as sl
from mtp_remote.serving.slurm import SlurmServer
from tests.support.ports import free_port


def _host(cluster, tmp_path, **server) -> HostConfig:
    return HostConfig(name="sim-slurm-t", transport="local", engine="sim", workdir=str(tmp_path / "w"),
                      port=free_port(), env={"SGLANG_SIM_TIME_SCALE": "0.02"},
                      server={"kind": "slurm", "conf": str(cluster.conf), "gres": "gpu:2", "time_limit": "10:00",
                              **server})


def _argv(host: HostConfig) -> list[str]:
    return ["--model-path", host.model_path, "--tp-size", "2", "--mem-fraction-static", "0.88",
            "--host", "127.0.0.1", "--port", str(host.port)]


def _server(host: HostConfig, run_id: str = "20261203-070000-aaaa") -> SlurmServer:
    kind = SlurmServer(Context(), host, python=sys.executable, workdir=host.workdir, run_id=run_id)
    kind.prepare()
    return kind


def _ours_in_queue(cluster) -> list[str]:
    out = cluster.run("squeue", "-h", "-o", "%i|%j").stdout.split()
    return [line for line in out if "|mtp-remote." in line]


def test_a_server_job_launches_is_followed_to_ready_and_stops_with_its_drain(slurm_cluster, tmp_path):
    host = _host(slurm_cluster, tmp_path)
    kind = _server(host)
    env = {"SGLANG_SIM_STATE_DIR": f"{kind.workdir}/sim-gpus", "SGLANG_SIM_TIME_SCALE": "0.02", "HF_TOKEN": "t0ps3cret"}
    rec = kind.launch("baseline", _argv(host), env)
    assert rec.job_id > 0 and rec.name == "mtp-remote.sim-slurm-t.baseline" and rec.user == "root"
    info = sl.get_job_info(kind.c, rec.job_id, str(slurm_cluster.conf))
    assert info.comment == "mtp-remote:run=20261203-070000-aaaa:profile=baseline"
    outcome = kind.wait_ready(rec, timeout_s=60)
    assert outcome.kind == "ready", outcome.describe()
    assert rec.node == slurm_cluster.node
    script = slurm_cluster.run("scontrol", "write", "batch_script", str(rec.job_id), "-").stdout
    assert "t0ps3cret" not in script  # the environment travelled in a 0600 file, never in the script
    res = kind.stop(term_s=30, drain_s=20, gpu_release_s=30)
    assert res.found == "running"
    assert "the stop we sent" in res.end and not res.killed
    assert _ours_in_queue(slurm_cluster) == []
    log = kind.read_log(rec.log_path)
    assert "SIGTERM received" in log  # the step's SIGTERM reached the server itself: its drain ran
    assert kind.stop().found == "none"  # the record went with the job


def test_a_job_the_scheduler_cannot_place_fails_the_launch_with_its_message(slurm_cluster, tmp_path):
    host = _host(slurm_cluster, tmp_path, gres="gpu:3")
    kind = _server(host)
    with pytest.raises(LaunchError) as e:
        kind.launch("baseline", _argv(host), {})
    assert e.value.cause == "slurm_refused"
    assert "Requested node configuration is not available" in str(e.value)


def test_a_job_pending_beyond_the_bound_fails_with_the_schedulers_reason(slurm_cluster, tmp_path):
    blocker = slurm_cluster.run("sbatch", "--parsable", "--gres=gpu:2", "--output=/dev/null", "--job-name=train",
                                "--wrap", "exec sleep 120").stdout.strip()
    try:
        host = _host(slurm_cluster, tmp_path, pending_s=2)
        kind = _server(host)
        rec = kind.launch("baseline", _argv(host), {})
        t0 = time.monotonic()
        outcome = kind.wait_ready(rec, timeout_s=60)
        assert outcome.kind == "crashed" and outcome.cause == "slurm_pending"
        assert f"job {rec.job_id} pending for" in outcome.hint and "Resources" in outcome.hint
        assert time.monotonic() - t0 < 15
        res = kind.stop(term_s=10, gpu_release_s=30)
        assert res.found == "running"
        assert _ours_in_queue(slurm_cluster) == []
    finally:
        slurm_cluster.run("scancel", blocker)


def test_stop_never_signals_a_job_that_is_not_ours(slurm_cluster, tmp_path):
    other = slurm_cluster.run("sbatch", "--parsable", "--output=/dev/null", "--job-name=train-llama",
                              "--wrap", "exec sleep 120").stdout.strip()
    try:
        host = _host(slurm_cluster, tmp_path)
        kind = _server(host)
        rec = sl.SlurmJob(job_id=int(other), name="mtp-remote.sim-slurm-t.baseline", comment="c", user="root",
                          profile="baseline", run_id=kind.run_id, port=host.port, log_path="/dev/null",
                          env_path=f"{kind.workdir}/.env")
        assert sl.put_file(kind.c, kind.record_path, rec.to_json())
        res = kind.stop(term_s=5)
        assert res.found == "not-ours" and "not a job of ours" in res.describe()
        q = sl.get_queue_state(kind.c, int(other), str(slurm_cluster.conf))
        assert q is not None and q.state in ("RUNNING", "PENDING")
    finally:
        slurm_cluster.run("scancel", other)
