"""The ``next:`` line a run ends with is a command to run as printed. It named the host (``-H``) but not the
inventory the run was given (``-i``) nor its playbook (``-p``): after ``mtp-remote diagnose -i other.yaml -H b
-p small.yaml``, the printed ``--resume``/``mitigate`` read the default inventory (``unknown host 'b'``) or the
default playbook (``--resume: run ... was made with a different playbook``)."""

from __future__ import annotations

import shlex

from mtp_remote.fleet.console import fleet_next_steps
from mtp_remote.fleet.outcomes import FleetReport, HostOutcome
from mtp_remote.report.console import next_step


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
