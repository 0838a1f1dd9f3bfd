"""A flag one release lacks, explained by the other releases' tables: renamed, removed, or not there yet."""

from __future__ import annotations

from mtp_remote.lint.flag_history import explain_unknown
from mtp_remote.lint.flag_table import load_flag_table


def test_a_choice_flag_that_kept_its_choices_under_a_new_name_is_a_rename():
    h = explain_unknown("--mamba-scheduler-strategy", load_flag_table("0.5.23"))
    assert h.renamed_to == h.suggest == "--mamba-radix-cache-strategy"
    assert h.releases == ("0.5.9", "0.5.10", "0.5.13")


def test_a_unique_prefix_of_the_old_name_resolves_as_argparse_would_and_is_a_rename_too():
    assert explain_unknown("--mamba-scheduler", load_flag_table("0.5.23")).renamed_to == "--mamba-radix-cache-strategy"


def test_a_switch_with_a_merely_similar_new_name_is_never_called_renamed():
    h = explain_unknown("--enable-deepep-waterfill", load_flag_table("0.5.23"))
    assert h.renamed_to is None and h.suggest == "--enable-waterfill"
    assert "removed or renamed after SGLang 0.5.13" in h.message
    h = explain_unknown("--elastic-ep-rejoin", load_flag_table("0.5.23"))
    assert h.renamed_to is None and h.suggest is None


def test_a_misspelling_no_release_knows_has_no_history():
    assert explain_unknown("--speculative-num-stpes", load_flag_table("0.5.23")) is None


def test_a_removed_flag_is_suggested_the_replacement_sglang_names_not_the_nearest_spelling():
    """Issue 30: `--hybrid-kvcache-ratio` on 0.5.23 was suggested `--hicache-ratio` (a hierarchical-cache setting);
    SGLang's own deprecation text names `--swa-full-tokens-ratio`."""
    from mtp_remote.lint.lint import lint_command

    res = lint_command("python -m sglang.launch_server --model-path /m --hybrid-kvcache-ratio 0.5 "
                       "--prefill-round-robin-balance", sglang_version="0.5.23")
    found = {f.flag: f for f in res.findings}
    ratio = found["--hybrid-kvcache-ratio"]
    assert ratio.suggestion == "--swa-full-tokens-ratio"
    assert "SGLang names --swa-full-tokens-ratio as its replacement" in ratio.message
    # deprecated as a no-op with no replacement named: no look-alike is offered as one
    balance = found["--prefill-round-robin-balance"]
    assert balance.suggestion is None
    assert balance.message.endswith("SGLang had deprecated it (a no-op in 0.5.9-0.5.13) without naming a "
                                    "replacement: drop it")
