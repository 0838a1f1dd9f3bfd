"""The ``next:`` line a run ends with is a command to run as printed. It named the host (``-H``) but not the
inventory the run was given (``-i``) nor its playbook (``-p``): after ``mtp-remote diagnose -i other.yaml -H b
-p small.yaml``, the printed ``--resume``/``mitigate`` read the default inventory (``unknown host 'b'``) or the
default playbook (``--resume: run ... was made with a different playbook``)."""

from __future__ import annotations

import shlex

from mtp_remote.fleet.console import fleet_next_steps
from mtp_remote.fleet.outcomes import FleetReport, HostOutcome
from mtp_remote.report.next_step import next_step


def _doc(kind: str, playbook_file: str) -> dict:
    return {"run_id": "20261201-000000-abcd", "host": {"name": "gpu-b"}, "status": "completed",
            "playbook": {"file": playbook_file, "prompts": [{"id": "p"}] * 5},
            "verdicts": [{"profile": "mtp", "kind": kind, "comparisons": [{"samples_needed": 55}]}]}


def _command(step: str) -> list[str]:
    return shlex.split(step.split("`")[1])


def test_the_next_command_names_the_inventory_and_playbook_the_run_was_given():
    cure = _command(next_step(_doc("spec-corrupts-output", "/tmp/my pb.yaml"), "runs/r", inventory="/tmp/inv.yaml"))
    assert cure[:4] == ["mtp-remote", "mitigate", "--from", "20261201-000000-abcd"]
    assert cure[cure.index("-H") + 1] == "gpu-b" and cure[cure.index("-i") + 1] == "/tmp/inv.yaml"
    assert cure[cure.index("-p") + 1] == "/tmp/my pb.yaml"
    more = _command(next_step(_doc("inconclusive", "playbooks/nightly.yaml"), "runs/r", inventory="inv2.yaml"))
    assert more[:4] == ["mtp-remote", "diagnose", "--resume", "20261201-000000-abcd"]
    assert more[more.index("-i") + 1] == "inv2.yaml" and more[more.index("-p") + 1] == "playbooks/nightly.yaml"
    assert more[more.index("--samples") + 1] == "11"


def test_the_defaults_add_nothing_to_the_next_command():
    step = next_step(_doc("spec-corrupts-output", "playbooks/diagnose-mtp.yaml"), "runs/r")
    assert _command(step) == ["mtp-remote", "mitigate", "--from", "20261201-000000-abcd", "-H", "gpu-b"]


def test_a_fleet_names_its_inventory_in_each_hosts_next_command(tmp_path):
    import json

    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "summary.json").write_text(json.dumps(_doc("spec-corrupts-output", "small.yaml")))
    hosts = [HostOutcome("a", 1, {"mtp": "spec-corrupts-output"}, run_id="r1"),
             HostOutcome("c", 2, error="SSH to c failed")]
    steps = fleet_next_steps(FleetReport("diagnose", "r", hosts, wall_s=1, max_workers=8), tmp_path,
                             inventory="/tmp/inv.yaml")
    cure = _command(steps[0])
    assert cure[cure.index("-i") + 1] == "/tmp/inv.yaml" and cure[cure.index("-p") + 1] == "small.yaml"
    assert steps[1].endswith("`mtp-remote preflight -H c -i /tmp/inv.yaml`"), steps


def test_an_inconclusive_greedy_only_run_is_sent_to_a_playbook_with_a_temperature_not_to_more_samples():
    """Issue 30: a T = 0-only playbook's `next:` said "add samples ... --samples N (the evidence says how many)":
    no number, and more greedy samples repeat the same output, so they cannot bound a loop rate."""
    doc = {**_doc("inconclusive", "greedy.yaml"), "playbook": {"file": "greedy.yaml", "temperatures": [0.0],
                                                               "prompts": [{"id": "p"}] * 5}}
    step = next_step(doc, "runs/r", inventory="inv.yaml")
    assert "--samples" not in step and "cannot bound a loop rate" in step and "temperatures: [0.0, 0.7]" in step
    cmd = _command(step.split("run that playbook: ")[1])
    assert cmd == ["mtp-remote", "diagnose", "-H", "gpu-b", "-i", "inv.yaml", "-p", "playbooks/diagnose-mtp.yaml"]


def test_an_inconclusive_run_whose_evidence_names_no_count_gets_the_designs_next_look_as_a_number():
    doc = _doc("inconclusive", "playbooks/diagnose-mtp.yaml")
    doc["verdicts"][0]["comparisons"] = [{"samples_needed": None}]
    doc["playbook"]["temperatures"] = [0.0, 0.7]
    doc["design"] = {"first_rounds": 4, "rounds": 4, "resumes": 3}
    cmd = _command(next_step(doc, "runs/r"))
    assert cmd[cmd.index("--samples") + 1] == "8"  # 4 -> 8: the next look of 4, 8, 16, 32
    no_design = _doc("inconclusive", "playbooks/diagnose-mtp.yaml")
    no_design["verdicts"][0]["comparisons"] = []
    no_design["playbook"].update(samples=6, temperatures=[0.7])
    cmd = _command(next_step(no_design, "runs/r"))
    assert cmd[cmd.index("--samples") + 1] == "12"
    spent = {**doc, "design": {"first_rounds": 4, "rounds": 32, "resumes": 3}}
    cmd = _command(next_step(spent, "runs/r"))
    assert cmd[:2] == ["mtp-remote", "diagnose"] and cmd[cmd.index("--samples") + 1] == "64"


def test_a_run_outside_the_default_runs_directory_is_named_with_its_runs_dir(tmp_path):
    """`mitigate --from RUN` after `diagnose --runs-dir elsewhere` looked for RUN in the default runs/."""
    step = next_step(_doc("spec-corrupts-output", "playbooks/diagnose-mtp.yaml"), tmp_path / "elsewhere" / "r")
    cure = _command(step)
    assert cure[cure.index("--runs-dir") + 1] == str(tmp_path / "elsewhere")
    (report,) = [shlex.split(x) for x in step.split("`") if x.startswith("bug-report")]
    assert report == ["bug-report", "20261201-000000-abcd", "--runs-dir", str(tmp_path / "elsewhere")]


def test_a_greedy_only_run_short_of_prompts_is_told_how_many_identical_prompts_close_the_gate():
    # issue 31: more samples of the same greedy prompts change nothing; the verdict's T = 0 row says what does
    from mtp_remote.analysis.divergence import Calibration
    from mtp_remote.analysis.verdict import judge
    from tests.unit.analysis.test_verdict import _greedy_only

    spec, ss, base, bs = _greedy_only(6)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs,
              calibration=Calibration(greedy_pairs=6, greedy_prompts=6))
    doc = _doc("inconclusive", "playbooks/real-hybrid.yaml") | {"verdicts": [v.to_dict()]}
    step = next_step(doc, "runs/r")
    assert step.startswith("give the playbook at least 29 distinct prompts (23 more)"), step
    assert "--resume" not in step and "--samples" not in step
    assert _command(step) == ["mtp-remote", "diagnose", "-H", "gpu-b", "-p", "playbooks/real-hybrid.yaml"]
