"""The test cluster itself: one idle node with two GPUs, daemons on 127.0.0.1 only, GPUs handed to steps, and
stopping leaves none of its daemons."""

from __future__ import annotations

import re
import subprocess
import time

from tests.support import slurm


def test_the_node_is_idle_with_two_gpus(slurm_cluster):
    out = slurm_cluster.run("scontrol", "show", "node", slurm_cluster.node, "-o").stdout
    assert "State=IDLE" in out
    assert "Gres=gpu:2" in out
    assert "NodeAddr=127.0.0.1" in out


def test_the_daemons_listen_on_loopback_only(slurm_cluster):
    ss = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    for port in (slurm_cluster.ctld_port, slurm_cluster.slurmd_port):
        local = [line.split()[3] for line in ss.splitlines() if re.search(rf":{port}\b", line.split()[3])]
        assert local == [f"127.0.0.1:{port}"]


def test_a_step_gets_the_gpus_it_asked_for(slurm_cluster):
    t0 = time.monotonic()
    out = slurm_cluster.run("srun", "--gres=gpu:2", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES $SLURMD_NODENAME").stdout
    assert out.split() == ["0,1", slurm_cluster.node]
    assert time.monotonic() - t0 < 20


def test_stopping_leaves_no_daemon_of_the_cluster(tmp_path):
    cluster = slurm.start(tmp_path / "c")
    pids = [r["pid"] for r in cluster.daemons.values()]
    job = cluster.run("sbatch", "--parsable", "--wrap", "exec srun sleep 300").stdout.strip()
    assert job.isdigit()
    said = slurm.stop(tmp_path / "c")
    assert "cancelled 1 job(s)" in said
    alive = [p for p in pids if slurm._start_time(p) is not None and slurm._cmdline(p)]
    assert alive == []
    assert slurm.stepds(tmp_path / "c") == []
