"""The loop stop on sim runs (local transport, the sim as a real process): the same playbook and seeds with and
without it give every sample the same loop label and every profile the same verdict, each stopped output is the
start of the output that ran on, fewer tokens are generated, and the server holds no request when it is stopped."""

from __future__ import annotations

import json
import re

import pytest

from mtp_remote.experiment import diagnose as api
from mtp_remote.analysis.settled import LOOP_STOP
from mtp_remote.analysis.stopping import is_degenerate_record
from tests.integration.test_scenarios import write_config

pytestmark = pytest.mark.sim


def _samples(run_dir) -> dict[tuple, dict]:
    rows = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    return {(r["profile"], r["temperature"], r["prompt_id"], r["sample_index"]): r for r in rows}


def test_with_and_without_the_loop_stop_labels_and_verdicts_are_the_same(tmp_path):
    inv, pb = write_config(tmp_path, "state_leak", samples=3, temperatures=[0.0, 0.7], max_tokens=1024)
    runs = tmp_path / "runs"
    stopped = api.diagnose(inventory=inv, playbook=pb, runs_dir=runs)
    full = api.diagnose(inventory=inv, playbook=pb, runs_dir=runs, overrides={"stop_on_loop": False})

    a, b = _samples(stopped.run_dir), _samples(full.run_dir)
    assert a.keys() == b.keys()
    n_stopped = 0
    for key, s in a.items():
        f = b[key]
        assert s["metrics"]["loop"] == f["metrics"]["loop"], key
        assert is_degenerate_record(s["metrics"], s["finish_reason"]) == is_degenerate_record(
            f["metrics"], f["finish_reason"]), key
        if s["finish_reason"] == LOOP_STOP:
            n_stopped += 1
            assert key[1] > 0  # greedy samples run to their end
            assert f["text"].startswith(s["text"]) and f["output_ids"][:len(s["output_ids"])] == s["output_ids"]
            stop = s["loop_stop"]
            assert stop["at_tokens"] == s["completion_tokens"] < f["completion_tokens"]
            assert stop["saved_tokens"] == 1024 - s["completion_tokens"] and stop["aborted"] is True
        else:
            assert s["text"] == f["text"], key
    assert n_stopped >= 4

    assert [v["kind"] for v in stopped.summary["verdicts"]] == [v["kind"] for v in full.summary["verdicts"]] == [
        "spec-corrupts-output"]
    gen_a, gen_b = stopped.summary["generated_tokens"], full.summary["generated_tokens"]
    assert gen_a < 0.8 * gen_b and stopped.summary["tokens_saved"] >= n_stopped * 100
    assert stopped.summary["loop_stop"]["loop_stops"] == n_stopped and full.summary["loop_stop"]["loop_stops"] == 0
    print(f"generated tokens with the loop stop {gen_a}, without {gen_b} ({gen_a / gen_b:.2f}x); "
          f"wall {stopped.summary['duration_s']} s vs {full.summary['duration_s']} s")

    cells = {(c["profile"], c["temperature"]): c for c in stopped.summary["cells"]}
    assert cells[("mtp", 0.7)]["loop_stops"] == sum(1 for k, s in a.items() if k[0] == "mtp" and
                                                     s["finish_reason"] == LOOP_STOP)
    # the aborted requests were gone before each stop: no drain waited on a request
    for p in stopped.summary["profiles"]:
        log = (stopped.run_dir / "logs" / f"{p['profile']}.log").read_text()
        assert not re.search(r"Remaining number of requests [1-9]", log), p["profile"]
        if p["loop_stops"]:
            assert p["idle_after_stops_s"] is not None
    split = stopped.summary["time_split"]
    assert [r["profile"] for r in split["profiles"]] == ["baseline", "mtp"]
    for r in split["profiles"]:
        assert r["wall_s"] >= r["launch_ready_s"] + r["sampling_s"] + r["stop_s"] - 1e-6
        assert r["tool_s"] >= 0
    report = (stopped.run_dir / "report.md").read_text()
    assert "stopped at their settled loop" in report and "stop + GPU release" in report
