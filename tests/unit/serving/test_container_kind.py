"""The container kind's launch line, planned without a host: name, labels, network, mounts, image, command."""

from __future__ import annotations

import sys

import pytest
from invoke import Context

from mtp_remote.config.inventory import HostConfig
from mtp_remote.serving.container import ContainerServer, env_file_text


def _server(**spec) -> ContainerServer:
    host = HostConfig(name="gpu-a", address="gpu", port=30000, server={"kind": "container", **spec})
    return ContainerServer(Context(), host, python="python3", workdir="/w", run_id="r1",
                           images={"mtp": "lmsysorg/sglang:v0.5.10"})


def test_each_profile_runs_from_its_own_image_with_our_name_labels_and_the_host_network():
    k = _server(runtime="docker", image="lmsysorg/sglang:v0.5.9-cu126", run_args=["-v", "/models:/models:ro"])
    argv = k.run_argv("baseline", ["--model-path", "/models/q", "--port", "30000"])
    assert argv[:8] == ["docker", "run", "-d", "--name", "mtp-gpu-a-r1-baseline", "--network", "host", "--label"]
    assert {argv[i + 1] for i, a in enumerate(argv) if a == "--label"} == {
        "mtp-remote=r1", "mtp-remote.host=gpu-a", "mtp-remote.profile=baseline", "mtp-remote.port=30000"}
    i = argv.index("lmsysorg/sglang:v0.5.9-cu126")
    assert argv[i - 2:i] == ["-v", "/models:/models:ro"]  # run_args, just before the image
    assert argv[i + 1:] == ["python3", "-m", "sglang.launch_server", "--model-path", "/models/q", "--port", "30000"]
    assert "lmsysorg/sglang:v0.5.10" in k.run_argv("mtp", [])


def test_sglang_serve_in_an_image_is_its_console_script():
    host = HostConfig(name="g", address="gpu", entrypoint="serve",
                      server={"kind": "container", "image": "i:1", "python": "/sgl/bin/python3"})
    k = ContainerServer(Context(), host, python="python3", workdir="/w", run_id="r1")
    assert k.run_argv("baseline", ["--port", "1"])[-5:] == ["/sgl/bin/python3", "/sgl/bin/sglang", "serve",
                                                            "--port", "1"]


def test_a_local_sim_host_mounts_the_simulated_engine_read_only():
    host = HostConfig(name="s", transport="local", engine="sim", server={"kind": "container", "image": "i:1"})
    argv = ContainerServer(Context(), host, python=sys.executable, workdir="/w", run_id="r1").run_argv("b", [])
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert "/usr:/usr:ro" in mounts and mounts[-1] == "/w:/w", "the workdir (its simulated GPU state) writable"
    assert all(m.endswith(":ro") for m in mounts[:-1])
    assert argv[-3:] == [sys.executable, "-m", "mtp_remote.sim.launch_server"]


def test_the_environment_travels_as_an_env_file_and_a_line_break_is_refused():
    assert env_file_text({"A": "1", "HF_TOKEN": "x=y"}) == "A=1\nHF_TOKEN=x=y\n"
    with pytest.raises(ValueError, match="line break"):
        env_file_text({"A": "1\n2"})


def test_each_container_kind_says_the_gpu_release_is_judged_by_memory():
    from mtp_remote.remote.containers import ExecInto
    from mtp_remote.serving.exec import ExecServer
    from mtp_remote.serving.kinds import open_server

    exe = open_server(Context(), HostConfig(name="e", transport="local", server={"kind": "exec", "container": "box"}),
                      python="python3", run_id="r1")
    assert isinstance(exe, ExecServer) and isinstance(exe.c, ExecInto) and exe.c.runtime == "docker"
    per = open_server(None, HostConfig(name="c", address="gpu", server={"kind": "container", "image": "i:1"}),
                      python="python3", run_id="r1", images={"mtp": "i:2"})
    assert isinstance(per, ContainerServer) and per.image_of("mtp") == "i:2" and per.image_of("baseline") == "i:1"
    for kind in (exe, per):
        assert (kind.capabilities.gpu_release, kind.capabilities.drain, kind.capabilities.relaunch) == (
            "memory", True, True)
    assert per.capabilities.identity == "container"
