"""The table parser resolves spellings as SGLang's argparse does, per release, and lints combinations."""

from __future__ import annotations

import pytest

from mtp_remote.errors import ConfigError
from mtp_remote.lint.cmdline import split_launch_command
from mtp_remote.lint.flag_table import available_versions, select_flag_table
from mtp_remote.lint.lint import lint_command

BASE = "python3 -m sglang.launch_server --model-path /models/Qwen2.5-7B-Instruct"


def test_tables_exist_for_the_field_release_and_the_newest():
    assert {"0.5.9", "0.5.23"} <= set(available_versions())


@pytest.mark.parametrize("host, table", [
    (None, "0.5.23"), ("0.5.9", "0.5.9"), ("0.5.12.post1", "0.5.10"), ("0.5.15", "0.5.13"), ("0.5.30", "0.5.23"),
    ("0.4.6", "0.5.9"),
])
def test_the_table_is_the_newest_not_newer_than_the_host(host, table):
    assert select_flag_table(host).sglang_version == table


def test_cuda_graph_max_bs_is_a_flag_in_0_5_10_and_an_ambiguous_prefix_in_0_5_23():
    cmd = f"{BASE} --cuda-graph-max-bs 16"
    old = lint_command(cmd, sglang_version="0.5.10")
    assert old.codes == [] and old.flags["cuda_graph_max_bs"] == 16
    assert lint_command(cmd).codes == ["ambiguous-flag:--cuda-graph-max-bs"]


def test_equals_form_prefix_form_and_switches_resolve():
    r = lint_command(f"{BASE} --tp=2 --mem-frac 0.8 --disable-radix --enable-metrics")
    assert r.codes == []
    assert (r.flags["tp_size"], r.flags["mem_fraction_static"]) == (2, 0.8)
    assert r.flags["disable_radix_cache"] is True and r.flags["enable_metrics"] is True


def test_env_prefix_nohup_and_redirections_are_not_flags():
    cmd = (f"CUDA_VISIBLE_DEVICES=0,1 SGLANG_ENABLE_SPEC_V2=1 nohup {BASE} --tp-size 2 "
           "> /tmp/server.log 2>&1 &")
    r = lint_command(cmd)
    assert r.codes == [] and r.flags["tp_size"] == 2
    assert r.env == {"CUDA_VISIBLE_DEVICES": "0,1", "SGLANG_ENABLE_SPEC_V2": "1"}


def test_sglang_serve_and_a_venv_python_are_launch_lines_too():
    assert split_launch_command("sglang serve --model-path /m --port 1").argv == ["--model-path", "/m", "--port", "1"]
    line = split_launch_command("setsid /opt/venv/bin/python3.12 -u -m sglang.launch_server --model /m")
    assert (line.python, line.argv) == ("/opt/venv/bin/python3.12", ["--model", "/m"])


def test_a_line_that_does_not_launch_sglang_is_a_config_error():
    with pytest.raises(ConfigError, match="not an SGLang launch line"):
        lint_command("python3 -m vllm.entrypoints.openai.api_server --model /m")


@pytest.mark.parametrize("extra, code", [
    ("--tp-size two", "invalid-value:--tp-size"),
    ("--mem-fraction-static", "invalid-value:--mem-fraction-static"),
    ("--load-format nonsense", "invalid-value:--load-format"),
    ("--disable-radix-cache=yes", "invalid-value:--disable-radix-cache"),
    ("--nnodes 2 --node-rank 0", "multi-node"),
])
def test_bad_values_and_multi_node_are_findings(extra, code):
    assert lint_command(f"{BASE} {extra}").codes == [code]


def test_a_missing_model_path_is_reported_as_argparse_would():
    assert lint_command("python -m sglang.launch_server --port 30000").codes == ["missing-required:--model-path"]


def test_an_unexpanded_variable_in_the_environment_prefix_is_found():
    r = lint_command(f"CUDA_VISIBLE_DEVICES=$GPUS {BASE}")
    assert [(f.code, f.flag) for f in r.findings] == [("unexpanded-variable", "CUDA_VISIBLE_DEVICES")]


HYBRID_SPEC = ("python3 -m sglang.launch_server --model-path /models/Qwen3.6-27B --speculative-algorithm NEXTN "
               "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4")


@pytest.mark.parametrize("version, expected", [
    ("0.5.9", []), ("0.5.10", ["hybrid-spec-radix-cache"]), ("0.5.13", ["hybrid-spec-radix-cache"]),
    ("0.5.14", []), (None, []),
])
def test_hybrid_speculation_with_radix_cache_is_flagged_only_where_sglang_refuses_it(version, expected):
    result = lint_command(HYBRID_SPEC, sglang_version=version)
    assert result.codes == expected
    if expected:
        assert result.findings[0].suggestion == "--disable-radix-cache"


def test_the_hybrid_finding_goes_away_with_the_fix_or_for_a_dense_model():
    assert lint_command(HYBRID_SPEC + " --disable-radix-cache", sglang_version="0.5.12").codes == []
    dense = HYBRID_SPEC.replace("Qwen3.6-27B", "Llama-3.1-8B")
    assert lint_command(dense, sglang_version="0.5.12").codes == []
    assert lint_command(dense, sglang_version="0.5.12",
                        architectures=("Qwen3_5ForConditionalGeneration",)).codes == ["hybrid-spec-radix-cache"]
