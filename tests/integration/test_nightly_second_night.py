"""A second night of a group nightly regresses on one host: two sim hosts (local transport, the sim as a real
process) run the nightly over their group twice. The first night is healthy everywhere; before the second,
gpu-b's inventory env switches on ``state_leak`` (``SGLANG_SIM_FAULTS``). The regression check — tonight's
loop counts against the host's own last good run — fires for gpu-b only, its junit cases name the
regression, and the history holds both nights of both hosts under the group."""

from __future__ import annotations

import json
import sys
from xml.etree import ElementTree as ET

import pytest
import yaml

from mtp_remote.fleet.nightly_fleet import run_nightly_fleet
from mtp_remote.report import history as store
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.sim
HOSTS = ("gpu-a", "gpu-b")


def _inventory(tmp_path, ports: list[int], faulty: str | None) -> str:
    """Both hosts local sims at time scale 0.01 on the same ports and workdirs every night; ``faulty`` gets
    state_leak."""
    hosts = {}
    for i, name in enumerate(HOSTS):
        env = {"SGLANG_SIM_TIME_SCALE": "0.01", **({"SGLANG_SIM_FAULTS": "state_leak"} if name == faulty else {})}
        hosts[name] = {"transport": "local", "engine": "sim", "workdir": str(tmp_path / name),
                       "port": ports[i], "python": sys.executable, "env": env}
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"default_host": HOSTS[0], "hosts": hosts, "groups": {"rack": list(HOSTS)}}))
    return str(path)


def _playbook(tmp_path) -> str:
    """The shipped nightly cut to 4 prompts x 3 samples at T=0.7 (the sizes of the other fleet nightly tests)."""
    shipped = yaml.safe_load((ROOT / "playbooks" / "nightly.yaml").read_text())
    small = {**shipped, "samples": 3, "max_tokens": 768, "temperatures": [0.7], "prompts": shipped["prompts"][:4],
             "compare": {"margin": 0.25}}
    (tmp_path / "nightly.yaml").write_text(yaml.safe_dump(small))
    return str(tmp_path / "nightly.yaml")


def test_a_second_group_night_regresses_on_exactly_the_host_that_got_the_fault(tmp_path):
    ports = [free_port(), free_port()]
    pb, runs = _playbook(tmp_path), tmp_path / "runs"
    first = run_nightly_fleet(list(HOSTS), group="rack", inventory=_inventory(tmp_path, ports, None), playbook=pb,
                              runs_dir=runs)
    assert first.exit_code == 0, first.summary
    assert first.summary["regressed_hosts"] == [] and first.summary["corrupt_hosts"] == []
    assert all(h["regression_baseline"] is None for h in first.summary["hosts"])  # nothing to compare with yet

    second = run_nightly_fleet(list(HOSTS), group="rack", inventory=_inventory(tmp_path, ports, "gpu-b"), playbook=pb,
                               runs_dir=runs)
    assert second.exit_code == 1, second.summary
    hosts = {h["host"]: h for h in second.summary["hosts"]}
    assert second.summary["regressed_hosts"] == ["gpu-b"] and second.summary["corrupt_hosts"] == ["gpu-b"]
    first_runs = {h["host"]: h["run_id"] for h in first.summary["hosts"]}
    # each host is compared with its own first night
    assert {h: hosts[h]["regression_baseline"] for h in HOSTS} == first_runs
    assert hosts["gpu-a"]["regressed"] == [] and hosts["gpu-b"]["regressed"] == ["mtp T=0.7 (loop_rate)"]

    # the loop-rate check on gpu-b: tonight's loops against its earlier nights' (one here), Fisher one-sided, Holm
    doc_b = json.loads((runs / hosts["gpu-b"]["run_id"] / "summary.json").read_text())
    (check,) = [c for c in doc_b["regression"]["checks"] if c["regressed"]]
    assert (check["kind"], check["profile"], check["n"], check["history_n"]) == ("loop_rate", "mtp", 12, 12)
    assert check["run"] >= 6 and check["history_loops"] == 0 and check["history_runs"] == 1, check
    assert check["p_adjusted"] < 0.05 / 30, check
    doc_a = json.loads((runs / hosts["gpu-a"]["run_id"] / "summary.json").read_text())
    assert doc_a["regression"]["baseline_run"] == first_runs["gpu-a"] and doc_a["regression"]["regressed"] == []

    # junit: the fleet's case for gpu-b fails naming the regression; gpu-b's own junit has the regression case
    suite = ET.parse(second.fleet_dir / "junit.xml").getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1") and cases["gpu-a"].find("failure") is None
    msg = cases["gpu-b"].find("failure").get("message")
    assert msg == f"mtp: spec-corrupts-output; regressed since {first_runs['gpu-b']}: mtp T=0.7 (loop_rate)", msg
    own = ET.parse(runs / hosts["gpu-b"]["run_id"] / "junit.xml").getroot()
    reg = [c for c in own.iter("testcase") if c.find("failure") is not None
           and c.find("failure").get("message").startswith("regression since")]
    assert len(reg) == 1 and reg[0].find("failure").get("message") == f"regression since {first_runs['gpu-b']}"

    # history: both nights of both hosts, under the group, each night with its own fleet id
    rows = store.history(runs / "history.sqlite", group="rack")
    assert sorted((x["host"], x["fleet_id"], x["exit_code"]) for x in rows) == sorted(
        [(h, first.fleet_id, 0) for h in HOSTS] + [("gpu-a", second.fleet_id, 0), ("gpu-b", second.fleet_id, 1)])
    verdicts = {(x["host"], x["fleet_id"]): x["verdicts"]["mtp"] for x in rows}
    assert verdicts[("gpu-b", second.fleet_id)] == "spec-corrupts-output"
    assert "spec-corrupts-output" not in {verdicts[("gpu-a", first.fleet_id)], verdicts[("gpu-a", second.fleet_id)],
                                          verdicts[("gpu-b", first.fleet_id)]}
