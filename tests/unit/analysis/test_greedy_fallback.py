"""A speculative server that verifies greedily at T > 0 (SGLang without its tree speculative sampling kernel: a
CPU, an AMD/HIP build) is not drawn from the baseline's distribution there: its T > 0 cells are left out of the
comparison, and the verdict says why, quoting the server's own log line. The line is SGLang 0.5.9's
(``speculative/eagle_info.py:304``), as real SGLang on this CPU logs it."""

from __future__ import annotations

from mtp_remote.analysis.diagnosis import diagnose
from mtp_remote.remote.logs import greedy_verification_fallback

#: As SGLang 0.5.9 on a CPU wrote it at T = 0.7 under NEXTN (one line: the two string literals are joined).
LINE = ("[2026-12-03 09:41:07] WARNING eagle_info.py:304: Tree speculative sampling kernel unavailable (likely "
        "AMD/HIP build). Falling back to greedy verification.")
HEALTHY = "<think>\nThe user's question is 2+2. I add 2 and 2. The answer is 4.\n</think>\n\n4"
LOOP = "<think>\nThe user's question is 2+2. " + "2 plus 4 plus 4 plus " * 30


def _sample(profile: str, i: int, text: str, t: float) -> dict:
    return {"profile": profile, "temperature": t, "prompt_id": f"p{i % 4}", "sample_index": i // 4,
            "seed": 1234 + i // 4, "text": text, "finish_reason": "length", "completion_tokens": len(text.split()),
            "latency_s": 1.0, "spec_verify_ct": 5 if profile == "nextn" else None, "output_ids": None,
            "error": None}


def test_the_fallback_line_is_found_in_a_log_and_absent_from_a_healthy_one():
    log = f"[2026-12-03 09:40:55] The server is fired up and ready to roll!\n{LINE}\n[2026-12-03 09:41:08] Decode batch"
    assert greedy_verification_fallback(log) == LINE
    assert greedy_verification_fallback(log.replace(LINE, "")) is None


def test_a_t_above_0_arm_that_verified_greedily_is_not_compared_and_the_verdict_says_why():
    # At T = 0.7 the greedy speculative arm loops on 14/16 samples, the sampled baseline on none: read as loops
    # this is spec-corrupts-output; it is not comparable.
    samples = ([_sample("baseline", i, HEALTHY, 0.7) for i in range(16)]
               + [_sample("nextn", i, LOOP if i < 14 else HEALTHY, 0.7) for i in range(16)])
    profiles = {"baseline": False, "nextn": True}
    read_as_loops = diagnose(baseline="baseline", profiles=profiles, samples=samples).verdicts[0]
    assert read_as_loops.kind == "spec-corrupts-output"
    (v,) = diagnose(baseline="baseline", profiles=profiles, samples=samples,
                    greedy_fallback={"nextn": LINE}).verdicts
    assert v.kind == "inconclusive" and v.comparisons == []
    assert "T > 0 not compared: the speculative server verified its drafts greedily" in v.evidence
    assert LINE in v.evidence and any("argmax" in w for w in v.warnings)


def test_its_greedy_cell_is_still_judged():
    samples = ([_sample("baseline", i, HEALTHY, t) for i in range(16) for t in (0.0, 0.7) if t > 0 or i < 4]
               + [_sample("nextn", i, HEALTHY, t) for i in range(16) for t in (0.0, 0.7) if t > 0 or i < 4])
    (v,) = diagnose(baseline="baseline", profiles={"baseline": False, "nextn": True}, samples=samples,
                    greedy_fallback={"nextn": LINE}).verdicts
    assert [c["temperature"] for c in v.comparisons] == [0.0]
    assert "T > 0 not compared" in v.evidence


def test_a_lossless_verdict_leads_with_the_greedy_loops_when_only_the_speculative_arm_loops():
    """The real-hybrid-loop host's shape: greedy, 8 prompts with answers; NEXTN loops on 3 and answers wrong on
    the rest, the baseline and its A/A arm answer right. The greedy loop counts lead the evidence."""
    wrong = HEALTHY.replace("is 4.\n</think>\n\n4", "is 7.\n</think>\n\n7")

    def arm(profile, texts):
        return [dict(_sample(profile, i, text, 0.0), prompt_id=f"p{i}", sample_index=0, seed=1234)
                for i, text in enumerate(texts)]

    samples = (arm("baseline", [HEALTHY] * 8) + arm("aa", [HEALTHY] * 8)
               + arm("nextn", [LOOP] * 3 + [wrong] * 5))
    (v,) = diagnose(baseline="baseline", profiles={"baseline": False, "aa": False, "nextn": True}, samples=samples,
                    calibration_profile="aa", expected={f"p{i}": "4" for i in range(8)}).verdicts
    assert v.kind == "spec-corrupts-output", v.evidence
    assert v.evidence.startswith("loops: spec 3/8 vs baseline 0/8 degenerate at T=0 (greedy: the same prompts; "
                                 "3 with a settled loop where the baseline's output of the prompt has none); "), \
        v.evidence
    assert "expected answers: spec 0/8 right vs baseline 8/8" in v.evidence
