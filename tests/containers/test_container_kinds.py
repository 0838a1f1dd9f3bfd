"""The two container kinds end to end, with a real runtime and the simulated engine (the field fault on).

- ``exec``: the sim inside a long-lived container (the ``docker run -d ... sleep`` + exec pattern), every host
  step run through ``podman|docker exec -i NAME sh -c ...``; its nvidia-smi lists PIDs of another namespace
  (``pid_namespace``) and the memory lingers (``slow_release``): each stop waits for the GPUs' level and says how
  long. In a container without ``awk`` (no ``/etc/alternatives``: the field's) every step says the host lacks it.
- ``container``: each profile its own container from a local image, named and labelled by us, stopped with
  ``stop -t`` and removed; two profiles from two image tags compare two images in one run.

Each diagnose ends ``spec-corrupts-output`` and leaves no server and no container of ours behind.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from invoke import Context

from mtp_remote.config.inventory import HostConfig
from mtp_remote.errors import RemoteError
from mtp_remote.remote.containers import ExecInto
from mtp_remote.serving.exec import ExecServer
from tests.conftest import ROOT
from tests.support import containers, serving
from tests.support.ports import free_port

pytestmark = pytest.mark.sim
PLAYBOOK = ROOT / "playbooks" / "diagnose-mtp.yaml"


def _diagnose(tmp_path: Path, name: str, host: dict, playbook: Path = PLAYBOOK) -> tuple[int, dict, str]:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": name, "hosts": {name: host}}))
    r = subprocess.run([sys.executable, "-m", "mtp_remote.cli", "diagnose", "-i", str(inv), "-p", str(playbook),
                        "--runs-dir", str(tmp_path / "runs"), "--samples", "2"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    runs = sorted(p for p in (tmp_path / "runs").iterdir() if (p / "summary.json").exists())
    summary = json.loads((runs[-1] / "summary.json").read_text()) if runs else {}
    return r.returncode, summary, r.stdout + r.stderr


def _verdicts(summary: dict) -> dict[str, str]:
    return {v["profile"]: v["kind"] for v in summary["verdicts"]}


def _ours(runtime: str, host: str) -> list[str]:
    r = subprocess.run([runtime, "ps", "-a", "--filter", f"label=mtp-remote.host={host}", "--format", "{{.Names}}"],
                       capture_output=True, text=True, check=True)
    return r.stdout.split()


def test_exec_kind_diagnoses_inside_a_long_lived_container_and_waits_for_the_memory(runtime, image,
                                                                                   container_name, tmp_path):
    containers.start(runtime, container_name, image, label="test")
    port = free_port()
    code, summary, out = _diagnose(tmp_path, f"exec-{port}", {
        "transport": "local", "engine": "sim", "port": port, "python": sys.executable,
        "workdir": f"~/.mtp-remote/hosts/test-exec-{port}",
        "server": {"kind": "exec", "runtime": runtime, "container": container_name},
        "env": {"SGLANG_SIM_FAULTS": "state_leak,pid_namespace,slow_release=1.5", "SGLANG_SIM_TIME_SCALE": "0.02"}})
    assert code == 1, out[-3000:]
    assert _verdicts(summary)["mtp"] == "spec-corrupts-output"
    waits = [line for line in out.splitlines() if "held by processes this host cannot see: waited until" in line]
    assert len(waits) == 3, out[-3000:]  # baseline, its A/A relaunch and mtp: each stop waited for the GPUs' level
    waited = [float(re.search(r"released after ([0-9.]+) s", w).group(1)) for w in waits]
    assert all(s >= 1.0 for s in waited), waits  # slow_release=1.5: the memory went 1.5 s after the exit
    ps = subprocess.run([runtime, "exec", container_name, "ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "mtp_remote.sim" not in ps, "no server left in the container"


def test_in_a_container_without_awk_every_step_says_the_host_lacks_it(runtime, image, container_name, tmp_path):
    containers.start(runtime, container_name, image, label="test", alternatives=False)
    host = HostConfig(name="no-awk", transport="local", engine="sim", port=free_port(), python=sys.executable,
                      workdir="~/.mtp-remote/hosts/no-awk",
                      server={"kind": "exec", "runtime": runtime, "container": container_name})
    kind = ExecServer(Context(), host, python=sys.executable, workdir=host.workdir, run_id="r1")
    assert isinstance(kind.c, ExecInto)
    kind.prepare()  # workdir.sh needs no awk
    with pytest.raises(RemoteError, match="^the host lacks awk: .*launch.sh"):
        kind.launch("baseline", ["--model-path", "/m", "--port", str(host.port)], {})
    with pytest.raises(RemoteError, match="^the host lacks awk: .*stop.sh"):
        kind.stop()


def test_container_kind_runs_each_profile_from_its_image_and_leaves_no_container(runtime, image, tmp_path):
    other = image.rsplit(":", 1)[0] + ":other-" + image.rsplit(":", 1)[1]  # a second tag: a second "release"
    subprocess.run([runtime, "tag", image, other], check=True, capture_output=True)
    pb = yaml.safe_load(PLAYBOOK.read_text())
    spec = next(n for n, p in pb["profiles"].items() if "speculative" in json.dumps(p))
    pb["profiles"][spec]["image"] = other
    playbook = tmp_path / "two-images.yaml"
    playbook.write_text(yaml.safe_dump(pb))
    port = free_port()
    name = f"image-{port}"
    try:
        code, summary, out = _diagnose(tmp_path, name, {
            "transport": "local", "engine": "sim", "port": port, "python": sys.executable,
            "workdir": str(tmp_path / "wd"),
            "server": {"kind": "container", "runtime": runtime, "image": image},
            "env": {"SGLANG_SIM_FAULTS": "state_leak", "SGLANG_SIM_TIME_SCALE": "0.02"}}, playbook)
    finally:
        subprocess.run([runtime, "rmi", other], capture_output=True, check=False)
    assert code == 1, out[-3000:]
    assert _verdicts(summary)[spec] == "spec-corrupts-output"
    assert f", {image})" in out and f", {other})" in out, out[-3000:]  # "launched container ID (NAME, IMAGE)"
    stopped = [line for line in out.splitlines() if "stopped container" in line]
    # baseline, its A/A relaunch (the shipped playbook's compare.calibration) and the speculative profile
    assert len(stopped) == 3 and all("(exit 0), removed" in s for s in stopped), stopped
    held = [int(re.search(r"GPU memory \((\d+) MiB\)", s).group(1)) for s in stopped]
    assert all(m > 10_000 for m in held), "the host's nvidia-smi saw the container's processes (their host PIDs)"
    assert _ours(runtime, name) == [], "every container of ours is removed"


def test_exec_kind_over_ssh_launches_reaches_and_stops_the_server_in_the_container(runtime, image, container_name,
                                                                                   sshd):

    from mtp_remote.config.playbook import Playbook
    from mtp_remote.remote import connect as transport
    from mtp_remote.remote.commands import server_argv, server_env
    from mtp_remote.serving.kinds import open_server

    containers.start(runtime, container_name, image, label="test")
    port = free_port()
    host = HostConfig(name="ssh-exec", **sshd.host_config(
        port=port, engine="sim", workdir=f"~/.mtp-remote/hosts/ssh-exec-{port}",
        server={"kind": "exec", "runtime": runtime, "container": container_name},
        env={"SGLANG_SIM_TIME_SCALE": "0.01", "SGLANG_SIM_FAULTS": "pid_namespace,slow_release=1"}))
    pb = Playbook.model_validate(dict(name="t", base_flags="--tp-size 2", profiles={"baseline": {"flags": ""}},
                                      prompts=[{"id": "p", "text": "2+2?"}], temperatures=[0.0], samples=1))
    c = transport.connect(host)
    try:
        kind = open_server(c, host, python=sys.executable, run_id="r1")
        kind.prepare()
        rec = kind.launch("baseline", server_argv(host, pb, "baseline"), server_env(host, pb, "baseline",
                                                                                    kind.workdir))
        assert kind.workdir.startswith("/root/.mtp-remote/hosts/ssh-exec-"), "the container's home, not the host's"
        with kind.reach() as tun:
            assert kind.wait_ready(rec, timeout_s=60, health=serving.health_check(tun.url)).ok
        res = kind.stop(term_s=10, gpu_release_s=20)
        assert res.found == "running" and res.gpu_release_by == "level" and res.gpu_release_s >= 0.8
    finally:
        transport.close(c)
    ps = subprocess.run([runtime, "exec", container_name, "ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "mtp_remote.sim" not in ps


def test_status_and_logs_of_a_container_host_name_the_container_we_launched(runtime, image, tmp_path):
    """`status` read the process kind's record on every host: on a container host it said "none" while our
    container served. Now each kind says what it recorded (ServerKind.status)."""
    port = free_port()
    name = f"status-{port}"
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": name, "hosts": {name: {
        "transport": "local", "engine": "sim", "port": port, "python": sys.executable,
        "workdir": str(tmp_path / "wd"), "server": {"kind": "container", "runtime": runtime, "image": image},
        "env": {"SGLANG_SIM_TIME_SCALE": "0.02"}}}}))

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mtp_remote.cli", *args, "-i", str(inv), "-H", name],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path, stdin=subprocess.DEVNULL)

    try:
        r = cli("launch", "-p", str(PLAYBOOK), "--profile", "baseline")
        assert r.returncode == 0, r.stdout + r.stderr
        st = json.loads(cli("status", "--json").stdout)
        assert st["server_state"] == "running", st
        assert st["server"]["runtime"] == runtime and st["server"]["profile"] == "baseline", st["server"]
        assert st["server"]["container_id"] in subprocess.run(
            [runtime, "ps", "-q", "--no-trunc", "--filter", f"label=mtp-remote.host={name}"],
            capture_output=True, text=True, check=True).stdout
        assert st["port_in_use"] is True
        logs = cli("logs")
        assert logs.returncode != 0 and f"{runtime} logs -f {st['server']['container_id']}" in logs.stderr, \
            logs.stdout + logs.stderr
        assert "Traceback" not in logs.stderr
        r = cli("stop")
        assert r.returncode == 0 and "stopped container" in r.stdout, r.stdout + r.stderr
        st = json.loads(cli("status", "--json").stdout)
        assert st["server_state"] == "none" and st["server"] is None, st
    finally:
        cli("stop")
    assert _ours(runtime, name) == []
