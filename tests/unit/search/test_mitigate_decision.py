"""The operator's decision in ``mitigate``: the baseline (speculation off) is a row of the ranking; when no
loop-free cure is faster than it beyond doubt, the recommendation is "run without speculation" with the
figures; a candidate that crashed is ``crashed:<cause>`` and, when crashes are the problem, the sentence says
so instead of "No candidate is loop-free"."""

from __future__ import annotations

import numpy as np

from mtp_remote.analysis.speed import LogSpeed
from mtp_remote.search.mitigate import CandidateResult, baseline_row
from mtp_remote.search.mitigation_report import table_rows
from mtp_remote.search.ranking import pick_best, rank_results, recommendation, speed_fields
from mtp_remote.experiment.runner import ProfileRun

RNG = np.random.default_rng(11)
BASE = 100 * RNG.lognormal(0, 0.1, 16)


def _cure(name, scale, changes=1):
    ls, bls = LogSpeed.of(scale * RNG.lognormal(0, 0.1, 16)), LogSpeed.of(BASE)
    f = speed_fields(ls, bls)
    return CandidateResult(name=name, change=f"change {name}", source="built-in", status="loop-free", loops=0, n=16,
                           base_loops=0, base_n=16, flag_changes=changes, log_speed=ls.to_dict(),
                           base_log_speed=bls.to_dict(), speed_vs_baseline=f["speed_vs_baseline"],
                           speed_ci=f["speed_ci"], tokens_per_s=scale)


def _base():
    judged = [{"base_loops": 0, "base_n": 16, "base_log_speed": LogSpeed.of(BASE).to_dict(),
               "base_tokens_per_s": float(np.mean(BASE))}]
    return baseline_row("baseline", judged, None, ("--speculative-algorithm", "NEXTN"))


def _doc(rows):
    ranked = rank_results(rows)
    best = pick_best(ranked)
    doc = {"profile": "mtp", "host": "h", "run_id": "20261202-100000-abcd", "rows": [r.to_dict() for r in ranked],
           "best": best.name if best else None}
    doc["recommendation"] = recommendation(doc)
    return doc


def test_the_baseline_is_a_ranked_row_at_1x():
    doc = _doc([_cure("no-overlap", 150), _base()])
    names = [(r["name"], r["rank"]) for r in doc["rows"]]
    assert names[:2] == [("no-overlap", 1), ("baseline", 2)]
    base = next(r for r in doc["rows"] if r["name"] == "baseline")
    assert base["status"] == "baseline" and base["speed_vs_baseline"] == 1.0 and base["change"] == "no speculation"
    row = next(r for r in table_rows(doc) if r[1] == "baseline")
    assert row[3] == "0/16 (no speculation)" and row[-1] == "baseline: speculation off"
    assert doc["recommendation"].startswith("Best: **no-overlap**")


def test_when_no_cure_beats_the_baseline_the_recommendation_is_to_run_without_speculation_with_the_figures():
    doc = _doc([_cure("no-overlap", 89), _cure("no-cuda-graph", 70), _base()])
    assert doc["rows"][0]["name"] == "baseline" and doc["rows"][0]["rank"] == 1
    text = doc["recommendation"]
    assert text.startswith("Recommendation: **run without speculation** (the baseline profile, ")
    assert "no-overlap (change no-overlap), runs at 0." in text and "x [" in text
    assert "slower than turning speculation off" in text and "89 tok/s" in text


def test_a_cure_not_distinguishably_faster_is_no_reason_to_keep_speculation():
    doc = _doc([_cure("no-overlap", 101), _base()])
    assert "run without speculation" in doc["recommendation"]


def test_crashed_candidates_are_named_as_crashes_not_as_no_loop_free_cure():
    crashed = CandidateResult(name="no-overlap", change="c", source="built-in", status="crashed",
                              verdict="crashed:cuda_error", evidence="a CUDA kernel failed")
    failed = CandidateResult(name="no-cuda-graph", change="c", source="built-in", status="crashed",
                             verdict="hung:stalled")
    text = _doc([crashed, failed, _base()])["recommendation"]
    assert "No candidate is loop-free" not in text
    assert "every one that was tried failed (no-overlap: crashed:cuda_error, no-cuda-graph: hung:stalled)" in text
    assert "`mtp-remote bug-report 20261202-100000-abcd`" in text and "run without speculation" in text


def test_a_profile_that_crashed_after_ready_is_a_crash_for_every_workflow():
    pr = ProfileRun(profile="mtp", speculative=True, argv_masked=[], outcome={"kind": "ready"}, cause="cuda_error",
                    hint="h", crashed={"cause": "cuda_error", "hint": "h", "fatal_line": "x"})
    assert pr.failure() == ("cuda_error", "h", True)
    never = ProfileRun(profile="mtp", speculative=True, argv_masked=[], outcome={"kind": "crashed"}, cause="cuda_oom")
    assert never.failure() == ("cuda_oom", "", False)
    ok = ProfileRun(profile="mtp", speculative=True, argv_masked=[], outcome={"kind": "ready"})
    assert ok.failure() is None


def test_mitigation_md_offers_the_cures_flags_only_as_the_fallback_when_speculation_off_wins():
    from mtp_remote.search.mitigation_report import render_markdown

    doc = _doc([_cure("no-overlap", 89), _base()])
    doc.update(simulated=False, facts={}, reused=None, flags=None)
    for r in doc["rows"]:
        r.setdefault("flags", [])
    md = render_markdown({**doc, "profile": "mtp", "host": "h"})
    assert "run without speculation" in md
    assert "no-overlap's profile flags, if speculation must stay on: `" in md
