"""The log classifier against every labelled log of ../shared/corpus/logs, plus its streaming contract."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from mtp_remote.remote.logs import (
    READY_LINE,
    Milestone,
    classify_log,
    milestone_durations,
)
from mtp_remote.remote.signatures import SIGNATURES

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT.parent / "shared" / "corpus" / "logs"
LABELS = json.loads((LOGS / "labels.json").read_text())


def _decode_values(result) -> list[dict]:
    keys = ("accept_len", "accept_rate", "gen_throughput", "running")
    return [{k: d.to_dict()[k] for k in keys} for d in result.decode]


@pytest.mark.parametrize("name", sorted(LABELS))
def test_every_corpus_log_gets_its_labelled_class_and_details(name):
    label = LABELS[name]
    result = classify_log((LOGS / f"{name}.log").read_text())
    assert result.cls == label["cls"]
    if "milestones" in label:
        assert [m.name for m in result.milestones] == label["milestones"]
    if "hint_mentions" in label:
        assert label["hint_mentions"] in result.hint
    if "port" in label:
        assert result.port == label["port"]
    if "flag" in label:
        assert result.flag == label["flag"]
    if "decode" in label:
        assert _decode_values(result) == label["decode"]
    assert result.is_ready == (label["cls"] == "ready")
    assert result.is_fatal == (label["cls"] not in ("ready", "starting", "stopping", "stopped"))


def test_a_fatal_line_after_the_ready_line_wins_over_ready():
    result = classify_log((LOGS / "l08_watchdog_timeout.log").read_text())
    assert result.cls == "watchdog_timeout"
    assert "ready" in [m.name for m in result.milestones]
    assert result.fatal_line.endswith("Scheduler watchdog timeout (self.watchdog_timeout=300.0, self.soft=False)")


def test_a_fatal_line_before_the_ready_line_is_history():
    text = ("[2026-11-02 09:14:05 TP0] Health check failed. transient\n"
            f"[2026-11-02 09:15:00] {READY_LINE}\n")
    assert classify_log(text).cls == "ready"


def test_the_specific_cause_beats_the_generic_sigquit_that_follows_it():
    result = classify_log((LOGS / "l03_kv_pool_too_small.log").read_text())
    assert result.fatal_line.startswith("RuntimeError: Not enough memory.")
    assert "Received sigquit" not in result.fatal_line


def test_the_fatal_line_is_the_error_not_the_traceback_source_line():
    result = classify_log((LOGS / "l06_nccl_error.log").read_text())
    assert result.fatal_line.startswith("RuntimeError: NCCL error: unhandled system error")


def test_a_growing_log_moves_from_starting_to_ready_as_wait_ready_sees_it():
    lines = (LOGS / "l01_ready_tp2_nextn.log").read_text().splitlines(keepends=True)
    states = []
    for n in range(1, len(lines) + 1):
        r = classify_log("".join(lines[:n]))
        states.append((r.cls, r.last_milestone.name if r.last_milestone else None))
    assert states[0] == ("starting", None)
    assert states[-1] == ("ready", "ready")
    assert all(cls == "starting" for cls, _ in states[:-1])
    reached = [m for _, m in states if m]
    assert list(dict.fromkeys(reached)) == ["weights_loaded", "kv_cache_allocated", "cuda_graph_captured",
                                            "http_up", "ready"]


def test_milestones_carry_log_timestamps_and_line_numbers():
    result = classify_log((LOGS / "l01_ready_tp2_nextn.log").read_text())
    first = result.milestones[0]
    assert first == Milestone("weights_loaded", datetime(2026, 11, 2, 9, 14, 47), 9)
    assert result.milestones[-1].at == datetime(2026, 11, 2, 9, 15, 0)


def test_milestone_durations_are_seconds_between_consecutive_milestones():
    result = classify_log((LOGS / "l01_ready_tp2_nextn.log").read_text())
    assert milestone_durations(result.milestones) == {
        "kv_cache_allocated": 0.0, "cuda_graph_captured": 9.0, "http_up": 3.0, "ready": 1.0}
    with_start = milestone_durations(result.milestones, start=result.started_at)
    assert with_start["weights_loaded"] == 46.0


def test_old_decode_batch_lines_without_accept_rate_still_parse():
    text = ("[2025-03-01 10:00:00 TP0] Decode batch. #running-req: 1, #token: 158, token usage: 0.00, "
            "accept len: 3.25, cuda graph: True, gen throughput (token/s): 101.3, #queue-req: 0,\n")
    (stats,) = classify_log(text).decode
    assert (stats.running, stats.accept_len, stats.accept_rate, stats.gen_throughput) == (1, 3.25, None, 101.3)
    assert stats.at == datetime(2025, 3, 1, 10, 0, 0)


@pytest.mark.parametrize("line, cls", [
    ("ValueError: Model architectures ['FooForCausalLM'] are not supported for now.", "unsupported_architecture"),
    ("OSError: /models/nope is not a local folder and is not a valid model identifier listed on hub",
     "model_not_found"),
    ("[2026-11-02 09:15:00] Initialization failed. warmup error: Traceback", "warmup_failed"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "cuda_oom"),
    ("sglang serve: error: ambiguous option: --cuda-graph-max could match --cuda-graph-max-bs", "argparse_error"),
])
def test_classes_not_in_the_corpus_have_signatures_too(line, cls):
    assert classify_log(line + "\n").cls == cls


def test_a_warning_keeps_the_state_but_changes_severity_and_hint():
    text = (f"[2026-11-02 09:15:00] {READY_LINE}\n"
            "[2026-11-02 09:16:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 2\n")
    r = classify_log(text)
    assert (r.cls, r.severity) == ("ready", "warning")
    assert "--max-running-requests" in r.hint


def test_every_fatal_class_has_a_hint_that_names_an_action():
    for sig in SIGNATURES:
        assert sig.hint and "\n" not in sig.hint
        assert any(word in sig.hint for word in ("--", "stop", "restart", "rerun", "fix", "check", "add",
                                                  "upgrade", "read", "spell", "lower", "increase")), sig.cls


def test_a_four_megabyte_log_classifies_in_well_under_a_second():
    body = (LOGS / "l13_ready_then_decode_stats.log").read_text()
    decode = body.splitlines()[-1] + "\n"
    text = body + decode * (4_000_000 // len(decode))
    started = time.process_time()  # CPU seconds: a loaded CI machine stretches wall time, not this
    result = classify_log(text)
    elapsed = time.process_time() - started
    assert result.cls == "ready" and len(result.decode) > 10_000
    assert elapsed < 1.0  # ~0.2 s measured


def test_a_traceback_seen_only_up_to_its_opening_line_is_not_yet_a_verdict():
    text = (LOGS / "l03_kv_pool_too_small.log").read_text()
    opening = text[: text.index("  File ")]
    assert classify_log(opening).cls == "starting"
    assert classify_log(text[: text.index("[2026-11-02 09:14:48]")]).cls == "kv_pool_too_small"


def test_a_collector_prefixed_crlf_coloured_copy_reads_like_the_plain_log():
    plain = (LOGS / "l15_runtime_crash_after_decode.log").read_text()
    lines = plain.split("\n")[:-1]
    carried = "".join(f"2026-12-01T10:00:{i % 60:02d}.000000001Z \x1b[0;36m{ln}\x1b[0m\r\n" for i, ln in enumerate(lines))
    a, b = classify_log(plain), classify_log(carried)
    assert (b.cls, b.hint, b.fatal_line) == (a.cls, a.hint, a.fatal_line)
    assert [d.to_dict() for d in b.decode] == [d.to_dict() for d in a.decode]
    assert [(m.name, m.at, m.line_no) for m in b.milestones] == [(m.name, m.at, m.line_no) for m in a.milestones]


def test_a_log_of_several_launches_is_judged_by_its_last_with_line_numbers_of_the_whole_file():
    first = (LOGS / "l17_kv_budget_guard_names_minimum.log").read_text()
    second = (LOGS / "l01_ready_tp2_nextn.log").read_text()
    result = classify_log(first + second)
    assert result.cls == "ready"
    alone = classify_log(second)
    offset = first.count("\n")
    assert [m.line_no for m in result.milestones] == [m.line_no + offset for m in alone.milestones]
    assert classify_log(second + first).cls == "kv_pool_too_small"
