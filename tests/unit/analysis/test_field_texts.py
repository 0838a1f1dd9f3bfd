"""Near loops and structured content on texts of our own (tests/unit/analysis/field_texts, the corpus format):
other counters, other structures that must not be loops; and `analyze` reading inputs by their kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtp_remote.analysis.degeneracy import analyze_text, structured_spans, tokenize
from mtp_remote.cli import main

CASES = Path(__file__).resolve().parent / "field_texts"
LABELS = json.loads((CASES / "labels.json").read_text())
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "texts"


@pytest.mark.parametrize("name", sorted(LABELS))
def test_every_field_text_is_classified_as_labelled(name):
    label = LABELS[name]
    metrics = analyze_text((CASES / f"{name}.txt").read_text(encoding="utf-8"))
    assert metrics.is_loop is label["loop"]
    assert metrics.think_closed is label["think_closed"]
    if "near_loop" in label:
        assert metrics.near_loop is label["near_loop"]


def test_a_near_loop_reports_its_unit_repeats_start_and_fraction():
    text = (CORPUS / "t15_step_counter_loop.txt").read_text()
    m = analyze_text(text)
    assert m.near_loop and not m.is_loop
    near = m.near
    assert text[near.start_char:].startswith("Step 1: we add 2 and 2 to get 4")  # the counter is in the unit
    toks = tokenize(text)
    assert toks[near.start_token][1] == near.start_char
    assert near.unit_tokens == 19 and near.repeats >= 50 and near.fraction > 0.95
    row = m.to_dict()
    assert (row["near_loop"], row["near_loop_unit_tokens"], row["near_loop_start_char"]) == (True, 19, near.start_char)


def test_an_exact_loop_of_words_is_also_a_near_loop_but_a_character_loop_is_not():
    sentence = analyze_text((CORPUS / "t01_sentence_loop_unclosed_think.txt").read_text())
    assert sentence.is_loop and sentence.near_loop
    chars = analyze_text((CORPUS / "t02_single_char_loop_after_tool_intent.txt").read_text())
    assert chars.is_loop and not chars.near_loop  # fewer than 3 distinct words in the unit


def test_structured_spans_cover_fences_and_rule_lines_only():
    text = "intro\n```\ncode\n```\n-----\nnot a rule: --\n"
    spans = structured_spans(text)
    assert [text[a:b] for a, b in spans] == ["```\ncode\n```", "-----"]


def test_a_fenced_escaped_loop_is_left_out_even_when_token_ids_are_given():
    text = (CORPUS / "t18_code_fence_unrolled.txt").read_text()
    ids = [hash(t) % 50_000 for t, _ in tokenize(text)]
    assert not analyze_text(text, ids).is_loop


def _rows(result) -> list[dict]:
    return [json.loads(ln) for ln in result.output.splitlines() if ln.startswith("{")]


def test_analyze_reads_txt_as_text_even_when_it_is_json_and_json_files_as_bodies(tmp_path):
    as_text = tmp_path / "structured.txt"
    as_text.write_text('{"choices": [{"message": {"content": "hello there"}}]}')
    body = tmp_path / "body.json"
    body.write_text('{"choices": [{"message": {"content": "hello there"}}]}')
    r = CliRunner().invoke(main, ["analyze", "--json", str(as_text), str(body)])
    assert r.exit_code == 0, r.output
    rows = {Path(row["file"]).name: row for row in _rows(r)}
    assert rows["structured.txt"]["n_tokens"] > rows["body.json"]["n_tokens"] == 2


def test_analyze_reports_each_bad_file_and_still_analyses_the_others(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("A short healthy answer.")
    bad_json = tmp_path / "broken.json"
    bad_json.write_text("{not json")
    bad_lines = tmp_path / "samples.jsonl"
    bad_lines.write_text('{"text": "ok"}\nnot json\n')
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"\x00\x01\x02")
    missing = tmp_path / "missing.txt"
    files = [str(p) for p in (bad_json, good, bad_lines, binary, missing)]
    r = CliRunner().invoke(main, ["analyze", "--json", *files])
    assert r.exit_code == 2
    rows = _rows(r)
    errors = {Path(row["file"]).name: row["error"] for row in rows if "error" in row}
    assert set(errors) == {"broken.json", "samples.jsonl", "blob.txt", "missing.txt"}
    assert "line 2" in errors["samples.jsonl"] and "no such file" in errors["missing.txt"]
    analysed = [row for row in rows if "error" not in row]
    assert [Path(row["file"]).name for row in analysed] == ["good.txt"] and analysed[0]["loop"] is False


def test_plain_analyze_shows_the_table_and_a_red_line_per_bad_file(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text((CORPUS / "t16_check_counter_loop.txt").read_text())
    r = CliRunner().invoke(main, ["analyze", str(good), str(tmp_path / "nope.txt")])
    assert r.exit_code == 2
    assert "nope.txt: no such file" in r.output and "near loop" in r.output


def test_the_fast_near_loop_path_agrees_with_the_plain_definition_on_every_text():
    from mtp_remote.analysis.degeneracy import _ids_of, _split, detect_near_loop

    for path in [*sorted(CORPUS.glob("*.txt")), *sorted(CASES.glob("*.txt")), None]:
        text = path.read_text() if path else "v2 build: ok, then retry. " * 20  # a digit inside a word
        _, toks = _split(text)
        assert detect_near_loop(text, toks, None, _ids_of(toks)) == detect_near_loop(text, toks), path
