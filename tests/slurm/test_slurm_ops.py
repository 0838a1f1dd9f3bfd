"""The operator's host commands on a SLURM host: launch leaves a job running, status names it, logs reads its
output file, stop ends it by scancel and leaves none of ours in the queue."""

from __future__ import annotations

import sys

from invoke import Context

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import load_playbook
from mtp_remote.host import ops
from tests.conftest import ROOT
from tests.support.ports import free_port


def test_launch_status_logs_and_stop_act_on_the_hosts_job(slurm_cluster, tmp_path):
    host = HostConfig(name="sim-slurm-ops", transport="local", engine="sim", workdir=str(tmp_path / "w"),
                      port=free_port(), env={"SGLANG_SIM_TIME_SCALE": "0.02"},
                      server={"kind": "slurm", "conf": str(slurm_cluster.conf), "gres": "gpu:2"})
    c, py = Context(), sys.executable
    playbook = load_playbook(ROOT / "playbooks" / "diagnose-mtp.yaml")
    outcome = ops.launch(c, host, playbook, "baseline", py, run_id="20261203-073500-cccc")
    assert outcome.ok, outcome.describe()
    st = ops.status(c, host, py)
    assert st.server_state == "running" and st.server["node"] == slurm_cluster.node
    log, pid = ops.current_log(c, host)
    assert log == st.server["log_path"] and pid is None
    out = ops.stop(c, host, py)
    assert out.ours.found == "running" and "the stop we sent" in out.ours_text
    assert out.foreign == [] and out.targets == []  # the login node's processes are not the job's
    assert ops.status(c, host, py).server_state == "none"
    assert [n for n in slurm_cluster.run("squeue", "-h", "-o", "%j").stdout.split() if n.startswith("mtp-remote.")] == []
