"""A nightly over an inventory group behind a real OpenSSH sshd on 127.0.0.1: three simulated GPU hosts, one
healthy, one with the fault, one unreachable (nothing listens on its SSH port). Every host gets its own run
directory, artefacts and history row with the group; the fleet gets one junit case per host (the faulty and
the unreachable one failing, each with its cause), metrics for every host under the group label, and
``history --group`` lists the night."""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree as ET

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.report import history as store
from tests.conftest import ROOT, free_port

pytestmark = [pytest.mark.ssh, pytest.mark.sim]


def _inventory(tmp_path, sshd) -> str:
    hosts = {}
    for name, faults in (("gpu-1", None), ("gpu-3", "state_leak")):
        env = {"SGLANG_SIM_TIME_SCALE": "0.01", **({"SGLANG_SIM_FAULTS": faults} if faults else {})}
        hosts[name] = sshd.host_config(engine="sim", workdir=str(tmp_path / name), port=free_port(), env=env)
    hosts["gpu-down"] = sshd.host_config(engine="sim", workdir=str(tmp_path / "down"), port=free_port(),
                                         ssh_port=free_port(), connect_timeout=3)  # connection refused
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"default_host": "gpu-1", "hosts": hosts,
                                    "groups": {"rack": ["gpu-1", "gpu-3", "gpu-down"]}}))
    return str(path)


def _playbook(tmp_path) -> str:
    """The shipped nightly, small: 4 prompts x 3 samples at T=0.7 (12 clean samples per arm bound 21 points,
    hence the margin), the sizes of test_fleet_ssh.py."""
    shipped = yaml.safe_load((ROOT / "playbooks" / "nightly.yaml").read_text())
    small = {**shipped, "samples": 3, "max_tokens": 768, "temperatures": [0.7], "prompts": shipped["prompts"][:4],
             "compare": {"margin": 0.25}}
    (tmp_path / "nightly.yaml").write_text(yaml.safe_dump(small))
    return str(tmp_path / "nightly.yaml")


def test_a_nightly_over_a_group_with_a_faulty_and_an_unreachable_host(sshd, tmp_path):
    inv, pb, runs = _inventory(tmp_path, sshd), _playbook(tmp_path), tmp_path / "runs"
    prom_out = tmp_path / "textfile" / "mtp_remote.prom"
    prom_out.parent.mkdir()
    r = CliRunner().invoke(main, ["nightly", "-i", inv, "-p", pb, "-H", "rack", "--runs-dir", str(runs),
                                  "--metrics-file", str(prom_out)])
    assert r.exit_code == 2, r.output  # one host could not run: the largest exit code of the hosts
    (fleet_dir,) = runs.glob("fleet-*")

    summary = json.loads((fleet_dir / "summary.json").read_text())
    hosts = {h["host"]: h for h in summary["hosts"]}
    assert summary["group"] == "rack" and summary["fleet_id"] == fleet_dir.name
    assert list(hosts) == ["gpu-1", "gpu-3", "gpu-down"]
    assert summary["could_not_run"] == ["gpu-down"] and summary["corrupt_hosts"] == ["gpu-3"]
    assert hosts["gpu-3"]["corrupts"] == ["mtp"] and hosts["gpu-3"]["exit_code"] == 1
    assert hosts["gpu-1"]["status"] == "completed" and hosts["gpu-1"]["corrupts"] == [], hosts["gpu-1"]
    assert hosts["gpu-down"]["status"] == "failed" and hosts["gpu-down"]["exit_code"] == 2
    assert "refused" in hosts["gpu-down"]["cause"], hosts["gpu-down"]["cause"]
    (d,) = summary["disagreements"]  # gpu-down did not run: it neither agrees nor disagrees
    assert d["key"] == "mtp" and d["hosts"] == ["gpu-3"] and d["verdict"] == "spec-corrupts-output"
    assert "spec-corrupts-output on gpu-3 only" in summary["disagreement_lines"][0]

    suite = ET.parse(fleet_dir / "junit.xml").getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert sorted(cases) == ["gpu-1", "gpu-3", "gpu-down"]
    assert (suite.get("tests"), suite.get("failures")) == ("3", "2")
    assert cases["gpu-1"].find("failure") is None
    assert cases["gpu-3"].find("failure").get("message") == "mtp: spec-corrupts-output"
    down = cases["gpu-down"].find("failure").get("message")
    assert down.startswith("could not run (failed): ") and "refused" in down, down

    prom = (fleet_dir / "metrics.prom").read_text()
    assert prom_out.read_text() == prom
    up = dict(re.findall(r'^mtp_remote_up\{group="rack",host="([^"]+)",playbook="nightly-mtp"\} (\d)$', prom, re.MULTILINE))
    assert up == {"gpu-1": "1", "gpu-3": "1", "gpu-down": "0"}
    assert 'mtp_remote_run_failed{group="rack",host="gpu-down",playbook="nightly-mtp"} 1' in prom
    assert 'mtp_remote_fleet_hosts_failed{group="rack"} 1' in prom
    assert 'mtp_remote_fleet_hosts_corrupt{group="rack"} 1' in prom
    assert prom.count("# TYPE mtp_remote_up gauge") == 1  # one family, three hosts
    ts = re.findall(r'^mtp_remote_last_run_timestamp_seconds\{group="rack",host="[^"]+",[^}]*\} ([\d.]+)$',
                    prom, re.MULTILINE)
    assert len(ts) == 3 and all(float(t) > 1.7e9 for t in ts)

    rows = store.history(runs / "history.sqlite", group="rack")
    assert sorted((x["host"], x["status"], x["exit_code"]) for x in rows) == [
        ("gpu-1", "completed", 0), ("gpu-3", "completed", 1), ("gpu-down", "failed", 2)]
    assert {x["fleet_id"] for x in rows} == {fleet_dir.name}
    for x in rows:  # each host's own artefacts, the unreachable one's too
        assert {"summary.json", "junit.xml", "metrics.prom"} <= {p.name for p in (runs / x["run_id"]).iterdir()}
        assert json.loads((runs / x["run_id"] / "summary.json").read_text())["fleet"]["group"] == "rack"

    h = CliRunner(env={"COLUMNS": "250"}).invoke(main, ["history", "--group", "rack", "--runs-dir", str(runs)])
    assert h.exit_code == 0, h.output
    listed = [ln for ln in h.output.splitlines() if "│ rack " in ln]
    assert sorted(ln.split("│")[2].strip() for ln in listed) == ["gpu-1", "gpu-3", "gpu-down"], h.output
    none = CliRunner().invoke(main, ["history", "--group", "other", "--runs-dir", str(runs), "--json"])
    assert none.exit_code == 0 and json.loads(none.output) == []
