"""Near loops and structured content on texts of our own (tests/unit/analysis/field_texts, the corpus format):
other counters, other structures that must not be loops; and `analyze` reading inputs by their kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtp_remote.analysis.degeneracy import analyze_text, structured_spans
from mtp_remote.analysis.tokens import tokenize
from mtp_remote.cli.main import main

CASES = Path(__file__).resolve().parent / "field_texts"
LABELS = json.loads((CASES / "labels.json").read_text())
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "texts"


TEXT_CASES = sorted(k for k, v in LABELS.items() if "file" not in v)
BODY_CASES = sorted(k for k, v in LABELS.items() if "file" in v)  # .json/.jsonl: read by `analyze` as bodies


@pytest.mark.parametrize("name", TEXT_CASES)
def test_every_field_text_is_classified_as_labelled(name):
    label = LABELS[name]
    metrics = analyze_text((CASES / f"{name}.txt").read_bytes().decode("utf-8"))  # bytes: CRLF kept
    assert metrics.is_loop is label["loop"]
    assert metrics.think_closed is label["think_closed"]
    if "near_loop" in label:
        assert metrics.near_loop is label["near_loop"]


def test_every_field_body_is_read_and_classified_as_labelled_by_the_cli():
    """All .json/.jsonl cases in one `analyze --json` call, as a user runs it; a row per text, in order."""
    r = CliRunner().invoke(main, ["analyze", "--json", *[str(CASES / LABELS[k]["file"]) for k in BODY_CASES]])
    assert r.exit_code == 1, r.output  # some loop, none fails to read
    rows = _rows(r)
    want = [(k, lab) for k in BODY_CASES for lab in LABELS[k].get("rows", [LABELS[k]])]
    assert len(rows) == len(want)
    for row, (name, lab) in zip(rows, want):
        assert Path(row["file"].split("#")[0].split(":")[0]).stem == name
        got = (row["loop"], row["think_closed"], row["near_loop"])
        assert got == (lab["loop"], lab["think_closed"], lab["near_loop"]), name


@pytest.mark.parametrize(("name", "expected"), [
    # (kind, unit tokens, complete copies, start token, start char, fraction of the text's tokens)
    ("n18_unit1_loop_50_at_tail", ("tail", 1, 55, 20, 90, 55 / 75)),
    ("n20_unit2_loop_50_at_tail", ("tail", 2, 52, 8, 23, 104 / 112)),
    ("n22_unit2_run_of_60_midstream_then_recovery", ("escaped", 2, 60, 6, 25, 120 / 141)),
    ("n23_tail_loop_cut_mid_word", ("tail", 12, 5, 13, 41, 66 / 79)),
    ("n24_tail_r3_covering_33_tokens", ("tail", 12, 3, 6, 22, 36 / 42)),
    ("n26_escaped_n3_r10_then_recovery", ("escaped", 3, 10, 4, 12, 30 / 52)),
    ("n35_chinese_loop_at_tail_unclosed", ("tail", 11, 30, 17, 21, 331 / 348)),
    # fences left out between the copies: unit and copies counted on the 9 prose tokens of each copy
    ("n67_block_with_fence_repeats_then_stops", ("escaped", 9, 12, 11, 23, 313 / 336)),
])
def test_the_reported_loop_unit_repeats_start_and_fraction(name, expected):
    text = (CASES / f"{name}.txt").read_bytes().decode("utf-8")
    m = analyze_text(text)
    loop = m.loop
    got = (loop.kind, loop.unit_tokens, loop.repeats, loop.start_token, loop.start_char, loop.fraction)
    assert got[:5] == expected[:5] and got[5] == pytest.approx(expected[5])
    assert tokenize(text)[loop.start_token][1] == loop.start_char


def test_marks_belong_to_their_word_and_emoji_and_rules_may_end_in_a_carriage_return():
    assert [t for t, _ in tokenize("नहीं ❤️ 👨\u200d👩 e\u0301t 👍🏽")] == ["नहीं", "❤️", "👨\u200d", "👩", "e\u0301t", "👍", "🏽"]
    text = "a\r\n-----\r\nb\n❤️❤️❤️\n"
    assert [text[a:b] for a, b in structured_spans(text)] == ["-----\r", "❤️❤️❤️"]


def test_fences_pair_as_commonmark_pairs_them():
    text = "x\n````md\n```py\ncode\n```\n````\ny\n  ~~~\nz\n  ```\n  ~~~~\nw\n```a```\n"
    assert [text[a:b] for a, b in structured_spans(text)] == [
        "````md\n```py\ncode\n```\n````", "  ~~~\nz\n  ```\n  ~~~~"]


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


def test_every_loop_is_a_near_loop_whatever_its_unit_is_made_of():
    sentence = analyze_text((CORPUS / "t01_sentence_loop_unclosed_think.txt").read_text())
    assert sentence.is_loop and sentence.near_loop
    chars = analyze_text((CORPUS / "t02_single_char_loop_after_tool_intent.txt").read_text())
    assert chars.is_loop and chars.near_loop  # fewer than 3 distinct words in the unit: a loop all the same
    hi = analyze_text("Hi. " * 100)  # issue 22: "loop yes, near loop no" was a contradiction
    assert hi.is_loop and hi.near_loop
    assert (hi.near.unit_tokens, hi.near.repeats, hi.near.start_char) == (2, 100, 0)
    counting = analyze_text((CORPUS / "t06_healthy_counting_list.txt").read_text())
    assert not counting.is_loop and not counting.near_loop  # no loop, and no counter hides one


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
    from mtp_remote.analysis.degeneracy import text_token_ids, detect_near_loop
    from mtp_remote.analysis.tokens import split_tokens

    for path in [*sorted(CORPUS.glob("*.txt")), *sorted(CASES.glob("*.txt")), None]:
        text = path.read_text() if path else "v2 build: ok, then retry. " * 20  # a digit inside a word
        _, toks = split_tokens(text)
        assert detect_near_loop(text, toks, None, text_token_ids(toks)) == detect_near_loop(text, toks), path
