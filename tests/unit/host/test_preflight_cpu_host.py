"""preflight on a host without GPUs by design (issue 30): `preflight -H real-cpu` failed with "nvidia-smi returned
no GPUs" on a host where diagnose works. And the workdir line dropped the dot of ``~/.mtp-remote/hosts``."""

from __future__ import annotations

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.paths import find_inventory
from mtp_remote.config.inventory import load_inventory
from mtp_remote.config.playbook import load_playbook
from mtp_remote.host.ops import HostFacts
from mtp_remote.host.preflight import gpu_check, workdir_shown
from tests.conftest import ROOT


def _facts(**kw) -> HostFacts:
    return HostFacts(record=None, proc=None, tcp_ports=set(), gpus=[], apps=[], procs=[], owners=set(), **kw)


def test_the_shipped_cpu_host_expects_no_gpu_and_a_gpu_host_still_fails_without_one():
    inv = load_inventory(find_inventory(str(ROOT / "inventory.yaml")))
    cpu = inv.get("real-cpu")
    check = gpu_check(_facts(), cpu, load_playbook(ROOT / "playbooks" / "real-cpu.yaml"))
    assert (check.status, check.detail) == ("ok", "no GPU expected: the playbook real-cpu launches with --device cpu")
    # without the playbook, the host's own env says so (SGLang's CPU engine)
    check = gpu_check(_facts(), cpu, None)
    assert check.status == "ok" and check.detail.endswith("SGLANG_USE_CPU_ENGINE=1 in the host's env (SGLang's CPU engine)")
    gpu_host = HostConfig(name="gpu-box", address="10.0.0.1")
    field = load_playbook(ROOT / "playbooks" / "diagnose-mtp.yaml")
    assert (gpu_check(_facts(), gpu_host, field).status, gpu_check(_facts(), gpu_host, field).detail) == (
        "fail", "nvidia-smi returned no GPUs")
    assert gpu_check(_facts(gpus_hung=True), gpu_host, field).detail.startswith("nvidia-smi did not answer within ")
    no_gpus = HostConfig(name="cpu-box", address="10.0.0.2", gpus=[])
    assert gpu_check(_facts(), no_gpus, field).detail == "no GPU expected: the inventory gives this host no GPUs (gpus: [])"


def test_the_workdir_line_keeps_the_dot_of_a_hidden_directory():
    assert workdir_shown("~/.mtp-remote/hosts/real-cpu", ".mtp-remote/hosts") == "~/.mtp-remote/hosts"
    assert workdir_shown("~/.mtp-remote/hosts/real-cpu", "./.mtp-remote") == "~/.mtp-remote"
    assert workdir_shown("~/x/y", ".") == "~"
    assert workdir_shown("/srv/mtp/wd", "/srv/mtp") == "/srv/mtp"
    assert workdir_shown("wd", "wd") == "wd"
