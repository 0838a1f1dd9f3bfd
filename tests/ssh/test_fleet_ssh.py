"""A fleet of three simulated GPU hosts behind a real OpenSSH sshd on 127.0.0.1, one of them with the fault
(and another driver): one report that names that host and the fact it differs in; hosts run in parallel, so
the wall time is near the slowest host's, not the sum; a host that cannot be reached never stops the others."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.experiment.hosts import fleet_hosts
from mtp_remote.fleet.fleet import run_fleet
from tests.conftest import ROOT, free_port

pytestmark = [pytest.mark.ssh, pytest.mark.sim]


def _inventory(tmp_path, sshd, *, unreachable: bool = False) -> str:
    hosts, names = {}, []
    for name, faults, driver in (("gpu-1", None, "560.35.03"), ("gpu-2", None, "560.35.03"),
                                 ("gpu-3", "state_leak", "550.54.15")):
        env = {"SGLANG_SIM_TIME_SCALE": "0.01", "SGLANG_SIM_DRIVER": driver}
        if faults:
            env["SGLANG_SIM_FAULTS"] = faults
        hosts[name] = sshd.host_config(engine="sim", workdir=str(tmp_path / name), port=free_port(), env=env)
        names.append(name)
    if unreachable:  # nothing listens there: connection refused
        hosts["gpu-down"] = sshd.host_config(engine="sim", workdir=str(tmp_path / "down"), port=free_port(),
                                             ssh_port=free_port(), connect_timeout=3)
        names.append("gpu-down")
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"default_host": "gpu-1", "hosts": hosts, "groups": {"rack": names}}))
    return str(path)


def _playbook(tmp_path) -> str:
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=3, max_tokens=768, temperatures=[0.7], prompts=pb["prompts"][:4],
              compare={"margin": 0.25})  # 12 clean samples per arm bound 21 points, not the default 5
    path = tmp_path / "pb.yaml"
    path.write_text(yaml.safe_dump(pb))
    return str(path)


def test_fleet_diagnose_names_the_one_corrupting_host_and_its_driver_and_runs_hosts_in_parallel(sshd, tmp_path):
    inv = _inventory(tmp_path, sshd)
    rep = run_fleet("diagnose", fleet_hosts(inv, "rack"), inventory=inv, playbook=_playbook(tmp_path),
                    runs_dir=tmp_path / "runs")
    verdicts = {h.host: h.verdicts.get("mtp") for h in rep.hosts}
    assert verdicts["gpu-3"] == "spec-corrupts-output" and {verdicts["gpu-1"], verdicts["gpu-2"]} <= {
        "healthy", "spec-slower"}, [(h.host, h.error, h.detail) for h in rep.hosts]
    # three sim hosts on two shared cores: a healthy host's speed ratio can read spec-slower under load; the
    # disagreement checks below need the two healthy hosts to agree
    agree = verdicts["gpu-1"] == verdicts["gpu-2"] == "healthy"
    if agree:
        (d,) = rep.disagreements
        assert d["hosts"] == ["gpu-3"] and d["majority"] == "healthy"
        facts = {f["fact"]: (f["odd"], f["others"]) for f in d["differing_facts"]}
        assert facts["driver"] == (["550.54.15"], ["560.35.03"])
        assert facts["env SGLANG_SIM_FAULTS"] == (["state_leak"], ["None"])
    doc = rep.to_dict()
    print(f"fleet of 3: wall {rep.wall_s:.1f} s, slowest host {doc['slowest_host_s']:.1f} s, "
          f"sum {doc['sum_host_s']:.1f} s")
    assert rep.wall_s < 0.8 * doc["sum_host_s"]
    assert rep.wall_s < doc["slowest_host_s"] + 10
    (fleet_dir,) = (tmp_path / "runs").glob("fleet-*")
    md = (fleet_dir / "fleet.md").read_text()
    if agree:
        assert "mtp: spec-corrupts-output on gpu-3 only (healthy on gpu-1, gpu-2); differs: driver 550.54.15 vs " \
               "560.35.03" in md
    else:
        assert "spec-corrupts-output on gpu-3" in md, md
    assert json.loads((fleet_dir / "fleet.json").read_text())["exit_code"] == 1
    from mtp_remote.fleet.console import fleet_next_steps

    steps = fleet_next_steps(rep, tmp_path / "runs", inventory=inv)  # each host's summary.json, where it was written
    cure = [s for s in steps if s.startswith("next [gpu-3]: find the cheapest cure: `mtp-remote mitigate --from ")]
    assert len(cure) == 1, steps
    # runnable as printed: the host, inventory and playbook, and the runs directory (not the default one)
    assert cure[0].split("`")[1].endswith(f" -H gpu-3 -i {inv} -p {_playbook(tmp_path)} --runs-dir {tmp_path / 'runs'}"), \
        steps


def test_an_unreachable_host_is_its_own_outcome_and_the_others_still_report(sshd, tmp_path):
    inv = _inventory(tmp_path, sshd, unreachable=True)
    r = CliRunner().invoke(main, ["status", "-i", inv, "-H", "rack"])
    assert r.exit_code == 2, r.output
    assert r.output.count("server: none") == 3, r.output
    down = [line for line in r.output.splitlines() if line.startswith("│ gpu-down")]
    assert down and "│ 2 " in down[0] and "server:" not in down[0], r.output
