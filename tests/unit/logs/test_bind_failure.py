"""uvicorn's ``[Errno 98] ... address already in use`` is fatal ``port_in_use`` whatever follows it — a ready
line (SGLang 0.5.9's warmup reached the server that holds the port), serving, a clean stop — for
``classify-log`` and for the readiness wait alike, which judge it by one signature
(``signatures.HTTP_BIND_FAILED``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtp_remote.cli.tools import classify_log_cmd
from mtp_remote.serving.readiness import Watch
from mtp_remote.remote.logs import classify_log
from mtp_remote.remote.signatures import HTTP_BIND_FAILED, SIGNATURES

CASES = Path(__file__).resolve().parent / "field_cases"
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "logs"
BOUND_ELSEWHERE = (CORPUS / "l05_http_port_in_use.log").read_text()
READY = "[2026-11-02 09:15:00] The server is fired up and ready to roll!\n"
AFTER = {
    "ready": READY,
    "ready and served": READY + '[2026-11-02 09:15:01] INFO:     127.0.0.1:50644 - "POST /generate HTTP/1.1" 200 OK\n'
             "[2026-11-02 09:15:02] Decode batch, #running-req: 1, #token: 70, token usage: 0.00, "
             "gen throughput (token/s): 178.04, #queue-req: 0\n",
    "ready then a clean stop": READY + "[2026-11-02 09:16:00] SIGTERM received. signum=None frame=None. Draining "
                               "requests and shutting down...\n[2026-11-02 09:16:01] Gracefully exiting... Remaining "
                               "number of requests 0. Remaining requests remaining_rids=[].\n",
    "a later fatal line": READY + "[2026-11-02 09:16:00] Health check failed. Server couldn't get a response\n",
}


@pytest.mark.parametrize("after", sorted(AFTER))
def test_a_failed_bind_is_port_in_use_whatever_follows(after):
    result = classify_log(BOUND_ELSEWHERE + AFTER[after])
    assert (result.cls, result.severity, result.port) == ("port_in_use", "fatal", 30000)
    assert "[Errno 98]" in result.fatal_line and "30000" in result.hint


def test_the_ready_line_alone_is_still_ready_and_an_unrelated_port_word_does_not_count():
    tail = BOUND_ELSEWHERE[BOUND_ELSEWHERE.index("[2026-11-02 09:14:59] INFO:     Started"):]
    without_bind = BOUND_ELSEWHERE.replace(tail, "") + READY
    assert classify_log(without_bind).cls == "ready"
    other = without_bind + "[2026-11-02 09:15:01] error while attempting to bind on address: see docs\n"
    assert classify_log(other).cls == "ready"  # after the ready line, and not uvicorn's Errno line


def test_the_readiness_wait_and_the_classifier_give_the_same_cause_hint_and_line():
    text = (CASES / "f26_errno98_then_ready_other_server_answered.log").read_text()

    class Lc:
        on_progress = staticmethod(lambda msg: None)

    class Rec:
        profile = "baseline"

    outcome = Watch(Lc(), Rec(), 60, lambda: True).step(text, alive=True)
    judged = classify_log(text)
    assert (outcome.kind, outcome.cause) == ("crashed", "port_in_use")
    assert (outcome.hint, outcome.fatal_line) == (judged.hint, judged.fatal_line)
    assert "30011" in outcome.hint
    assert sum(1 for s in SIGNATURES if s.anywhere) == 1 and HTTP_BIND_FAILED in SIGNATURES


def test_classify_log_says_port_in_use_with_the_port_for_ipv4_and_ipv6_binds():
    files = [str(CASES / "f26_errno98_then_ready_other_server_answered.log"),
             str(CASES / "f27_errno98_ipv6_ready_then_clean_stop.log")]
    result = CliRunner().invoke(classify_log_cmd, ["--json", *files])
    assert result.exit_code == 1, result.output  # fatal
    got = [json.loads(line) for line in result.output.splitlines()]
    assert [(o["cls"], o["severity"], o["port"]) for o in got] == [("port_in_use", "fatal", 30011),
                                                                   ("port_in_use", "fatal", 30123)]
