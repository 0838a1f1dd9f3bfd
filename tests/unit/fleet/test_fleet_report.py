"""The fleet report singles out the hosts whose verdict differs from the majority, with the facts they differ in."""

from __future__ import annotations

from mtp_remote.fleet.outcomes import (
    FleetReport,
    HostOutcome,
    describe_disagreement,
    disagreements,
    render_fleet_markdown,
)


def outcomes():
    facts = {"sglang": "0.5.9", "driver": "560.35.03", "gpus": "NVIDIA RTX A6000", "env SGLANG_SIM_FAULTS": "None"}
    return [HostOutcome("gpu-1", 0, {"mtp": "healthy"}, facts=dict(facts), duration_s=10.0),
            HostOutcome("gpu-2", 0, {"mtp": "healthy"}, facts=dict(facts), duration_s=11.0),
            HostOutcome("gpu-3", 1, {"mtp": "spec-corrupts-output"}, duration_s=12.0,
                        facts={**facts, "driver": "550.54.15"}),
            HostOutcome("gpu-4", 2, error="SSH to 10.0.0.4 failed: timed out")]


def test_the_odd_host_is_named_with_the_fact_it_differs_in():
    (d,) = disagreements(outcomes())
    assert d["hosts"] == ["gpu-3"] and d["majority_hosts"] == ["gpu-1", "gpu-2"]
    assert d["differing_facts"] == [{"fact": "driver", "odd": ["550.54.15"], "others": ["560.35.03"]}]
    assert describe_disagreement(d) == ("mtp: spec-corrupts-output on gpu-3 only (healthy on gpu-1, gpu-2); "
                                        "differs: driver 550.54.15 vs 560.35.03")


def test_a_failed_host_is_reported_but_not_counted_as_a_disagreement():
    rep = FleetReport("diagnose", "r", outcomes(), wall_s=12.5, max_workers=8)
    rep.disagreements = disagreements(rep.hosts)
    md = render_fleet_markdown(rep)
    assert "Could not run on: gpu-4." in md and "error: SSH to 10.0.0.4 failed" in md
    assert rep.exit_code == 2 and rep.to_dict()["slowest_host_s"] == 12.0 and rep.to_dict()["sum_host_s"] == 33.0


def test_hosts_that_agree_give_no_disagreement():
    same = [HostOutcome(f"h{i}", 0, {"mtp": "healthy"}) for i in range(3)]
    assert disagreements(same) == []


def test_a_fleet_diagnose_ends_with_each_hosts_next_step(tmp_path):
    """The single-host run ends with a `next:` line; a fleet run printed none. Each host with something to do
    gets its own, from its summary.json; a host that could not be run gets its cause and a preflight."""
    import json

    from mtp_remote.fleet.console import fleet_next_steps

    hosts = outcomes()
    for h, kind in (("gpu-1", "healthy"), ("gpu-2", "healthy"), ("gpu-3", "spec-corrupts-output")):
        out = next(o for o in hosts if o.host == h)
        out.run_id = f"20261201-0000{h[-1]}-diag"
        (tmp_path / out.run_id).mkdir()
        (tmp_path / out.run_id / "summary.json").write_text(json.dumps(
            {"run_id": out.run_id, "host": {"name": h}, "verdicts": [{"profile": "mtp", "kind": kind}]}))
    rep = FleetReport("diagnose", "r", hosts, wall_s=12.5, max_workers=8)
    rd = f"--runs-dir {tmp_path}"  # the runs are not where the printed commands look by default
    assert fleet_next_steps(rep, tmp_path) == [
        f"next [gpu-3]: find the cheapest cure: `mtp-remote mitigate --from 20261201-00003-diag -H gpu-3 {rd}` "
        f"(then `bisect`, `bug-report 20261201-00003-diag {rd}`); see docs/runbooks/loops-confirmed.md",
        "next [gpu-4]: fix the cause (SSH to 10.0.0.4 failed: timed out), then check the host: "
        "`mtp-remote preflight -H gpu-4`"]
    calm = FleetReport("diagnose", "r", hosts[:2], wall_s=1, max_workers=8)
    assert fleet_next_steps(calm, tmp_path) == [
        "next: nothing to fix on 2 host(s); compare each with an earlier run: `mtp-remote compare RUN_A RUN_B`"]
    assert fleet_next_steps(FleetReport("status", "r", hosts, wall_s=1, max_workers=8), tmp_path) == []


def test_the_fleet_table_cuts_long_evidence_at_a_clause_and_fleet_md_keeps_it_whole():
    """Issue 30: the fleet table cut evidence mid-sentence (``detail[:200]``)."""
    import io

    from rich.console import Console

    from mtp_remote.fleet.console import DETAIL_CHARS, fleet_table
    from mtp_remote.fleet.outcomes import at_a_clause

    evidence = ("mtp: inconclusive: spec 0/20 vs baseline 0/20 degenerate at T=0.7: no large excess detected; loop "
                "excess up to 13.3% not ruled out (healthy needs it below 5%); about 120 samples per arm would "
                "decide; greedy output identical on 5/5 prompts; acceptance 3.21 (non-looping 3.21), tokens/s "
                "ratio 1.74 over the baseline")
    assert len(evidence) > DETAIL_CHARS
    cut = at_a_clause(evidence, DETAIL_CHARS)
    assert cut == ("mtp: inconclusive: spec 0/20 vs baseline 0/20 degenerate at T=0.7: no large excess detected; "
                   "loop excess up to 13.3% not ruled out (healthy needs it below 5%); about 120 samples per arm "
                   "would decide; greedy output identical on 5/5 prompts …")
    assert at_a_clause("short; whole", 240) == "short; whole"
    host = HostOutcome("gpu-1", 3, {"mtp": "inconclusive"}, detail=evidence, duration_s=9.0)
    rep = FleetReport("diagnose", "r", [host], wall_s=9.0, max_workers=8)
    out = io.StringIO()
    Console(file=out, width=400).print(fleet_table(rep))
    assert "identical on 5/5 prompts …" in out.getvalue() and "ratio 1.74" not in out.getvalue()
    assert evidence in render_fleet_markdown(rep)
