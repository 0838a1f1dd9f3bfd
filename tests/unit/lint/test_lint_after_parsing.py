"""The lint beyond what a release's argparse table holds (issue 30): validation SGLang does after parsing, a
release newer than its table, an unknown flag's values, and the release a container image's tag names."""

from __future__ import annotations

import pytest

from mtp_remote.lint.lint import lint_command

LAUNCH = "python -m sglang.launch_server --model-path /models/Qwen3.6-27B "


@pytest.mark.parametrize("version", ["0.5.13", "0.5.23"])
def test_an_algorithm_name_sglang_refuses_after_parsing_is_an_invalid_value_with_nextn_suggested(version):
    result = lint_command(LAUNCH + "--speculative-algorithm MTP --speculative-num-steps 3", sglang_version=version)
    found = [f for f in result.findings if f.flag == "--speculative-algorithm"]
    assert [(f.code, f.suggestion) for f in found] == [("invalid-value", "NEXTN")]
    assert "Unknown speculative algorithm name" in found[0].message


@pytest.mark.parametrize("version,algo", [("0.5.13", "nextn"), ("0.5.23", "DSPARK"), ("0.5.13", "DFLASH"),
                                          ("0.5.23", "EAGLE3")])
def test_a_builtin_algorithm_of_the_release_passes(version, algo):
    result = lint_command(LAUNCH + f"--speculative-algorithm {algo}", sglang_version=version)
    assert not [f for f in result.findings if f.flag == "--speculative-algorithm"]


def test_on_the_releases_with_an_argparse_choice_list_the_table_still_decides():
    result = lint_command(LAUNCH + "--speculative-algorithm MTP", sglang_version="0.5.9")
    assert [f.code for f in result.findings if f.flag == "--speculative-algorithm"] == ["invalid-value"]


def test_the_numbers_after_an_unknown_multi_value_flag_are_its_values_not_more_findings():
    result = lint_command(LAUNCH + "--cuda-graph-bs-list 1 2 4 8 16 32 64 --tp-size 2", sglang_version="0.5.9")
    assert [f.compact for f in result.findings] == ["unknown-flag:--cuda-graph-bs-list:--cuda-graph-bs"]
    assert result.flags["tensor_parallel_size"] == 2  # --tp-size after the values was parsed as a flag


def test_a_release_newer_than_its_table_turns_a_later_releases_flag_into_a_note_and_keeps_typos():
    result = lint_command(LAUNCH + "--mamba-radix-cache-strategy no_buffer --speculative-num-stpes 3",
                          sglang_version="0.5.14")
    assert [f.compact for f in result.findings] == ["unknown-flag:--speculative-num-stpes:--speculative-num-steps"]
    assert any("--mamba-radix-cache-strategy is not in SGLang 0.5.13's table, which is older than 0.5.14" in n
               and "SGLang 0.5.23 has it" in n for n in result.notes)
    assert "0.5.13" in result.warnings[0]


@pytest.mark.parametrize("image,version", [("lmsysorg/sglang:v0.5.9", "0.5.9"),
                                           ("lmsysorg/sglang:v0.5.10-cu129", "0.5.10"),
                                           ("docker.io/lmsysorg/sglang:0.5.23", "0.5.23")])
def test_a_container_image_tag_names_the_release_the_line_is_linted_for(image, version):
    result = lint_command(f"docker run --gpus all --ipc=host {image} " + LAUNCH + "--tp-size 2")
    assert result.requested_version == version
    assert result.sglang_version == version
    assert not result.warnings
    assert any("container image tag" in n for n in result.notes)


def test_an_untagged_image_is_linted_with_the_newest_table_and_says_so():
    result = lint_command("docker run lmsysorg/sglang:latest " + LAUNCH + "--tp-size 2")
    assert result.requested_version is None
    assert "no SGLang release given" in result.warnings[0]
