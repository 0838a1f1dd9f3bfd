"""The real-cpu host and playbook: CPU start options live in config only; ~ on local hosts; {model_path}."""

from __future__ import annotations

import os

import pytest

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
    assert host.python == f"{home}/.cache/mtp-remote/sglang-0.5.9-cpu-v2/venv/bin/python"
    assert host.model_path == f"{home}/.cache/mtp-remote/sglang-0.5.9-cpu-v2/model"
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


def test_the_real_hybrid_hosts_serve_a_hybrid_model_fp32_and_differ_only_in_model_and_injected_fault():
    inv = load_inventory(ROOT / "inventory.yaml")
    cache = f"{os.path.expanduser('~')}/.cache/mtp-remote/sglang-0.5.9-cpu-v2"
    names = ("real-hybrid", "real-hybrid-loop", "real-hybrid-leak", "real-hybrid-overaccept")
    hosts = {name: inv.get(name) for name in names}
    for host in hosts.values():
        assert host.python == inv.get("real-cpu").python
        assert {k: v for k, v in host.env.items() if k != "MTP_REMOTE_REAL_FAULTS"} == {
            "SGLANG_USE_CPU_ENGINE": "1", "TRITON_INTERPRET": "1", "SGLANG_MAMBA_CONV_DTYPE": "float32"}
    assert [(h.model_path, h.playbook) for h in hosts.values()] == (
        [(f"{cache}/hybrid-chat", "playbooks/real-hybrid-chat.yaml")] * 2
        + [(f"{cache}/hybrid", "playbooks/real-hybrid.yaml")] * 2)
    assert [h.env.get("MTP_REMOTE_REAL_FAULTS") for h in hosts.values()] == [
        None, "rewind", "mamba_state_leak", "accept_all_drafts"]
    assert len({h.port for h in hosts.values()} | {inv.get("real-cpu").port}) == 5


@pytest.mark.parametrize("name, playbook", [("real-hybrid", "real-hybrid-chat"), ("real-hybrid-leak", "real-hybrid")])
def test_real_hybrid_runs_baseline_vs_nextn_with_the_fields_flags_in_fp32(name, playbook):
    _, host, pb = load_config(ROOT / "inventory.yaml", DEFAULT_PLAYBOOK, name)
    assert pb.name == playbook and pb.profile_order()[:2] == ["baseline", "nextn"]
    spec, base = server_argv(host, pb, "nextn"), server_argv(host, pb, "baseline")
    for flag, value in (("--speculative-algorithm", "NEXTN"), ("--speculative-num-steps", "3"),
                        ("--speculative-eagle-topk", "1"), ("--speculative-num-draft-tokens", "4")):
        assert spec[spec.index(flag) + 1] == value and flag not in base
    for argv in (spec, base):
        assert argv[argv.index("--dtype") + 1] == "float32"
        assert argv[argv.index("--mamba-scheduler-strategy") + 1] == "extra_buffer"
        assert argv[argv.index("--attention-backend") + 1] == "triton" and "--mamba-full-memory-ratio" in argv
    assert pb.temperatures == [0.0] and pb.kl_probe and pb.compare.calibration


def test_the_trained_hybrids_playbook_checks_answers_and_logs_every_decode_step():
    pb = load_playbook(ROOT / "playbooks" / "real-hybrid-chat.yaml")
    assert {p.id: p.expected for p in pb.prompts}["two-plus-two"] == "4"
    assert sum(p.expected is not None for p in pb.prompts) >= 7
    flags = pb.base_flags
    assert flags[flags.index("--decode-log-interval") + 1] == "1"  # progress in the log at every step: never `stalled` under load


def test_the_dense_real_cpu_playbook_runs_fp32_where_the_triton_interpreter_runs():
    _, host, pb = load_config(ROOT / "inventory.yaml", DEFAULT_PLAYBOOK, "real-cpu")
    for profile in pb.profile_order():
        argv = server_argv(host, pb, profile)
        assert argv[argv.index("--dtype") + 1] == "float32"


def test_the_mamba_conv_dtype_is_shown_and_an_injected_faults_name_is_masked_like_any_other_value():
    masked = load_inventory(ROOT / "inventory.yaml").get("real-hybrid-overaccept").masked_env()
    assert masked["SGLANG_MAMBA_CONV_DTYPE"] == "float32"  # else `--dtype float32` reads `--dtype ***` in reports
    assert masked["MTP_REMOTE_REAL_FAULTS"] == "***"  # the tool is told nothing about the fault
