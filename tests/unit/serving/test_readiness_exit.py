"""A server that exits right after its ready line: the readiness wait may read the ready line and the exit in one
step (the log stream ends with both), before ``/health`` is asked. Its crash then says that it died after the ready
line, as the ``/health`` check's own crash does (stop 39: a three-worker run read them together once and the
hint said only "the server process exited")."""

from __future__ import annotations

import pytest

from mtp_remote.remote.logs import READY_LINE
from mtp_remote.serving.readiness import Watch

STARTUP = ("[2026-12-01 00:00:00] Load weight end. type=Qwen3ForCausalLM, avail mem=10.00 GB\n"
           "[2026-12-01 00:00:01] KV Cache is allocated. #tokens: 100000\n")


class _Lc:
    def __init__(self):
        self.said: list[str] = []

    def on_progress(self, msg: str) -> None:
        self.said.append(msg)


class _Rec:
    profile = "baseline"


@pytest.mark.parametrize("text,when,milestones", [
    (STARTUP + f"[2026-12-01 00:00:02] {READY_LINE}\n", "the server process exited after its ready line, before "
     "/health answered 200; read the log tail", ["weights_loaded", "kv_cache_allocated", "ready"]),
    (STARTUP, "the server process exited; read the log tail", ["weights_loaded", "kv_cache_allocated"]),
])
def test_an_exit_read_with_the_ready_line_says_it_died_after_it(text, when, milestones):
    lc = _Lc()
    asked = []
    outcome = Watch(lc, _Rec(), 300, lambda: asked.append(1) or True).step(text, alive=False)
    assert (outcome.kind, outcome.cause, outcome.hint) == ("crashed", "process_exited", when)
    assert asked == []  # a dead server's /health is not asked
    assert outcome.log_tail[-1] == text.splitlines()[-1]
    assert [m["name"] for m in outcome.milestones] == milestones
    assert lc.said == [f"baseline: {m} (0.0 s)" for m in milestones]
