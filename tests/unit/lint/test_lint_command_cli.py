"""``lint-command`` as an operator runs it: JSON for scripts, findings for people, exit 1 on a finding."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mtp_remote.cli.tools import lint_command_cmd

FIELD = ("python3 -m sglang.launch_server --model-path /models/Qwen3.6-27B --host 0.0.0.0 --tp-size 2 "
         "--speculative-algo NEXTN")


def test_json_prints_flags_and_findings_and_exits_1_on_a_finding():
    result = CliRunner().invoke(lint_command_cmd, ["--json", FIELD])
    assert result.exit_code == 1
    out = json.loads(result.stdout)  # stderr: the "no SGLang release given" warning
    assert out["flags"]["speculative_algorithm"] == "NEXTN" and out["flags"]["tp_size"] == 2
    assert [f["code"] for f in out["findings"]] == ["public-bind-without-api-key"]


def test_a_clean_line_exits_0():
    clean = FIELD.replace("0.0.0.0", "127.0.0.1")
    result = CliRunner().invoke(lint_command_cmd, ["--sglang-version", "0.5.9", clean])
    assert result.exit_code == 0, result.output
    assert "no findings" in result.output and "0.5.9" in result.output


def test_a_line_that_is_not_a_launch_is_a_clear_error():
    result = CliRunner().invoke(lint_command_cmd, ["ls -la"])
    assert result.exit_code == 2
    assert "not an SGLang launch line" in result.output


def test_without_a_release_it_says_which_table_it_used_and_names_a_renamed_flag_as_renamed():
    line = ("python -m sglang.launch_server --model-path /models/Qwen3-Next-80B-A3B-Instruct "
            "--mamba-scheduler-strategy extra_buffer")
    result = CliRunner().invoke(lint_command_cmd, ["--json", line])
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["sglang_version"] == "0.5.23" and out["requested_version"] is None
    assert "no SGLang release given" in out["warnings"][0] and "newest" in out["warnings"][0]
    assert "no SGLang release given" in result.stderr
    (f,) = out["findings"]
    assert (f["code"], f["flag"], f["suggestion"]) == ("unknown-flag", "--mamba-scheduler-strategy",
                                                       "--mamba-radix-cache-strategy")
    assert "renamed --mamba-radix-cache-strategy after SGLang 0.5.13" in f["message"]
    assert "0.5.9-0.5.13" in f["message"]
    plain = CliRunner().invoke(lint_command_cmd, [line])
    assert "SGLang 0.5.23 flag table (the newest: no --sglang-version given)" in plain.stdout


def test_on_a_release_that_has_the_flag_it_is_valid_and_its_newer_name_is_named_as_such():
    old = CliRunner().invoke(lint_command_cmd, ["--json", "--sglang-version", "0.5.13",
                                                "python -m sglang.launch_server --model-path /m "
                                                "--mamba-scheduler-strategy extra_buffer"])
    assert old.exit_code == 0 and json.loads(old.stdout)["warnings"] == []
    new = CliRunner().invoke(lint_command_cmd, ["--json", "--sglang-version", "0.5.9",
                                                "python -m sglang.launch_server --model-path /m "
                                                "--mamba-radix-cache-strategy extra_buffer"])
    (f,) = json.loads(new.stdout)["findings"]
    assert (f["code"], f["suggestion"]) == ("unknown-flag", "--mamba-scheduler-strategy")
    assert "is the name from SGLang 0.5.23 on of --mamba-scheduler-strategy" in f["message"]
    assert "0.5.9 spells it --mamba-scheduler-strategy" in f["message"]
    later = CliRunner().invoke(lint_command_cmd, ["--json", "--sglang-version", "0.5.9",
                                                  "python -m sglang.launch_server --model-path /m "
                                                  "--enable-mamba-cache-stochastic-rounding"])
    (f,) = json.loads(later.stdout)["findings"]
    assert "is a flag from SGLang 0.5.23 on; 0.5.9 does not have it yet" in f["message"]
