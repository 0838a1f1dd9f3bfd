"""Issue 30: log silence is not a hang while requests make progress.

The real hybrid host ended ``hung:stalled`` at load 9-11 although it was serving: SGLang writes one ``Decode
batch`` line per ``--decode-log-interval`` (40) steps and a loaded batch took minutes. Here the sim (a real
process) logs no decode line at all (``--decode-log-interval 100000``) and its requests take several times
``timeouts.stall_s`` while their tokens stream: the run must not call that a hang. A server that really stops
(``hang_after``) is still caught, and its hint says what was in flight.
"""

from __future__ import annotations

import pytest
import yaml

from mtp_remote.experiment import diagnose as api
from tests.conftest import ROOT
from tests.integration.test_scenarios import FAST_START, write_config

pytestmark = pytest.mark.sim
STALL_S = 0.6
QUIET = " --decode-log-interval 100000"  # no Decode batch line while sampling: only the Prefill line at the start


def _flags() -> str:
    return yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())["base_flags"] + QUIET


def test_streaming_requests_on_a_silent_log_are_not_a_hang(tmp_path):
    # time scale 0.3: a decode step of 9 ms, a request of up to 512 tokens several seconds: the log says nothing
    # for longer than stall_s while every request streams its tokens
    # (its start fast: FAST_START)
    inv, pb = write_config(tmp_path, None, time_scale="0.3", startup_scale=FAST_START, samples=1, max_tokens=512,
                           temperatures=[0.7], concurrency=4, base_flags=_flags(),
                           timeouts={"stall_s": STALL_S, "drain_s": 2})
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs")
    kinds = {v["profile"]: v["kind"] for v in res.summary["verdicts"]}
    assert not any(k.startswith("hung") for k in kinds.values()), res.summary["verdicts"]
    base = next(p for p in res.summary["profiles"] if p["profile"] == "baseline")
    assert base.get("cause") is None, base
    log = (res.run_dir / "logs" / "baseline.log").read_text()
    assert "Decode batch" not in log and "Prefill batch" in log  # the log was silent while it sampled
    split = {p["profile"]: p for p in res.summary["time_split"]["profiles"]}
    assert split["baseline"]["sampling_s"] > 2 * STALL_S, split["baseline"]  # silent for longer than stall_s


def test_a_server_that_stops_answering_is_a_hang_that_says_what_was_in_flight(tmp_path):
    inv, pb = write_config(tmp_path, "hang_after=2", time_scale="0.3", startup_scale=FAST_START, samples=1,
                           max_tokens=512, temperatures=[0.7], concurrency=4, base_flags=_flags() + " --watchdog-timeout 3000",
                           timeouts={"stall_s": STALL_S, "drain_s": 2, "request_s": 120})
    with pytest.raises(Exception) as e:  # the baseline hangs: no baseline, no run (exit 2)
        api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs")
    said = str(e.value)
    assert getattr(e.value, "exit_code", None) == 2 and "stalled" in said, said
    # two answered, the other two in flight with what they had streamed when the server stopped
    assert "2 request(s) in flight, sent " in said and " tokens streamed each; 2 response(s) completed, the last " \
        in said, said
    assert "or the host is too loaded to make progress" in said, said
