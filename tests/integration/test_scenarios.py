"""Each simulated scenario gets its verdict through the real lifecycle (local transport, the sim as a real
process): healthy, state_leak, base_loops, low_accept. Plus early stopping, resume and the KL probe."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from mtp_remote.experiment import diagnose as api
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.sim


#: The sim's startup scale for hosts whose time scale is there for decode speed or long requests: a start in
#: ~0.1 s instead of ``64 s x time scale`` (3.2 s at 0.05, 19 s at 0.3), the milestones unchanged.
FAST_START = "0.002"


def write_config(tmp_path, faults: str | None, *, time_scale: str = "0.01", startup_scale: str | None = None,
                 **playbook) -> tuple[str, str]:
    """``tmp_path/inventory.yaml`` (one local sim host: ``faults``, ``time_scale``, ``startup_scale`` when given:
    ``SGLANG_SIM_STARTUP_SCALE``) and ``tmp_path/pb.yaml`` (the shipped playbook cut to 4 prompts x 3 samples at
    T=0.7, then ``playbook``'s keys); returns their paths."""
    env = {"SGLANG_SIM_TIME_SCALE": time_scale}
    if startup_scale:
        env["SGLANG_SIM_STARTUP_SCALE"] = startup_scale
    if faults:
        env["SGLANG_SIM_FAULTS"] = faults
    inv = {"default_host": "sim", "hosts": {"sim": {
        "transport": "local", "engine": "sim", "workdir": str(tmp_path / "wd"), "port": free_port(),
        "python": sys.executable, "env": env}}}
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(inv))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    # T > 0 only, scenarios of the loop rule: no A/A relaunch (it would add its samples to the budget)
    pb.update(samples=3, max_tokens=1024, temperatures=[0.7], compare={**pb["compare"], "calibration": False})
    pb["prompts"] = pb["prompts"][:4]
    pb.update(playbook)
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))
    return str(tmp_path / "inventory.yaml"), str(tmp_path / "pb.yaml")


# 12 samples per arm bound a loop-rate excess below 21 points (at 96 %: the first run leaves 20 % of alpha to
# resumes), not 5 (the default margin); a looping baseline needs 32 per arm to bound the excess below 50 points
@pytest.mark.parametrize("faults,expected,extra", [  # healthy (speed-dependent): tests/integration/test_speed_verdicts.py
    ("state_leak", "spec-corrupts-output", {}),
    ("base_loops", "base-model-degenerates", {"samples": 8, "compare": {"margin": 0.5}}),
    ("low_accept", "spec-ineffective", {"compare": {"margin": 0.25}}),
])
def test_each_scenario_gets_its_verdict(tmp_path, faults, expected, extra):
    inv, pb = write_config(tmp_path, faults, **extra)
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs")
    (v,) = res.summary["verdicts"]
    assert v["kind"] == expected, v["evidence"]
    assert res.exit_code == (1 if expected == "spec-corrupts-output" else 0)
    cells = {c["profile"]: c for c in res.summary["cells"]}
    if faults == "state_leak":  # loops inflate acceptance: it is higher over all samples than over clean ones
        assert cells["mtp"]["loops"] >= 8 and cells["baseline"]["loops"] == 0
    if faults == "low_accept":
        assert cells["mtp"]["accept_length"] < 1.2


def test_early_stopping_settles_state_leak_on_a_fraction_of_the_budget(tmp_path):
    # concurrency = one round: the runner keeps every slot busy, so requests already in flight when a cell
    # settles are sent anyway; with 16 slots and 4 prompts that is 4 rounds ahead (the server's batch is then
    # nearly free, so wall time, not the request count, is what early stopping saves there)
    inv, pb = write_config(tmp_path, "state_leak", samples=8, early_stop=True, concurrency=4, prompts=[
        {"id": f"p{i}", "text": t} for i, t in enumerate(
            ["What is 2+2?", "What is the capital of France?", "List the prime numbers below 20.",
             "Why is the sky blue?"])])
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs")
    s = res.summary["sampling"]
    assert res.summary["verdicts"][0]["kind"] == "spec-corrupts-output"
    print("early stopping used", s)
    stopping = {p["profile"]: p["stopping"] for p in res.summary["profiles"]}
    # looks after rounds 1, 2, 4, 8 (O'Brien-Fleming spending): settled at the second look, 8 of 32 samples
    assert stopping["mtp"]["0.7"]["outcome"] == "spec-loops-more" and stopping["mtp"]["0.7"]["n"] <= 0.4 * 32
    # a clean baseline is sampled in full (32); mtp's cell stops being fed at the look, but what was sent before
    # it is kept: the 4 slots in flight plus any later-round requests that had already returned while a looping
    # sample held its round open (a slot is refilled before the look; CI measured 13 mtp samples, stop 24) — at
    # most half the cell's 32, which is what early stopping must save here
    mtp_used = s["used"] - 32
    assert s["budget"] == 64 and stopping["mtp"]["0.7"]["n"] <= mtp_used <= 16 and s["saved"] >= 16, s


def test_resume_requests_only_what_is_missing(tmp_path):
    inv, pb = write_config(tmp_path, None, samples=3, compare={"margin": 0.25})  # 12 per arm bound 21 points
    first = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs", profiles=["baseline"])
    stored = (first.run_dir / "samples.jsonl").read_text().splitlines()
    assert len(stored) == 12
    again = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs", resume=first.run_id)
    lines = [json.loads(ln) for ln in (first.run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(lines) == 24, "baseline samples were not requested again"
    assert sum(1 for ln in lines if ln["profile"] == "baseline") == 12
    prof = {p["profile"]: p for p in again.summary["profiles"]}
    assert prof["baseline"]["outcome"]["kind"] == "skipped" and prof["mtp"]["n_resumed"] == 0
    # loop-free; the speed part (healthy vs spec-slower) is not this test's: its arms ran at different times
    assert again.summary["verdicts"][0]["kind"] in ("healthy", "spec-slower")
    assert "spec 0/12 vs baseline 0/12" in again.summary["verdicts"][0]["evidence"]


def test_the_kl_probe_is_near_zero_when_healthy_and_positive_under_state_leak(tmp_path):
    means = {}
    for faults in (None, "state_leak"):
        d = tmp_path / (faults or "healthy")
        d.mkdir()
        inv, pb = write_config(d, faults, kl_probe=True, samples=1, temperatures=[0.0, 0.7])
        res = api.diagnose(inventory=inv, playbook=pb, runs_dir=d / "runs")
        cells = {c["profile"]: c for c in res.summary["cells"]}
        means[faults or "healthy"] = (cells["baseline"]["mean_kl_k3"], cells["mtp"]["mean_kl_k3"])
        # the T = 0.7 samples were probed by requests of their own at T = 1: their tokens count (issue 31)
        stored = [json.loads(ln) for ln in (res.run_dir / "samples.jsonl").read_text().splitlines()]
        probe = sum((x.get("kl") or {}).get("probe_tokens") or 0 for x in stored)
        assert probe > 0 and res.summary["kl_probe_tokens"] == probe
        assert res.summary["generated_tokens"] == sum(x.get("completion_tokens") or 0 for x in stored) + probe
        greedy = [r for r in res.summary["verdicts"][0]["comparisons"] if r["temperature"] == 0]
        if faults == "state_leak":  # top-2 margins came back, so each divergence was checked for a near tie
            assert greedy[0]["greedy_diverged"] >= 1 and greedy[0]["greedy_near_tie_flips"] == 0
    assert means["healthy"][0] == pytest.approx(0, abs=1e-6) and means["healthy"][1] == pytest.approx(0, abs=1e-6)
    assert means["state_leak"][1] > 1e-3 and abs(means["state_leak"][0]) < 1e-6


def test_nightly_records_history_and_flags_a_regression(tmp_path):
    from click.testing import CliRunner

    from mtp_remote.cli.main import main

    runs = tmp_path / "runs"
    codes = []
    for faults in (None, "state_leak"):  # the same host, healthy one night and corrupt the next
        inv, pb = write_config(tmp_path, faults, early_stop=True, samples=4, compare={"margin": 0.25})
        r = CliRunner().invoke(main, ["nightly", "-i", inv, "-p", pb, "--runs-dir", str(runs)])
        codes.append(r.exit_code)
    assert codes == [0, 1], r.output
    # a tested rise in loops against the healthy night (Fisher), not a changed label
    assert "regression check against " in r.output and "regressed" in r.output, r.output
    assert "mtp T=0.7 (loop_rate): " in r.output and "Fisher one-sided p=" in r.output
    r = CliRunner().invoke(main, ["history", "--history", str(runs / "history.sqlite"), "--json"])
    rows = json.loads(r.output)
    assert [row["verdicts"]["mtp"] for row in rows][0] == "spec-corrupts-output"
    assert rows[1]["verdicts"]["mtp"] in ("healthy", "spec-slower")
    run_dir = runs / rows[0]["run_id"]
    assert (run_dir / "junit.xml").exists() and "mtp_remote_loop_rate" in (run_dir / "metrics.prom").read_text()


def test_a_server_with_an_api_key_is_queried_with_it_and_the_key_reaches_no_file(tmp_path):
    secret = "sekret-key-123"
    pb_flags = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())["base_flags"]
    inv, pb = write_config(tmp_path, None, samples=1, base_flags=pb_flags + f" --api-key {secret}")
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs")
    assert all(c["n_errors"] == 0 and c["n"] == 4 for c in res.summary["cells"])
    assert secret not in res.summary.to_json()
    for f in res.run_dir.rglob("*"):
        if f.is_file():
            assert secret not in f.read_text(errors="replace"), f
    assert "--api-key ***" in " ".join(res.summary["profiles"][0]["argv_masked"])


def test_a_profile_whose_every_request_fails_is_a_failure_not_a_verdict(tmp_path):
    from mtp_remote.analysis.diagnosis import diagnose
    from mtp_remote.config.inventory import HostConfig
    from mtp_remote.config.playbook import Playbook
    from mtp_remote.experiment.plan import plan_run
    from mtp_remote.experiment.runner import ProfileRun, Runner

    _, pb_path = write_config(tmp_path, None, samples=1)
    pb = Playbook.model_validate(yaml.safe_load(open(pb_path)))
    host = HostConfig(name="sim", transport="local", engine="sim")
    runner = Runner(host, pb, tmp_path, run_id="r", python=sys.executable)
    _, mtp = plan_run(host, pb, "/w")
    with open(tmp_path / "samples.jsonl", "w") as f:  # what a server answering 401 leaves behind
        for req in mtp.requests:
            f.write(json.dumps({"profile": "mtp", "temperature": req.temperature, "prompt_id": req.prompt_id,
                                "sample_index": req.sample_index, "error": 'HTTP 401: {"error": "Unauthorized"}'})
                    + "\n")
    pr = ProfileRun("mtp", True, [], outcome={"kind": "ready"})
    runner._check_errors(mtp, pr)
    assert not pr.launched and pr.crashed["cause"] == "requests_failed" and pr.n_failed == len(mtp.requests)
    diag = diagnose(baseline="baseline", profiles={"baseline": False, "mtp": True}, samples=[],
                    launch_failures={"mtp": (pr.crashed["cause"], pr.crashed["hint"])})
    (v,) = diag.verdicts
    assert v.kind == "launch-failed:requests_failed" and "HTTP 401" in v.evidence


def test_resume_refuses_a_changed_experiment(tmp_path):
    from mtp_remote.errors import ConfigError

    inv, pb = write_config(tmp_path, None, samples=1)
    first = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs", profiles=["baseline"])
    data = yaml.safe_load(open(pb))
    data["temperatures"] = [1.0]
    yaml.safe_dump(data, open(pb, "w"))
    with pytest.raises(ConfigError, match="different playbook.temperatures"):
        api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs", resume=first.run_id)


def test_healthy_needs_enough_samples_to_rule_out_a_loop_excess(tmp_path):
    inv, pb = write_config(tmp_path, None, samples=1)  # 4 vs 4 samples: 0/4 vs 0/4 proves little
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs")
    (v,) = res.summary["verdicts"]
    assert v["kind"] == "inconclusive" and "no large excess detected; loop excess up to" in v["evidence"]
    assert res.exit_code == 3  # no evidence either way: a CI job does not pass


@pytest.mark.parametrize("watchdog,cause", [("3000", "stalled"), ("100", "watchdog_timeout")])
def test_a_server_that_hangs_mid_run_is_caught_not_waited_on(tmp_path, watchdog, cause):
    import time

    pb_flags = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())["base_flags"]
    inv, pb = write_config(tmp_path, "hang_after=6", samples=3, base_flags=pb_flags + f" --watchdog-timeout {watchdog}",
                           timeouts={"stall_s": 3, "request_s": 120, "drain_s": 2})
    t0 = time.monotonic()
    with pytest.raises(Exception) as e:  # the baseline hangs too: no baseline, no run (exit 2)
        api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs")
    # a hung server never drains its requests: the stop is bounded by drain_s (2 s here, 30 by default), then
    # SIGKILL; the hang itself is caught after stall_s (3 s) or the sim's watchdog (100 s x 0.01)
    assert time.monotonic() - t0 < 40
    assert getattr(e.value, "exit_code", None) == 2 and cause in str(e.value)


def test_an_aa_arm_calibrates_a_noisy_host_and_the_kl_probe_still_catches_state_leak(tmp_path):
    found = {}
    for faults in ("numeric_noise=0.3", "state_leak,numeric_noise=0.02"):
        d = tmp_path / faults.split(",")[0].split("=")[0]
        d.mkdir()
        inv, pb = write_config(d, faults, kl_probe=True, samples=3, temperatures=[0.0, 0.7],
                               compare={"margin": 0.2, "calibration": True})
        res = api.diagnose(inventory=inv, playbook=pb, runs_dir=d / "runs")
        found[faults] = res.summary
    noisy = found["numeric_noise=0.3"]
    (v,) = noisy["verdicts"]  # the A/A arm is measured, not judged
    assert v["kind"] != "spec-corrupts-output" and not v["kl_probe"]["flagged"]
    cal = noisy["calibration"]
    assert cal["greedy_pairs"] == 4 and cal["kl_floor_n"] == 32 and cal["kl_floor_mean"] > 1e-3
    assert "baseline-aa" in {p["profile"] for p in noisy["profiles"]}
    (leak,) = found["state_leak,numeric_noise=0.02"]["verdicts"]
    assert leak["kind"] == "spec-corrupts-output" and leak["kl_probe"]["flagged"]


def test_the_opening_line_counts_what_is_sent_the_a_a_arm_included(tmp_path):
    """Issue 26: the opening line said "12 requests planned over 2 profiles" while 18 went to 3 (the runner added
    the A/A arm itself). Both read one plan now (``calibration.with_calibration``)."""
    import re

    from mtp_remote.experiment.runner import Hooks

    inv, pb = write_config(tmp_path, None, samples=2, compare={"calibration": True})
    said: list[str] = []
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs", hooks=Hooks(on_progress=said.append))
    n, p = map(int, re.search(r"(\d+) requests planned over (\d+) profiles", said[0]).groups())
    sent = [json.loads(line) for line in (res.run_dir / "samples.jsonl").read_text().splitlines()]
    assert {s["profile"] for s in sent} == {"baseline", "baseline-aa", "mtp"}
    assert (n, p) == (len(sent), 3) == (24, 3), said[0]
