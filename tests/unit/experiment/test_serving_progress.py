"""The evidence the hang watch reads besides the log (issue 30): responses completed and streamed output that grew;
a hang's hint says what was in flight."""

from __future__ import annotations

from mtp_remote.experiment.progress import ServingProgress
from mtp_remote.experiment.watch import stalled


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_streamed_growth_and_answers_are_progress_and_a_stall_says_what_was_in_flight():
    clock = Clock()
    p = ServingProgress(clock)
    a, b, c = p.sent(), p.sent(), p.sent()
    clock.t = 105.0
    p.streamed(a, 48)
    assert p.idle_s() == 0.0 and p.last_streamed == 105.0
    clock.t = 106.0
    p.streamed(a, 48)  # no growth: not progress
    assert p.idle_s() == 1.0
    p.ended(c, answered=False)  # an error of ours or the connection's: not the server's progress
    assert p.completed == 0 and p.idle_s() == 1.0
    clock.t = 110.0
    p.ended(b, answered=True)
    assert p.completed == 1 and p.idle_s() == 0.0
    clock.t = 140.0
    assert p.in_flight() == ("1 request(s) in flight, sent 40 s ago, 48 tokens streamed each; 1 response(s) "
                             "completed, the last 30 s ago; streamed output last grew 35 s ago")
    d = p.sent()
    clock.t = 150.0
    p.streamed(d, 300, "characters")
    clock.t = 160.0
    assert p.in_flight().startswith("2 request(s) in flight, sent 20-60 s ago, 48-300 tokens streamed each;")
    hint = stalled(300, p)["hint"]
    assert hint.startswith("the server wrote nothing and answered or streamed nothing for 300 s while requests were "
                           "in flight (2 request(s) in flight, sent 20-60 s ago")
    assert "or the host is too loaded to make progress" in hint


def test_a_stall_before_any_answer_says_so():
    p = ServingProgress(Clock())
    assert p.in_flight() == "no request in flight; no response completed yet"
