"""``classify-log`` as an operator runs it: JSON lines per file, a table, and a clear error for a bad path."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mtp_remote.cli.tools import classify_log_cmd

LOGS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "logs"


def test_json_output_is_one_object_per_file_with_the_issue_5_keys():
    files = [str(LOGS / "l13_ready_then_decode_stats.log"), str(LOGS / "l05_http_port_in_use.log")]
    result = CliRunner().invoke(classify_log_cmd, ["--json", *files])
    assert result.exit_code == 1, result.output  # one of them is fatal
    first, second = (json.loads(line) for line in result.output.splitlines())
    assert {"file", "cls", "hint", "milestones", "decode"} <= set(first)
    assert first["file"] == files[0] and first["cls"] == "ready"
    assert first["milestones"][-1] == {"name": "ready", "at": "2026-11-02 09:15:00", "line_no": 29}
    assert first["decode"][0]["accept_len"] == 3.12
    assert (second["cls"], second["port"]) == ("port_in_use", 30000)


def test_plain_output_is_a_table_naming_state_and_hint():
    result = CliRunner(env={"COLUMNS": "240"}).invoke(classify_log_cmd, [str(LOGS / "l03_kv_pool_too_small.log")])
    assert result.exit_code == 1, result.output  # a fatal class
    assert "kv_pool_too_small" in result.output
    assert "--mem-fraction-static" in result.output


def test_a_missing_file_is_an_error_that_names_it():
    result = CliRunner().invoke(classify_log_cmd, ["--json", str(LOGS / "l01_ready_tp2_nextn.log"), "nope.log"])
    assert result.exit_code == 2
    assert "nope.log" in result.output
    assert result.output.startswith("Error:")


def test_a_ready_log_exits_0_and_standard_input_is_read_with_a_dash():
    text = (LOGS / "l01_ready_tp2_nextn.log").read_text()
    result = CliRunner().invoke(classify_log_cmd, ["--json", "-"], input=text)
    assert result.exit_code == 0 and json.loads(result.output)["cls"] == "ready"


def test_a_directory_or_binary_file_is_refused_with_exit_2(tmp_path):
    (tmp_path / "core").write_bytes(b"\x7fELF\0\0\0")
    for arg, why in ((str(tmp_path), "is a directory"), (str(tmp_path / "core"), "binary file")):
        result = CliRunner().invoke(classify_log_cmd, [arg])
        assert result.exit_code == 2 and why in result.output


def test_a_log_that_copytruncate_left_nul_padded_is_read_but_nuls_after_text_are_binary(tmp_path):
    padded = Path(__file__).resolve().parent / "field_cases" / "f91_copytruncate_nul_padding_ready.log"
    result = CliRunner().invoke(classify_log_cmd, ["--json", str(padded)])
    assert result.exit_code == 0 and json.loads(result.output)["cls"] == "ready"
    (tmp_path / "mixed.log").write_bytes(b"[2026-12-01 10:00:00] text\0\0\0more")
    result = CliRunner().invoke(classify_log_cmd, [str(tmp_path / "mixed.log")])
    assert result.exit_code == 2 and "binary file" in result.output


def test_a_file_that_is_no_sglang_log_says_it_found_no_sglang_lines_not_keep_waiting(tmp_path):
    readme = tmp_path / "notes.txt"
    readme.write_text("deploy notes\n- restart the box on Mondays\n- [ ] check the disks\n")
    result = CliRunner(env={"COLUMNS": "240"}).invoke(classify_log_cmd, [str(readme)])
    assert result.exit_code == 2, result.output
    assert "no_sglang_lines" in result.output and "found no SGLang lines" in result.output
    assert "[date time]" in result.output  # the hint's brackets are text, not rich markup
    assert "keep waiting" not in result.output and "starting" not in result.output
    empty_so_far = tmp_path / "server.log"
    empty_so_far.write_text("")
    assert json.loads(CliRunner().invoke(classify_log_cmd, ["--json", str(empty_so_far)]).output)["cls"] == "starting"
