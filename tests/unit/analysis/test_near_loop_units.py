"""`smoke --json` reported near_loop_end_token 2052 > n_tokens 2048 (issue 30): the near loop is found on the text's
tokens, n_tokens counts the server's ids. Its positions are now in n_tokens' unit."""

from __future__ import annotations

from mtp_remote.analysis.degeneracy import analyze_text, split_tokens

TEXT = "Let me think about this. " + "".join(
    f"Step {i}: we add {i} to the total and check it again. " for i in range(60))


def test_a_near_loops_positions_are_in_the_unit_of_n_tokens():
    n_text = len(split_tokens(TEXT)[1])
    assert n_text == 846
    with_ids = analyze_text(TEXT, token_ids=list(range(806))).to_dict()  # the tokenizer merged 40 text tokens
    assert with_ids["near_loop"] and with_ids["n_tokens"] == 806
    assert (with_ids["near_loop_start_token"], with_ids["near_loop_end_token"]) == (5, 806)
    text_only = analyze_text(TEXT).to_dict()
    assert (text_only["n_tokens"], text_only["near_loop_start_token"], text_only["near_loop_end_token"]) == (
        846, 5, 846)
    assert with_ids["near_loop_fraction"] == text_only["near_loop_fraction"]  # a fraction has no unit
