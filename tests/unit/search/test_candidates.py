"""Mitigation candidates: built from the corrupting profile's flags, linted per SGLang release; refused and
no-op candidates are listed as skipped with the reason, never launched."""

from __future__ import annotations

from mtp_remote.config.playbook import MitigationConfig, load_playbook
from mtp_remote.search.candidates import effective_settings, parse_flags, plan_candidates, with_flags
from tests.conftest import ROOT

PB = load_playbook(ROOT / "playbooks" / "diagnose-mtp.yaml")
MTP = PB.profiles["mtp"].flags


def plan(version, mitigations=(), flags=MTP, arch=()):
    return {c.name: c for c in plan_candidates(model_path="/models/Qwen3.6-27B", base_flags=PB.base_flags,
                                               profile_flags=flags, playbook_mitigations=mitigations,
                                               sglang_version=version, architectures=arch)}


def test_on_0_5_9_disabling_the_radix_cache_is_a_no_op_for_a_hybrid_model_and_is_skipped():
    cands = plan("0.5.9")
    assert cands["no-radix"].skipped.startswith("no-op on SGLang 0.5.9")
    assert "turns the radix cache off by itself" in cands["no-radix"].skipped
    assert cands["no-overlap"].skipped is None and cands["no-overlap"].flags[-1] == "--disable-overlap-schedule"


def test_on_0_5_10_the_same_flag_is_a_real_change_and_is_launched():
    assert plan("0.5.10")["no-radix"].skipped is None


def test_built_in_list_covers_steps_topk_mamba_overlap_graphs_backend_and_ssm_dtype():
    cands = plan("0.5.9", arch=("Qwen3_5ForConditionalGeneration",))
    assert list(cands) == ["steps-2", "steps-1", "topk-1", "mamba-extra-buffer", "mamba-no-buffer", "no-overlap",
                           "no-cuda-graph", "attn-triton", "ssm-fp32", "no-radix"]
    assert dict(parse_flags(cands["steps-1"].flags))["--speculative-num-draft-tokens"] == "2"
    assert cands["topk-1"].skipped == "no-op on SGLang 0.5.9: topk is 1 already"
    assert "auto resolves to no_buffer" in cands["mamba-no-buffer"].skipped
    assert cands["mamba-extra-buffer"].skipped is None


def test_a_dense_model_gets_no_mamba_candidates():
    cands = plan("0.5.9", arch=("Qwen3ForCausalLM",))
    assert not any(n.startswith("mamba-") or n == "ssm-fp32" for n in cands)
    assert cands["no-radix"].skipped is None  # dense: the radix cache stays on under speculation


def test_playbook_candidates_come_first_and_a_refused_one_is_skipped_with_the_lint_message():
    mits = [MitigationConfig(name="typo", flags="--speculative-num-stpes 2"),
            MitigationConfig(name="fa3-backend", flags="--attention-backend fa3"),
            MitigationConfig(name="bogus-backend", flags="--attention-backend nope")]
    cands = plan("0.5.9", mits)
    assert list(cands)[:3] == ["typo", "fa3-backend", "bogus-backend"]
    assert cands["typo"].skipped.startswith("SGLang 0.5.9 refuses it:")
    assert cands["bogus-backend"].skipped.startswith("SGLang 0.5.9 refuses it:")
    assert cands["fa3-backend"].skipped is None and cands["fa3-backend"].source == "playbook"


def test_with_flags_replaces_values_in_place_appends_new_ones_and_removes():
    flags = ("--a", "1", "--b", "--c=x")
    assert with_flags(flags, {"--a": "2", "--d": None}, remove=("--b",)) == ("--a", "2", "--c", "x", "--d")


def test_topk_one_makes_draft_tokens_follow_steps_like_sglang():
    v = effective_settings({"speculative_algorithm": "NEXTN", "speculative_num_steps": 2,
                            "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 8}, "0.5.9", False)
    assert v["speculative_num_draft_tokens"] == 3 and v["speculative_algorithm"] == "EAGLE"


def test_a_playbook_mitigation_may_not_set_the_flags_mtp_remote_owns():
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="--port"):
        MitigationConfig(name="evil", flags="--port 1")
