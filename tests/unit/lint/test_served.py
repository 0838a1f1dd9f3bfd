"""Lint of a running server from what it reports (/server_info, /get_model_info): its launch line read back (the
dests that differ from the release's defaults, in flag order, secrets masked, host and port left out) and the same
rules as lint-command applied to it."""

from __future__ import annotations

from mtp_remote.lint.served import lint_served

INFO = {"version": "0.5.9", "model_path": "/models/Qwen3.6-27B", "tp_size": 2, "host": "0.0.0.0", "port": 30000,
        "speculative_algorithm": "NEXTN", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4, "reasoning_parser": "qwen3", "api_key": None,
        "mem_fraction_static": 0.88, "disable_radix_cache": False, "internal_states": [{}], "simulated": True}
HYBRID = {"architectures": ["Qwen3_5ForConditionalGeneration"]}


def test_the_served_flags_read_back_as_a_launch_line_and_are_linted():
    result, argv = lint_served(INFO, HYBRID)
    assert argv == ["--model-path", "/models/Qwen3.6-27B", "--mem-fraction-static", "0.88", "--tensor-parallel-size",
                    "2", "--reasoning-parser", "qwen3", "--speculative-algorithm", "NEXTN",
                    "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
                    "4"]
    assert result.codes == ["public-bind-without-api-key"] and result.source == "server_info"
    assert result.sglang_version == "0.5.9" and not result.warnings
    assert any("radix cache off by itself" in n for n in result.notes)  # the hybrid + speculation note


def test_a_served_api_key_is_masked_and_quiets_the_bind_finding():
    result, argv = lint_served({**INFO, "api_key": "sk-live-123"}, HYBRID)
    assert "sk-live-123" not in repr(result) and "sk-live-123" not in argv
    assert argv[argv.index("--api-key") + 1] == "***" and result.flags["api_key"] == "***"
    assert "public-bind-without-api-key" not in result.codes


def test_a_server_without_a_version_is_linted_with_the_newest_table_and_says_so():
    result, _ = lint_served({"model_path": "/m"})
    assert result.requested_version is None
    assert result.warnings == [f"the server reports no SGLang version: its flags are read with SGLang "
                               f"{result.sglang_version}'s flag table, the newest we have"]
