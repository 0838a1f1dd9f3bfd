"""ddmin over flag changes: with a pure test function standing in for a launch, it finds exactly the trigger,
treats unresolved tests as not failing, and launches no configuration twice."""

from __future__ import annotations

from mtp_remote.search.bisect import apply_changes, ddmin, describe, flag_changes

GOOD = ["--max-running-requests", "16"]
BAD = ["--max-running-requests", "16", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
       "--disable-radix-cache", "--cuda-graph-max-bs", "8", "--mamba-scheduler-strategy", "no_buffer"]


def test_flag_changes_lists_sets_and_removals_and_apply_rebuilds_the_bad_line():
    changes = flag_changes(GOOD + ["--disable-overlap-schedule"], BAD)
    assert [describe(c) for c in changes] == [
        "--speculative-algorithm NEXTN", "--speculative-num-steps 3", "--disable-radix-cache",
        "--cuda-graph-max-bs 8", "--mamba-scheduler-strategy no_buffer", "without --disable-overlap-schedule"]
    assert apply_changes(GOOD + ["--disable-overlap-schedule"], changes) == BAD


def test_ddmin_finds_exactly_the_single_trigger_among_noise():
    changes = flag_changes(GOOD, BAD)
    seen = []

    def test(subset):
        flags = apply_changes(GOOD, subset)
        seen.append(tuple(flags))
        return "fail" if "--speculative-algorithm" in flags else "pass"

    assert [describe(c) for c in ddmin(changes, test)] == ["--speculative-algorithm NEXTN"]


def test_ddmin_finds_a_pair_that_only_fails_together():
    changes = list(range(8))
    assert ddmin(changes, lambda s: "fail" if 2 in s and 6 in s else "pass") == [2, 6]


def test_unresolved_counts_as_not_failing():
    changes = list(range(4))
    out = ddmin(changes, lambda s: "fail" if s == changes or s == [0, 1] else "unresolved")
    assert out == [0, 1]
