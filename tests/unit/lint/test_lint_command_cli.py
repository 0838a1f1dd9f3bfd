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
    out = json.loads(result.output)
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
