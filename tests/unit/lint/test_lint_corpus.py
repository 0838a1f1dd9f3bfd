"""Every labelled launch line of ../shared/corpus/commands gives its labelled flags and exactly its findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtp_remote.lint.lint import lint_command

COMMANDS = json.loads(
    (Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "commands" / "commands.json").read_text())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_corpus_command_parses_to_its_labelled_flags_and_findings(name):
    case = COMMANDS[name]
    result = lint_command(case["cmd"], sglang_version=case.get("sglang_version"))
    for dest, value in case["flags"].items():
        assert dest in result.flags, dest
        assert result.flags[dest] == value, dest
    assert result.codes == case["findings"]


def test_the_corpus_is_judged_by_the_newest_table_which_is_0_5_23():
    result = lint_command(COMMANDS["c03_prefix_spellings"]["cmd"])
    assert result.sglang_version == "0.5.23"
    assert result.source == "table"


def test_json_shape_has_flags_and_finding_objects():
    out = lint_command(COMMANDS["c07_misspelled_flag"]["cmd"]).to_dict()
    assert out["findings"] == [{
        "code": "unknown-flag", "flag": "--speculative-num-stpes", "suggestion": "--speculative-num-steps",
        "message": "SGLang 0.5.23 has no flag --speculative-num-stpes: did you mean --speculative-num-steps?"}]
    assert out["flags"]["speculative_algorithm"] == "NEXTN"
    json.dumps(out)
