"""The SLURM kind behind SSH to a login node (a real sshd on 127.0.0.1, the test cluster behind it): the job is
submitted, followed and stopped over the connection, and the driver reaches the server through the tunnel."""

from __future__ import annotations

import sys
import urllib.request

from mtp_remote.config.inventory import HostConfig
from mtp_remote.remote import connect as transport
from mtp_remote.serving.slurm import SlurmServer
from tests.support.ports import free_port


def test_a_server_job_over_ssh_is_reached_through_the_tunnel_and_stopped(slurm_cluster, sshd, tmp_path):
    host = HostConfig(name="login", **sshd.host_config(workdir=str(tmp_path / "w"), engine="sim", port=free_port(),
                                                       server={"kind": "slurm", "conf": str(slurm_cluster.conf),
                                                               "gres": "gpu:2", "time_limit": "10:00"}))
    c = transport.connect(host)
    try:
        kind = SlurmServer(c, host, python=sys.executable, workdir=host.workdir, run_id="20261203-073000-bbbb")
        kind.prepare()
        argv = ["--model-path", host.model_path, "--tp-size", "2", "--host", "127.0.0.1", "--port", str(host.port)]
        rec = kind.launch("baseline", argv, {"SGLANG_SIM_STATE_DIR": f"{kind.workdir}/sim-gpus",
                                             "SGLANG_SIM_TIME_SCALE": "0.02"})
        assert kind.wait_ready(rec, timeout_s=60).kind == "ready"
        with kind.reach() as tun:
            assert tun.url != f"http://127.0.0.1:{host.port}"  # a local forward through the login node
            with urllib.request.urlopen(f"{tun.url}/health", timeout=10) as r:
                assert r.status == 200
            assert tun.channels_opened >= 1
        res = kind.stop(term_s=30, drain_s=20, gpu_release_s=30)
        assert res.found == "running" and "the stop we sent" in res.end
        left = slurm_cluster.run("squeue", "-h", "-o", "%j").stdout.split()
        assert [n for n in left if n.startswith("mtp-remote.")] == []
    finally:
        transport.close(c)
