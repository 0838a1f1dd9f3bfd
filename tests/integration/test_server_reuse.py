"""A server is not relaunched for a profile with exactly its argv and environment: the plan puts such launches
side by side and the runner keeps the server for the next one (sim as a real process, local transport). The A/A
arm stays a relaunch: it measures launch-to-launch noise."""

from __future__ import annotations

import pytest

from mtp_remote.experiment import diagnose as api
from mtp_remote.experiment import hosts
from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.experiment.plan import order_for_reuse, plan_run, server_key
from mtp_remote.experiment.runner import Hooks
from tests.integration.test_scenarios import write_config

pytestmark = pytest.mark.sim

MTP = ("--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
       "--speculative-num-draft-tokens 4")


def _playbook(**kw) -> Playbook:
    return Playbook.model_validate(dict(
        name="t", profiles={"baseline": {"flags": ""}, "mtp": {"flags": MTP}, "eagle2": {"flags": MTP.replace("3", "2")},
                            "mtp-again": {"flags": MTP}}, prompts=[{"id": "p", "text": "x"}], **kw))


def test_launches_of_the_same_server_are_put_side_by_side_baseline_first():
    host = HostConfig.model_validate(dict(name="h", transport="local", engine="sim", model_path="/m"))
    plans = order_for_reuse(plan_run(host, _playbook(), "/wd"))
    assert [p.profile for p in plans] == ["baseline", "mtp", "mtp-again", "eagle2"]
    assert server_key(plans[1]) == server_key(plans[2]) != server_key(plans[3])


def test_a_profile_with_the_argv_of_the_one_before_reuses_its_server(tmp_path):
    inv, pb = write_config(tmp_path, "state_leak", samples=2, max_tokens=256, temperatures=[0.7], profiles={
        "baseline": {"flags": ""}, "mtp": {"flags": MTP}, "eagle2": {"flags": MTP.replace("steps 3", "steps 2")},
        "mtp-again": {"flags": MTP}})
    launched: list[str] = []
    hooks = Hooks(on_progress=lambda m: launched.append(m.split(":")[0]) if "launching" in m else None)
    res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs", hooks=hooks)
    assert launched == ["baseline", "eagle2", "mtp"]  # mtp-again ran on mtp's server, right after it
    prof = {p["profile"]: p for p in res.summary["profiles"]}
    assert [p["profile"] for p in res.summary["profiles"]] == ["baseline", "eagle2", "mtp", "mtp-again"]
    assert prof["mtp-again"]["reused_server"] == "mtp" and prof["mtp-again"]["launched"]
    assert prof["mtp"]["stop"].startswith("kept running") and prof["mtp-again"]["stop"].startswith("stopped")
    assert {v["profile"]: v["kind"] for v in res.summary["verdicts"]}["mtp-again"] == "spec-corrupts-output"
    n = {p: sum(1 for c in res.summary["cells"] if c["profile"] == p) for p in prof}
    assert all(n[p] == 1 for p in prof)
    assert (res.run_dir / "logs" / "mtp-again.log").read_text().count("The server is fired up") == 1


def test_the_aa_arm_is_still_a_relaunch(tmp_path):
    inv, pb = write_config(tmp_path, None, samples=2, max_tokens=128, temperatures=[0.7],
                           compare={"calibration": True, "margin": 0.5})
    launched: list[str] = []
    hooks = Hooks(on_progress=lambda m: launched.append(m.split(":")[0]) if "launching" in m else None)
    api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs", hooks=hooks)
    assert launched == ["baseline", "baseline-aa", "mtp"]


def test_a_resume_uses_the_server_its_run_left_running_with_the_argv_it_needs(tmp_path):
    """The connection of a run dropped and left the mtp server up: the resume samples on it, no relaunch."""
    from mtp_remote.remote import connect as transport
    from mtp_remote.serving.process import ProcessServer

    inv, pb = write_config(tmp_path, "state_leak", samples=2, max_tokens=256, temperatures=[0.7])
    first = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs", profiles=["baseline"])
    _, host, playbook = hosts.load_config(inv, pb, None)
    c = transport.connect(host)
    lc = ProcessServer(c, host, python=hosts.remote_python(host), workdir=host.workdir, run_id=first.run_id)
    lc.prepare()
    mtp = next(lp for lp in plan_run(host, playbook, lc.workdir) if lp.profile == "mtp")
    left = lc.launch("mtp", mtp.argv, mtp.env)
    assert lc.wait_ready(left, timeout_s=60).ok
    transport.close(c)

    launched: list[str] = []
    hooks = Hooks(on_progress=lambda m: launched.append(m) if "launching" in m or "left running" in m else None)
    again = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs", resume=first.run_id, hooks=hooks)
    assert launched == [f"mtp: the server this run left running (PID {left.pid}) has its argv: used, not relaunched"]
    prof = {p["profile"]: p for p in again.summary["profiles"]}
    assert prof["baseline"]["outcome"]["kind"] == "skipped" and prof["mtp"]["reused_server"] == "mtp (left running)"
    assert prof["mtp"]["stop"].startswith(f"stopped PID {left.pid}")
    assert [v["kind"] for v in again.summary["verdicts"]] == ["spec-corrupts-output"]


def test_a_server_left_by_another_run_is_stopped_not_used(tmp_path):
    from mtp_remote.remote import connect as transport
    from mtp_remote.serving.process import ProcessServer

    inv, pb = write_config(tmp_path, "state_leak", samples=2, max_tokens=256, temperatures=[0.7])
    first = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs", profiles=["baseline"])
    _, host, playbook = hosts.load_config(inv, pb, None)
    c = transport.connect(host)
    lc = ProcessServer(c, host, python=hosts.remote_python(host), workdir=host.workdir, run_id="another-run")
    lc.prepare()
    mtp = next(lp for lp in plan_run(host, playbook, lc.workdir) if lp.profile == "mtp")
    left = lc.launch("mtp", mtp.argv, mtp.env)
    assert lc.wait_ready(left, timeout_s=60).ok
    transport.close(c)
    msgs: list[str] = []
    api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp_path / "runs", resume=first.run_id,
                 hooks=Hooks(on_progress=msgs.append))
    assert any(m.startswith(f"stopped a server left by an earlier run (PID {left.pid})") for m in msgs)
    assert "mtp: launching (speculative)" in msgs
