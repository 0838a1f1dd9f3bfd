"""The bar on a real scheduler: a diagnose of the sim with the field fault served as SLURM jobs ends
spec-corrupts-output with every server a job and none of ours left in the queue; the nightly over a group of SLURM
hosts runs as one job array and writes a fleet summary naming the hosts that disagree and the node each ran on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def _sim_host(cluster, workdir: Path, faults: str | None) -> dict:
    env = {"SGLANG_SIM_TIME_SCALE": "0.02"}
    if faults:
        env["SGLANG_SIM_FAULTS"] = faults
    return {"transport": "local", "engine": "sim", "workdir": str(workdir), "port": free_port(),
            "python": sys.executable, "model_path": "/models/Qwen3.6-27B", "env": env,
            "server": {"kind": "slurm", "conf": str(cluster.conf), "gres": "gpu:2", "time_limit": "20:00",
                       "pending_s": 600, "runs_dir": str(workdir.parent / "shared-runs")}}


def _inventory(tmp_path: Path, cluster) -> Path:
    inv = {"default_host": "leaky", "hosts": {
        "leaky": _sim_host(cluster, tmp_path / "w-leaky", "state_leak"),
        "healthy": _sim_host(cluster, tmp_path / "w-healthy", None)},
        "groups": {"nodes": ["leaky", "healthy"]}}
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return path


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MTP_REMOTE_PORT_OFFSET"}
    return subprocess.run([sys.executable, "-m", "mtp_remote.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def _ours_in_queue(cluster) -> list[str]:
    return [ln for ln in cluster.run("squeue", "-h", "-o", "%i|%j").stdout.split() if "|mtp-remote" in ln]


def test_diagnose_of_the_leaking_sim_as_slurm_jobs_finds_the_corruption_and_leaves_no_job(slurm_cluster, tmp_path):
    inv = _inventory(tmp_path, slurm_cluster)
    r = _cli("diagnose", "-i", str(inv), "-H", "leaky", "-p", str(ROOT / "playbooks" / "diagnose-mtp.yaml"),
             "--runs-dir", str(tmp_path / "runs"), "--json", cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert "spec-corrupts-output" in [v["kind"] for v in doc["verdicts"]]
    run_dir = tmp_path / "runs" / doc["run_id"]
    logs = sorted((tmp_path / "w-leaky" / "logs" / doc["run_id"]).glob("*.log"))
    assert logs, "every server's output is the job's output file in the workdir"
    jobs = [ln.split("|") for ln in slurm_cluster.run("squeue", "-h", "-t", "all", "-o", "%i|%j|%T").stdout.split()
            if "|mtp-remote.leaky." in ln]
    # every server was a job of its own (the controller keeps ended jobs for MinJobAge): one per profile's log
    assert sorted(name.rsplit(".", 1)[1] for _, name, _ in jobs) == sorted(p.stem for p in logs)
    assert all(state in ("COMPLETED", "FAILED", "CANCELLED") for _, _, state in jobs)
    assert _ours_in_queue(slurm_cluster) == []
    assert (run_dir / "summary.json").exists()


def test_nightly_over_slurm_hosts_runs_as_one_job_array_and_writes_a_fleet_summary(slurm_cluster, tmp_path):
    inv = _inventory(tmp_path, slurm_cluster)
    r = _cli("nightly", "-i", str(inv), "-H", "nodes", "-p", str(ROOT / "playbooks" / "nightly.yaml"),
             "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    fleets = sorted((tmp_path / "runs").glob("fleet-*"))
    assert len(fleets) == 1
    doc = json.loads((fleets[0] / "summary.json").read_text())
    assert doc["slurm"]["array_job"] > 0
    assert doc["slurm"]["never_ran"] == []
    assert doc["slurm"]["nodes"] == {"leaky": slurm_cluster.node, "healthy": slurm_cluster.node}
    assert doc["slurm"]["tasks"] == {"leaky": f"{doc['slurm']['array_job']}_0",
                                     "healthy": f"{doc['slurm']['array_job']}_1"}
    assert doc["corrupt_hosts"] == ["leaky"]
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert hosts["healthy"]["corrupts"] == []
    assert (tmp_path / "runs" / hosts["leaky"]["run_id"] / "summary.json").exists()
    assert (fleets[0] / "junit.xml").exists() and (fleets[0] / "metrics.prom").exists()
    # named with what differs, read on each node by its task
    assert doc["disagreement_lines"] == [
        "mtp: healthy on healthy only (spec-corrupts-output on leaky); differs: env SGLANG_SIM_FAULTS unset vs state_leak"]
    assert doc["slurm"]["drain_hook"] == []  # off by default
    assert _ours_in_queue(slurm_cluster) == []
