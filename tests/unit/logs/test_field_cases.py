"""The log classifier on field cases of our own (tests/unit/logs/field_cases): other wordings, ports, counts
and causes of the kinds the corpus teaches, plus the live-window and streaming contracts of those kinds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtp_remote.remote.logs import classify_log

CASES = Path(__file__).resolve().parent / "field_cases"
LABELS = json.loads((CASES / "labels.json").read_text())
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "logs"
NOT_FATAL = ("ready", "starting", "stopping", "stopped", "no_sglang_lines")


@pytest.mark.parametrize("name", sorted(LABELS))
def test_every_field_case_gets_its_labelled_class_and_hint(name):
    label = LABELS[name]
    result = classify_log((CASES / f"{name}.log").read_text())
    assert result.cls == label["cls"]
    assert label.get("hint_mentions", "") in result.hint
    if "hint_excludes" in label:
        assert label["hint_excludes"] not in result.hint
    if "port" in label:
        assert result.port == label["port"]
    if "flag" in label:
        assert result.flag == label["flag"]
    if "milestones" in label:
        assert [m.name for m in result.milestones] == label["milestones"]
    if "decode" in label:
        keys = ("accept_len", "accept_rate", "gen_throughput", "running")
        assert [{k: getattr(d, k) for k in keys} for d in result.decode] == label["decode"]
    assert result.is_fatal == (label["cls"] not in NOT_FATAL)


def test_every_field_case_says_where_its_wording_comes_from():
    new = [k for k in LABELS if int(k[1:k.index("_")]) >= 28]
    assert len(new) >= 60
    assert all(LABELS[k].get("source") for k in new)


def test_the_field_cases_cover_every_kind_of_issue_10():
    classes = {v["cls"] for v in LABELS.values()}
    assert {"scheduler_died", "config_error", "unknown", "port_in_use", "stopped", "drain_stuck", "stopping",
            "kv_pool_too_small", "cuda_graph_capture_failed", "nccl_error", "cuda_error", "ready"} <= classes
    assert len(LABELS) >= 20


def _window(text: str) -> str:
    """What the runner's live watcher reads: the log after the ready line."""
    return text[text.index("ready to roll!") + len("ready to roll!\n"):]


def test_in_the_live_window_a_request_error_does_not_end_the_profile_but_a_crash_does():
    served = _window((CORPUS / "l18_real_request_error_then_clean_stop.log").read_text())
    during_sampling = served[: served.index("SIGTERM")]
    assert not classify_log(during_sampling, serving=True).is_fatal
    crash = _window((CASES / "f02_crash_after_ready_assertion_no_sigquit.log").read_text())
    result = classify_log(crash, serving=True)
    assert result.cls == "scheduler_died" and "AssertionError" in result.hint


def test_a_type_error_read_as_a_window_without_the_ready_line_is_a_crash_not_a_flag_problem():
    window = (CORPUS / "l15_runtime_crash_after_decode.log").read_text()
    window = window[window.index("Scheduler hit"):]  # no Decode batch line left: only `serving` says so
    assert classify_log(window).cls == "config_error"
    assert classify_log(window, serving=True).cls == "scheduler_died"


def test_a_request_traceback_still_being_written_is_not_yet_fatal():
    text = (CORPUS / "l18_real_request_error_then_clean_stop.log").read_text()
    partial = text[: text.index("TypeError: SamplingParams")]
    assert classify_log(partial).cls == "ready"
    whole = text[: text.index("[2026-11-30 18:46:09]")]
    assert classify_log(whole).cls == "ready"


def test_the_drain_becomes_stuck_only_once_the_same_count_repeats():
    text = (CORPUS / "l19_real_drain_stuck.log").read_text()
    first = text.index("Gracefully exiting")
    one = text[: text.index("\n", first) + 1]
    assert classify_log(one).cls == "stopping"
    two = text[: text.index("\n", text.index("Gracefully exiting", first + 1)) + 1]
    assert classify_log(two).cls == "drain_stuck"


def test_an_unknown_error_followed_by_startup_progress_was_not_fatal():
    text = (CASES / "f07_unknown_traceback_at_launch.log").read_text()
    assert classify_log(text).cls == "unknown"
    later = "[2026-12-01 10:00:09 TP0] Load weight end. elapsed=4.01 s, type=Qwen3ForCausalLM\n"
    assert classify_log(text + later).cls == "starting"


def test_a_port_wait_that_ends_in_startup_progress_is_history():
    text = (CASES / "f10_internal_port_wait_still_waiting.log").read_text()
    later = "[2026-12-01 10:00:09 TP0] Load weight begin. avail mem=70.10 GB\n"
    assert classify_log(text).cls == "port_in_use"
    assert classify_log(text + later).cls == "starting"
