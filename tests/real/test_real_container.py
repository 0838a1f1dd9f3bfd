"""Real SGLang 0.5.9 served from a container (the `container` server kind), as most operators run
``lmsysorg/sglang``: the shipped ``real-cpu`` host with ``server: {kind: container}``, a local image (a minimal
rootfs: no registry is reachable) and this machine's CPU venv, model and python bind-mounted read-only.
``make test-real`` only (``MTP_REMOTE_REAL_FULL=1``; one real start in a container, a few minutes)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from tests.support import containers
from tests.support.real_hosts import local_host

pytestmark = [pytest.mark.real, pytest.mark.timeout(3600),
              pytest.mark.skipif(os.environ.get("MTP_REMOTE_REAL_FULL") != "1", reason="make test-real runs it")]


@pytest.fixture(scope="module")
def image():
    rt = containers.runtime()
    if rt is None:
        pytest.fail("no container runtime (podman or docker): `make system-deps` installs podman as root")
    containers.configure(rt)
    tag = f"localhost/mtp-remote-test-real:{os.getpid()}"
    containers.build_image(rt, tag)
    yield rt, tag
    subprocess.run([rt, "rmi", "-f", tag], capture_output=True, check=False)


def test_real_sglang_in_a_container_per_profile_diagnoses_and_leaves_no_container(real_engine, image, tmp_path):
    rt, tag = image
    cache = str(Path(real_engine.python).parent.parent.parent)  # the engine's cache: venv and models
    base = str(Path(os.path.realpath(real_engine.python)).parent.parent)  # the venv's python installation
    mounts = containers.mounts()
    for p in (cache, base):
        if f"{p}:{p}:ro" not in mounts:
            mounts += ["-v", f"{p}:{p}:ro"]
    host = local_host(real_engine, "real-cpu", tmp_path / "wd", server={
        "kind": "container", "runtime": rt, "image": tag, "python": real_engine.python,
        "run_args": [*mounts, "--shm-size", "1g"]})
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "real-cpu", "hosts": {"real-cpu": host}}))
    runs = tmp_path / "runs"
    r = CliRunner().invoke(main, ["diagnose", "-i", str(inv), "-H", "real-cpu", "--runs-dir", str(runs),
                                  "--profile", "baseline", "--samples", "1"])
    assert r.exit_code == 0, r.output
    run_dir = next(p for p in runs.iterdir() if p.is_dir())
    doc = json.loads((run_dir / "summary.json").read_text())
    (pr,) = doc["profiles"]
    assert pr["launched"] and pr["server_info"]["version"] == "0.5.9", pr
    assert "launched container " in r.output and f", {tag})" in r.output, r.output
    assert "stopped container" in r.output and "removed" in r.output, r.output
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 6 and not any(s.get("error") for s in samples), samples
    assert (run_dir / "logs" / "baseline.log").read_text().count("The server is fired up") == 1
    left = subprocess.run([rt, "ps", "-a", "--filter", "label=mtp-remote.host=real-cpu", "--format", "{{.Names}}"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert left == [], left
