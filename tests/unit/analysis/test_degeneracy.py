"""Degeneracy metrics against the labelled field corpus and hand-made edge cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtp_remote.analysis.degeneracy import analyze_text, think_block
from mtp_remote.analysis.tokens import tokenize

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "texts"
LABELS = json.loads((CORPUS / "labels.json").read_text())


@pytest.mark.parametrize("name", sorted(LABELS))
def test_every_corpus_text_is_classified_as_labelled(name):
    metrics = analyze_text((CORPUS / f"{name}.txt").read_text(encoding="utf-8"))
    assert metrics.is_loop is LABELS[name]["loop"]
    assert metrics.think_closed is LABELS[name]["think_closed"]


def test_sentence_loop_reports_its_unit_repeats_and_start():
    text = (CORPUS / "t01_sentence_loop_unclosed_think.txt").read_text()
    loop = analyze_text(text).loop
    assert (loop.kind, loop.unit_tokens) == ("tail", 10)  # The user ' s question is 2 + 2 .
    assert loop.repeats >= 300
    assert text[loop.start_char:].startswith(". The user's question is 2+2.")
    assert loop.fraction > 0.99


def test_midstream_loop_that_recovers_is_an_escaped_loop():
    text = (CORPUS / "t14_midstream_loop_then_recovery.txt").read_text()
    loop = analyze_text(text).loop
    assert loop.kind == "escaped" and loop.repeats == 25
    assert loop.end_token < analyze_text(text).n_tokens


def test_tokenize_splits_words_cjk_punctuation_and_newlines_with_offsets():
    assert tokenize("Hi, 世界!\n  x_y 🙂") == [
        ("Hi", 0), (",", 2), ("世", 4), ("界", 5), ("!", 6), ("\n", 7), ("x", 10), ("_", 11), ("y", 12),
        ("🙂", 14)]


@pytest.mark.parametrize("text", [
    "Done. Done. Done.",
    "a b c " * 9,                            # 9 copies in the middle of a text: below 10
    "intro words here " + "x y z " * 9 + "and then the text goes on normally",
    "-" * 40,                                 # a markdown rule: unit of one token, 40 < 50 copies
    "Stay a while, stay a while.\n" * 2,
])
def test_regular_structure_is_not_a_loop(text):
    assert analyze_text(text).loop is None


def test_ten_copies_of_a_three_token_unit_anywhere_is_an_escaped_loop():
    text = "intro words here " + "x y z " * 10 + "and then the text goes on normally"
    loop = analyze_text(text).loop
    assert (loop.kind, loop.unit_tokens, loop.repeats, loop.start_token) == ("escaped", 3, 10, 3)


def test_short_tail_needs_thirty_two_tokens():
    assert analyze_text("start " + "a b c " * 10).loop.kind == "escaped"       # 30 tokens: r >= 10 only
    assert analyze_text("start " + "a b c d " * 7).loop is None              # 28 tokens, r = 7
    assert analyze_text("start " + "a b c d " * 8).loop.kind == "tail"       # 32 tokens, r = 8


def test_fifty_copies_of_any_unit_is_a_loop_and_the_unit_is_the_smallest_period():
    loop = analyze_text("Wait" + "!" * 50).loop
    assert (loop.unit_tokens, loop.repeats) == (1, 50)
    assert analyze_text("Wait" + "!" * 49).loop is None


def test_tail_cut_inside_a_word_still_counts_as_a_partial_copy():
    text = "so " + "the answer is four . " * 8 + "the ans"
    loop = analyze_text(text).loop
    assert loop.kind == "tail" and loop.end_token == analyze_text(text).n_tokens


def test_loops_are_detected_on_token_ids_when_given():
    ids = list(range(100, 140)) + [7, 8, 9, 10] * 12
    m = analyze_text("a healthy looking text", token_ids=ids)
    assert (m.n_tokens, m.loop.unit_tokens, m.loop.repeats, m.loop.start_token) == (88, 4, 12, 40)


def test_long_period_loops_are_found_through_anchors():
    unit = [f"w{i}" for i in range(150)]
    text = "preface " + " ".join(unit * 4)
    loop = analyze_text(text).loop
    assert (loop.kind, loop.unit_tokens, loop.repeats, loop.start_token) == ("tail", 150, 4, 1)


@pytest.mark.parametrize("text, expected", [
    ("<think>\nok\n</think>\nanswer", (True, 11, 19)),
    ("reasoning without the opening tag</think>answer", (True, 33, 41)),
    ("<think>\nstill thinking", (False, 22, 22)),
    ("plain answer", (None, 0, 0)),
])
def test_think_block_handles_open_qwen3_and_missing_tags(text, expected):
    assert think_block(text) == expected


def test_reasoning_and_answer_token_counts_exclude_the_tags():
    m = analyze_text("<think>\nTwo plus two.\n</think>\n\nFour.")
    assert (m.reasoning_tokens, m.answer_tokens) == (6, 4)


def test_seq_rep_distinct_and_compression_follow_their_definitions():
    m = analyze_text("a b c d a b c d")  # 5 4-grams, 4 unique
    assert m.seq_rep_4 == pytest.approx(1 - 4 / 5)
    assert m.distinct_1 == pytest.approx(4 / 8) and m.distinct_2 == pytest.approx(4 / 7)
    assert m.longest_repeated_span == 4
    empty = analyze_text("")
    assert (empty.n_tokens, empty.seq_rep_4, empty.distinct_1, empty.loop) == (0, 0.0, 1.0, None)


def test_to_dict_is_flat_with_nulls_without_a_loop():
    d = analyze_text("The answer is 4.").to_dict()
    assert d["loop"] is False and d["loop_start_char"] is None and d["loop_unit_tokens"] is None
    assert json.dumps(d)
    looped = analyze_text("x" + " a b c" * 20).to_dict()
    assert looped["loop"] is True and looped["loop_kind"] == "tail" and looped["loop_start_char"] == 2


def test_a_counter_loop_with_two_distinct_words_repeated_150_times_is_a_near_loop():
    text = "<think>\n" + " ".join(f"Check {i}: {i}+{i} = {2 * i}, ok." for i in range(1, 151))
    m = analyze_text(text)
    assert m.loop is None and m.near_loop and m.near.repeats == 150


def test_paraphrase_cycling_at_the_end_is_a_near_loop_and_a_counting_list_is_not():
    import random

    rng = random.Random(0)
    says = ["The user asks about 2+2.", "So the question is 2+2.", "They want to know 2+2.",
            "The question here is about 2+2."]
    cycling = analyze_text("<think>\n" + " ".join(rng.choice(says) for _ in range(150)))
    assert cycling.loop is None and cycling.near_loop
    assert not analyze_text(", ".join(str(i) for i in range(400))).near_loop
