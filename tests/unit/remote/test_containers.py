"""Containers, the pure parts: exec wrapping, image releases, GPU arguments, and the inventory's server kinds."""

from __future__ import annotations

import shlex

import pytest
from invoke import MockContext, Result

from mtp_remote.config.inventory import HostConfig
from mtp_remote.lint.cmdline import image_release
from mtp_remote.remote.containers import ExecInto, container_name, gpu_args


def test_exec_runs_every_command_inside_the_container_and_keeps_the_rest_of_the_transport():
    inner = MockContext(run={"podman exec -i mtp-remote-sim sh -c 'echo $HOME'": Result("/root\n")})
    c = ExecInto(inner, "podman", "mtp-remote-sim")
    assert c.run("echo $HOME", hide=True).stdout == "/root\n"  # MockContext raises on any other command
    assert c.config is inner.config


def test_pct_execs_into_a_proxmox_container_by_vmid():
    assert ExecInto(None, "pct", "104").wrap("nvidia-smi -L") == "pct exec 104 -- sh -c 'nvidia-smi -L'"


def test_a_command_given_input_reads_it_whole_before_it_runs():
    words = shlex.split(ExecInto(None, "docker", "box").wrap("cat > f; echo ok", stdin=True))
    assert words[:6] == ["docker", "exec", "-i", "box", "sh", "-c"]
    assert words[6].startswith('umask 077; t=$(mktemp)') and words[7] == "cat > f; echo ok"


def test_an_unknown_runtime_names_the_choices():
    with pytest.raises(ValueError, match="podman, docker, pct"):
        ExecInto(None, "lxc", "x")


@pytest.mark.parametrize(("image", "release"), [
    ("lmsysorg/sglang:v0.5.9-cu126", "0.5.9"), ("lmsysorg/sglang:0.5.10.post1", "0.5.10.post1"),
    ("registry:5000/sglang:v0.5.23", "0.5.23"), ("lmsysorg/sglang:latest", None), ("lmsysorg/sglang", None),
    ("localhost:5000/sglang", None), ("lmsysorg/sglang@sha256:" + "a" * 64, None)])
def test_the_release_an_image_tag_names(image, release):
    assert image_release(image) == release


def test_gpus_are_passed_as_each_runtime_wants_them():
    assert gpu_args("docker", None) == ["--gpus", "all"]
    assert gpu_args("docker", [0, 1]) == ["--gpus", '"device=0,1"']
    assert gpu_args("podman", [1]) == ["--device", "nvidia.com/gpu=1"]


def test_our_container_names_hold_only_safe_characters():
    assert container_name("gpu box", "20261203-0715-ab", "mtp") == "mtp-gpu-box-20261203-0715-ab-mtp"


def test_server_kinds_are_validated_with_the_choices_named():
    h = HostConfig(name="h", address="gpu", server={"kind": "exec", "runtime": "pct", "container": "104"})
    assert (h.server.kind, h.server.runtime) == ("exec", "pct")
    with pytest.raises(ValueError, match="not a container name"):
        HostConfig(name="h", address="gpu", server={"kind": "exec", "container": "a; rm -rf /"})
    with pytest.raises(ValueError, match="not an image reference"):
        HostConfig(name="h", address="gpu", server={"kind": "container", "image": "x y"})
    with pytest.raises(ValueError, match="'podman' or 'docker'"):
        HostConfig(name="h", address="gpu", server={"kind": "container", "runtime": "pct", "image": "i"})
