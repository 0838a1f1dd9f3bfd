"""A host's ``server: {kind: ...}`` says where its servers run (the seam, ``mtp_remote/serving/``)."""

from __future__ import annotations

import pytest

from mtp_remote.config.inventory import HostConfig, load_inventory, server_kinds
from mtp_remote.errors import ConfigError
from mtp_remote.serving.kinds import open_server
from mtp_remote.serving.process import ProcessServer


def test_a_host_without_a_server_field_runs_its_servers_as_processes():
    for host in (HostConfig(transport="local"), HostConfig(transport="local", server={})):
        assert host.server.kind == "process"
        kind = open_server(None, host, python="python3", run_id="r1")
        assert isinstance(kind, ProcessServer) and kind.capabilities.kind == "process"
        assert (kind.capabilities.identity, kind.capabilities.gpu_release, kind.capabilities.relaunch) == (
            "pid", "pid", True)


@pytest.mark.parametrize("server,error", [
    ("{kind: docker}", "hosts.a.server: unknown server kind 'docker'; choose one of: process, exec, container, slurm"),
    ("{kind: process, image: x}", "unknown field"),
    ("{kind: process, kinds: x}", "unknown field; did you mean 'kind'?"),  # the variant the tag names
])
def test_a_bad_server_field_names_file_field_and_choices(tmp_path, server, error):
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"default_host: a\nhosts:\n  a:\n    transport: local\n    server: {server}\n")
    with pytest.raises(ConfigError) as e:
        load_inventory(inv)
    assert str(inv) in str(e.value) and error in str(e.value) and "hosts.a.server" in str(e.value)
    assert server_kinds() == ["process", "exec", "container", "slurm"]


def test_a_slurm_host_opens_the_slurm_kind_with_what_it_can_guarantee():
    from mtp_remote.serving.slurm import SlurmServer

    host = HostConfig(transport="local", server={"kind": "slurm", "partition": "gpu", "gres": "gpu:2"})
    kind = open_server(None, host, python="python3", run_id="r1")
    assert isinstance(kind, SlurmServer) and kind.allocation is None
    caps = kind.capabilities
    assert (caps.kind, caps.identity, caps.drain, caps.gpu_release, caps.logs, caps.relaunch) == (
        "slurm", "job", True, "none", "poll", True)
