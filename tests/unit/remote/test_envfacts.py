"""Environment facts: one command, one parser; on a sim host the command runs for real (local transport)."""

from __future__ import annotations

import sys

from invoke import Context

from mtp_remote.config.inventory import HostConfig
from mtp_remote.remote.envfacts import environment_command, parse_environment

OUTPUT = """=== mtp-remote:versions
sglang 0.5.9
torch 2.9.1+cu128
=== mtp-remote:gpus
NVIDIA RTX A6000, 560.35.03
NVIDIA RTX A6000, 560.35.03
=== mtp-remote:model
{"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5"}
"""


def test_parse_environment_reads_versions_gpus_driver_and_architectures():
    ef = parse_environment(OUTPUT)
    assert (ef.sglang, ef.torch, ef.driver) == ("0.5.9", "2.9.1+cu128", "560.35.03")
    assert ef.gpus == ["NVIDIA RTX A6000"] * 2 and ef.architectures == ["Qwen3_5ForConditionalGeneration"]


def test_a_missing_sglang_and_an_unreadable_config_leave_fields_unset():
    ef = parse_environment("=== mtp-remote:versions\nsglang -\ntorch -\n=== mtp-remote:model\nnot json\n")
    assert ef.sglang is None and ef.torch is None and ef.architectures == [] and ef.driver is None


def test_on_a_sim_host_the_command_reports_the_imitated_release_and_the_host_driver(tmp_path):
    host = HostConfig(name="s", transport="local", engine="sim", workdir=str(tmp_path),
                      env={"SGLANG_SIM_DRIVER": "550.54.15", "SGLANG_SIM_VERSION": "0.5.10"})
    out = Context().run(environment_command(host, sys.executable, str(tmp_path)), hide=True, warn=True,
                        in_stream=False).stdout
    ef = parse_environment(out, simulated=True)
    assert ef.sglang == "0.5.10" and ef.driver == "550.54.15" and len(ef.gpus) == 2
