"""The real-cpu host and playbook: CPU start options live in config only; ~ on local hosts; {model_path}."""

from __future__ import annotations

import os

from mtp_remote.config.inventory import HostConfig, load_inventory
from mtp_remote.config.paths import DEFAULT_PLAYBOOK
from mtp_remote.config.playbook import load_playbook
from mtp_remote.experiment.hosts import load_config
from mtp_remote.remote.commands import server_argv, server_env
from mtp_remote.report.document import engine_facts
from tests.conftest import ROOT


def test_the_real_cpu_host_names_the_cached_venv_and_model_under_this_users_home():
    host = load_inventory(ROOT / "inventory.yaml").get("real-cpu")
    home = os.path.expanduser("~")
    assert (host.engine, host.transport) == ("sglang", "local")
    assert host.python == f"{home}/.cache/mtp-remote/sglang-0.5.9-cpu-v1/venv/bin/python"
    assert host.model_path == f"{home}/.cache/mtp-remote/sglang-0.5.9-cpu-v1/model"
    assert host.env == {"SGLANG_USE_CPU_ENGINE": "1", "TRITON_INTERPRET": "1"}


def test_tilde_stays_as_written_on_an_ssh_host():
    host = HostConfig(name="h", transport="ssh", address="10.0.0.1", python="~/venv/bin/python",
                      model_path="~/models/m")
    assert (host.python, host.model_path) == ("~/venv/bin/python", "~/models/m")


def test_real_cpu_diagnose_uses_the_hosts_playbook_and_the_model_drafts_for_itself():
    _, host, pb = load_config(ROOT / "inventory.yaml", DEFAULT_PLAYBOOK, "real-cpu")
    assert pb.name == "real-cpu" and pb.profile_order() == ["baseline", "standalone"]
    argv = server_argv(host, pb, "standalone")
    assert argv[argv.index("--speculative-draft-model-path") + 1] == host.model_path
    assert argv[argv.index("--device") + 1] == "cpu" and argv[argv.index("--max-total-tokens") + 1] == "8192"
    base = server_argv(host, pb, "baseline")
    assert "--speculative-algorithm" not in base and base[base.index("--attention-backend") + 1] == "triton"
    assert server_env(host, pb, "baseline", "/w")["SGLANG_USE_CPU_ENGINE"] == "1"
    assert pb.timeouts.drain_s == 20


def test_an_explicit_playbook_beats_the_hosts_default():
    _, _, pb = load_config(ROOT / "inventory.yaml", ROOT / "playbooks" / "nightly.yaml", "real-cpu")
    assert pb.name != "real-cpu"
    assert load_playbook(ROOT / "playbooks" / "diagnose-mtp.yaml").timeouts.drain_s == 30.0


def test_the_engine_label_comes_from_the_servers_own_server_info():
    class Run:
        server_info = {"version": "0.5.9", "model_path": "/m/tiny"}

    host = load_inventory(ROOT / "inventory.yaml").get("real-cpu")
    assert engine_facts(host, [Run()]) == {"label": "real SGLang 0.5.9", "version": "0.5.9", "simulated": False,
                                           "model_path": "/m/tiny"}
    sim = load_inventory(ROOT / "inventory.yaml").get("sim-local")
    assert engine_facts(sim, [])["label"] == "simulated SGLang (mtp_remote.sim)"
