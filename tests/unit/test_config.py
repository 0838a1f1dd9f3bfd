"""Config loading: unknown fields and bad values name the file, the field and the valid choices."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtp_remote.config import load_inventory, load_playbook
from mtp_remote.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_inventory_and_field_playbook_load():
    inv = load_inventory(ROOT / "inventory.yaml")
    assert inv.default_host == "sim-local"
    assert inv.get(None).env["SGLANG_SIM_FAULTS"] == "state_leak"
    assert "SGLANG_SIM_FAULTS" not in inv.get("sim-healthy").env
    pb = load_playbook(ROOT / "playbooks" / "diagnose-mtp.yaml")
    assert pb.profile_order() == ["baseline", "mtp"]
    assert pb.base_flags == ["--tp-size", "2", "--mem-fraction-static", "0.88", "--context-length", "32768",
                             "--max-running-requests", "16", "--mamba-full-memory-ratio", "0.5",
                             "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder"]
    assert pb.profiles["mtp"].flags == ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
                                        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    assert pb.temperatures == [0.0, 0.7]
    assert any(p.text == "What is 2+2?" for p in pb.prompts)
    assert pb.max_running_requests() == 16


def test_an_unknown_field_names_file_and_field(tmp_path):
    f = tmp_path / "inv.yaml"
    f.write_text("default_host: a\nhosts:\n  a:\n    transport: local\n    engine: sim\n    prot: 1\n")
    with pytest.raises(ConfigError) as e:
        load_inventory(f)
    assert str(f) in str(e.value) and "hosts.a.prot" in str(e.value) and "unknown field" in str(e.value)


def test_a_bad_choice_names_the_valid_ones(tmp_path):
    f = tmp_path / "inv.yaml"
    f.write_text("default_host: a\nhosts:\n  a:\n    transport: telnet\n")
    with pytest.raises(ConfigError) as e:
        load_inventory(f)
    assert "hosts.a.transport" in str(e.value) and "'ssh'" in str(e.value) and "'local'" in str(e.value)


def test_an_unknown_host_lists_the_hosts():
    inv = load_inventory(ROOT / "inventory.yaml")
    with pytest.raises(ConfigError, match="choose one of: sim-healthy, sim-local"):
        inv.get("gpu-9")


def test_a_baseline_with_speculative_flags_is_refused(tmp_path):
    f = tmp_path / "pb.yaml"
    f.write_text("name: x\nprofiles:\n  baseline:\n    flags: --speculative-algorithm EAGLE\n"
                 "prompts:\n  - {id: a, text: hi}\n")
    with pytest.raises(ConfigError, match="must not have --speculative"):
        load_playbook(f)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_playbook(tmp_path / "nope.yaml")
