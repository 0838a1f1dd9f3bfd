"""Lint on launch lines of our own (tests/unit/lint/field_commands.json, the corpus format): other backends,
releases, strategies, secret spellings, ports, fractions and hosts; plus the properties those kinds need."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtp_remote.cli.tools import lint_command_cmd
from mtp_remote.errors import ConfigError
from mtp_remote.lint.cmdline import split_launch_command
from mtp_remote.lint.lint import lint_command
from mtp_remote.lint.rules import RELEASE_RULES, is_host

CASES = json.loads((Path(__file__).resolve().parent / "field_commands.json").read_text())
CORPUS = json.loads(
    (Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "commands" / "commands.json").read_text())


def _matches(got: list[str], want: list[str]) -> bool:
    """Exactly as many findings as labelled, each label a prefix of one (a suggestion may follow)."""
    return len(got) == len(want) and all(g == w or g.startswith(w + ":") for g, w in zip(got, want))


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_field_command_gives_its_labelled_flags_and_exactly_its_findings(name):
    case = CASES[name]
    result = lint_command(case["cmd"], sglang_version=case.get("sglang_version"))
    assert _matches(result.codes, case["findings"]), result.codes
    for dest, value in case["flags"].items():
        assert result.flags[dest] == value, dest
    if "secret" in case:
        assert case["secret"] not in json.dumps(result.to_dict(with_defaults=True))
        assert case["secret"] not in repr(result)


@pytest.mark.parametrize("name", sorted(n for n, c in {**CASES, **CORPUS}.items() if "secret" in c))
def test_no_secret_reaches_the_cli_output_plain_or_json(name):
    case = {**CASES, **CORPUS}[name]
    version = ["--sglang-version", case["sglang_version"]] if case.get("sglang_version") else []
    for fmt in (["--json"], ["--json", "--with-defaults"], []):
        out = CliRunner().invoke(lint_command_cmd, [*fmt, *version, case["cmd"]])
        assert out.exit_code in (0, 1), out.output
        assert case["secret"] not in out.output


def test_json_flags_hold_what_the_line_set_and_defaults_only_on_request():
    cmd = CORPUS["c12_api_key_not_echoed"]["cmd"]
    result = lint_command(cmd)
    assert set(result.to_dict()["flags"]) == {"model_path", "tp_size", "host", "api_key"}
    assert result.to_dict()["flags"]["api_key"] == "***"
    assert len(result.to_dict(with_defaults=True)["flags"]) > 300


def test_an_unknown_release_says_which_table_was_used_and_warns():
    result = lint_command("python -m sglang.launch_server --model-path /m/x", sglang_version="0.4.0")
    assert result.sglang_version == "0.5.9" and result.requested_version == "0.4.0"
    assert "0.4.0" in result.warnings[0] and "0.5.9" in result.warnings[0]
    assert lint_command("python -m sglang.launch_server --model-path /m/x", sglang_version="0.5.10").warnings == []
    newer = lint_command("python -m sglang.launch_server --model-path /m/x", sglang_version="0.6.1")
    assert newer.sglang_version == "0.5.23" and "newer" in newer.warnings[0]


@pytest.mark.parametrize("name, fixed", [
    ("k04_extra_buffer_with_disabled_radix_0513", "--mamba-scheduler-strategy no_buffer --disable-radix-cache"),
    ("k05_lazy_buffer_with_speculation_0513", "--mamba-scheduler-strategy extra_buffer"),
    ("k06_lazy_with_speculation_and_disabled_radix_0513", "--mamba-scheduler-strategy no_buffer --disable-radix-cache"),
    ("k08_spec_with_radix_cache_on_hybrid_0510", "--disable-radix-cache"),
])
def test_the_fix_a_release_rule_offers_is_refused_by_no_other_rule(name, fixed):
    case = CASES[name]
    said = " ".join(f.message for f in lint_command(case["cmd"], sglang_version=case["sglang_version"]).findings)
    assert all(word in said for word in fixed.split())
    head = case["cmd"].split(" --mamba-scheduler-strategy")[0]
    again = lint_command(f"{head} {fixed}", sglang_version=case["sglang_version"])
    assert again.codes == []


def test_0_5_9_says_that_disable_radix_cache_changes_nothing_for_speculation_on_qwen_hybrids():
    cmd = CORPUS["c08_disable_radix_prefix"]["cmd"]
    note = lint_command(cmd, sglang_version="0.5.9").notes
    assert len(note) == 1 and "changes nothing" in note[0]
    by_arch = lint_command("python -m sglang.launch_server --model-path /data/ckpt --speculative-algorithm NEXTN "
                           "--disable-radix-cache", sglang_version="0.5.9",
                           architectures=("Qwen3NextForCausalLM",))
    assert by_arch.notes and by_arch.codes == []
    assert lint_command(cmd, sglang_version="0.5.10").notes == []
    assert lint_command(cmd.replace("--speculative-algorithm NEXTN", ""), sglang_version="0.5.9").notes == []


def test_every_release_rule_names_a_range_and_the_source_text_that_implements_it():
    for rule in RELEASE_RULES:
        assert rule.anchor and rule.applies_to(rule.since)
        assert rule.until is None or not rule.applies_to(rule.until)


@pytest.mark.parametrize("value, ok", [
    ("127.0.0.1", True), ("0.0.0.0", True), ("::", True), ("[::1]", True), ("gpu-box-01.internal", True),
    ("localhost", True), ("[0.0.0.0](http://0.0.0.0/)", False), ("http://0.0.0.0", False), ("0.0.0.0:30000", False),
    ("-bad-.host", False), ("", False),
])
def test_host_values_are_host_names_or_addresses(value, ok):
    assert is_host(value) is ok


# --- reading the line as the shell does (cmdline.py) ----------------------------------------------------------


@pytest.mark.parametrize(("cmd", "argv", "env"), [
    ("python -m sglang.launch_server --model-path '/m/a #b' --port 1 # a comment", ["--model-path", "/m/a #b", "--port", "1"], {}),
    ("python -m sglang.launch_server --model-path /m/a#b", ["--model-path", "/m/a#b"], {}),
    ("cd /srv; X=1 python3 -m sglang.launch_server --model-path /m|tee log", ["--model-path", "/m"], {"X": "1"}),
    ("export A=1 B=2\nCUDA_VISIBLE_DEVICES=3 python3 -m sglang.launch_server --model-path /m >log 2>&1 &",
     ["--model-path", "/m"], {"A": "1", "B": "2", "CUDA_VISIBLE_DEVICES": "3"}),
    ("podman run --env=HF_TOKEN=t -eX=1 img python3 -X importtime -m sglang.launch_server --model-path /m",
     ["--model-path", "/m"], {"HF_TOKEN": "t", "X": "1"}),
    ("sglang serve /m --model-type=llm --tp 2", ["--model-path", "/m", "--tp", "2"], {}),
    ("python -m sglang.launch_server --host $(hostname -I | cut -d' ' -f1) --port 1",
     ["--host", "$(hostname -I | cut -d' ' -f1)", "--port", "1"], {}),
    ('tmux send-keys -t s "python3 -m sglang.launch_server --model-path /m" Enter', ["--model-path", "/m"], {}),
])
def test_the_line_is_read_as_the_shell_reads_it(cmd, argv, env):
    line = split_launch_command(cmd)
    assert (line.argv, line.env) == (argv, env)


def test_a_line_with_sglang_only_in_another_command_is_not_a_launch():
    with pytest.raises(ConfigError, match="not an SGLang launch line"):
        split_launch_command("pip install 'sglang[all]' && python -m vllm.entrypoints.openai.api_server --model /m")
