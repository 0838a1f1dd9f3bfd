"""The operator's view of runs: a night that cannot be done still leaves its four artefacts and a history
row; a run opens with one line and ends naming report.html and the next step; `history` lists every run;
`report last` re-renders; `compare` tests the difference between two runs. Real processes: the CLI as a
subprocess (output not a terminal), the simulated engine, a closed port on 127.0.0.1 for the dead host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.config import paths
from mtp_remote.experiment import diagnose as api
from mtp_remote.report import history as store
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.sim


def cli(*args, cwd, env=None):
    """Run ``mtp-remote`` as a real process (stdout/stderr are pipes, not a terminal)."""
    full_env = {k: v for k, v in os.environ.items() if k != paths.INVENTORY_ENV}
    full_env.update(COLUMNS="80", **(env or {}))
    return subprocess.run([sys.executable, "-m", "mtp_remote.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=240, env=full_env, check=False)


def write_inventory(tmp_path, faults: str | None = None) -> None:
    env = {"SGLANG_SIM_TIME_SCALE": "0.01", **({"SGLANG_SIM_FAULTS": faults} if faults else {})}
    inv = {"default_host": "sim", "hosts": {
        "sim": {"transport": "local", "engine": "sim", "workdir": str(tmp_path / "wd"), "port": free_port(),
                "python": sys.executable, "env": env},
        # nothing listens on this port: SSH is refused at once
        "dead": {"transport": "ssh", "address": "127.0.0.1", "ssh_port": free_port(), "connect_timeout": 5}}}
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(inv))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=3, max_tokens=1024, temperatures=[0.7])
    pb["prompts"] = pb["prompts"][:4]
    (tmp_path / "playbooks").mkdir(exist_ok=True)
    (tmp_path / "playbooks" / "diagnose-mtp.yaml").write_text(yaml.safe_dump(pb))
    (tmp_path / "playbooks" / "nightly.yaml").write_text((ROOT / "playbooks" / "nightly.yaml").read_text())


def test_a_night_against_an_unreachable_host_leaves_four_artefacts_and_a_history_row(tmp_path):
    write_inventory(tmp_path)
    t0 = time.time()
    r = cli("nightly", "-H", "dead", "--metrics-file", "textfile.prom", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    doc = json.loads((run_dir / "summary.json").read_text())
    assert doc["status"] == "failed" and doc["exit_code"] == 2 and doc["host"]["name"] == "dead"
    assert doc["cause"]["type"] == "ConnectError" and "cannot reach root@127.0.0.1" in doc["cause"]["message"]
    suite = ET.fromstring((run_dir / "junit.xml").read_text())
    assert suite.get("failures") == "1"
    (case,) = suite.findall("testcase")
    assert case.get("name") == "run" and "cannot reach root@127.0.0.1" in case.find("failure").get("message")
    prom = (run_dir / "metrics.prom").read_text()
    assert 'mtp_remote_up{host="dead",playbook="nightly-mtp"} 0' in prom
    assert 'mtp_remote_run_failed{host="dead",playbook="nightly-mtp"} 1' in prom
    assert (tmp_path / "textfile.prom").read_text() == prom
    stamp = float(next(ln for ln in prom.splitlines() if ln.startswith("mtp_remote_last_run_timestamp_seconds")).split()[-1])
    assert t0 - 1 <= stamp <= time.time() + 1
    (row,) = store.history(tmp_path / "runs" / "history.sqlite")
    assert (row["run_id"], row["status"], row["exit_code"]) == (run_dir.name, "failed", 2)
    # it failed before any sample: nothing suggests --resume, and the directory cannot pose as resumable
    assert "--resume" not in r.stdout + r.stderr and "nothing to resume" in r.stderr
    assert not (run_dir / "run.json").exists() and not (run_dir / "samples.jsonl").exists()
    # outside a terminal the error is one line, not wrapped at 80 columns
    (err_line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert err_line.endswith("run again once this is fixed)")


def test_a_night_with_a_broken_playbook_still_leaves_its_artefacts(tmp_path):
    write_inventory(tmp_path)
    (tmp_path / "playbooks" / "nightly.yaml").write_text("name: nightly-mtp\nprofiles: 3\n")
    r = cli("nightly", cwd=tmp_path)
    assert r.returncode == 2
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert {p.name for p in run_dir.iterdir()} == {"summary.json", "junit.xml", "metrics.prom"}
    doc = json.loads((run_dir / "summary.json").read_text())
    assert doc["cause"]["type"] == "ConfigError" and doc["host"]["name"] == "sim"
    assert store.history(tmp_path / "runs" / "history.sqlite")[0]["status"] == "failed"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A healthy run (A, through the api) and a state_leak run (B, the CLI as a process from a subdirectory)."""
    root = tmp_path_factory.mktemp("runs-ux")
    write_inventory(root)
    a = api.diagnose(inventory=root / "inventory.yaml", playbook=root / "playbooks" / "diagnose-mtp.yaml",
                     runs_dir=root / "runs", host="sim")
    write_inventory(root, faults="state_leak")
    (root / "sub").mkdir()
    b = cli("diagnose", "--runs-dir", "../runs", cwd=root / "sub")  # inventory found in the parent directory
    assert b.returncode == 1, b.stdout + b.stderr
    return root, a, b


def test_a_run_opens_with_one_line_and_ends_with_its_report_and_next_step(two_runs):
    root, a, b = two_runs
    lines = b.stdout.splitlines()
    run_b = next(p.name for p in (root / "runs").iterdir() if p.is_dir() and p.name != a.run_id)
    opening = [ln for ln in lines if f"run {run_b}:" in ln]
    assert len(opening) == 1, b.stdout
    for part in ("host sim [local]", "engine sim (simulated)", "playbook diagnose-mtp", "36 requests planned over 3 profiles",  # the A/A arm counted
                 "faults injected: state_leak"):
        assert part in opening[0]
    assert f"report: ../runs/{run_b}/report.html" in b.stdout
    assert any(ln.startswith("next: find the cheapest cure: `mtp-remote mitigate --from ") for ln in lines)
    verdict_row = next(ln for ln in lines if "spec-corrupts-output" in ln)
    assert "T=0.7: mtp " in verdict_row and "/12 vs baseline 0/12" in verdict_row  # both arms named


def test_history_lists_every_diagnose(two_runs):
    root, a, _ = two_runs
    rows = store.history(root / "runs" / "history.sqlite")
    assert len(rows) == 2 and {r["status"] for r in rows} == {"completed"}
    assert a.run_id in {r["run_id"] for r in rows}


def test_report_last_re_renders_the_newest_run(two_runs):
    root, a, _ = two_runs
    newest = next(p for p in (root / "runs").iterdir() if p.is_dir() and p.name != a.run_id)
    # a fleet nightly's directory, later and named after every dated run id: not a run `report` reads
    fleet = root / "runs" / "fleet-20991231-235959-ffff"
    fleet.mkdir(exist_ok=True)
    (fleet / "summary.json").write_text(json.dumps({"schema_version": 1, "kind": "nightly-fleet", "hosts": [],
                                                    "started_at": "2099-12-31T23:59:59+00:00"}))
    (newest / "report.html").unlink()
    r = CliRunner().invoke(main, ["report", "last", "--runs-dir", str(root / "runs")])
    assert r.exit_code == 0, r.output
    html = (newest / "report.html").read_text()
    assert newest.name in html and "spec-corrupts-output" in html
    assert f"report: {newest}/report.html" in r.output
    assert "the run's exit code was 1" in r.output, "the run's code, not this command's (0)"
    r = CliRunner().invoke(main, ["report", "nosuch", "--runs-dir", str(root / "runs")])
    assert r.exit_code == 2 and "recent runs:" in r.output
    r = CliRunner().invoke(main, ["compare", a.run_id, "last", "--runs-dir", str(root / "runs"), "--json"])
    assert json.loads(r.stdout)["b"]["run_id"] == newest.name, "compare RUN last: the same newest host run"
    import shutil

    shutil.rmtree(fleet)


def test_compare_tests_the_difference_between_two_runs(two_runs):
    root, a, _ = two_runs
    r = CliRunner().invoke(main, ["compare", a.run_id, "last", "--runs-dir", str(root / "runs"), "--json"])
    assert r.exit_code == 1, r.output  # B loops significantly more
    res = json.loads(r.output)
    cells = {(c["profile"], c["temperature"]): c for c in res["cells"]}
    mtp, base = cells[("mtp", 0.7)], cells[("baseline", 0.7)]
    assert mtp["loops"]["loops_a"] == 0 and mtp["loops"]["loops_b"] >= 8 and mtp["loops"]["p_worse"] < 0.01
    assert base["loops"]["loops_a"] == base["loops"]["loops_b"] == 0 and base["loops"]["p_worse"] == 1.0
    assert mtp["speed"]["n_a"] == mtp["speed"]["n_b"] == 12 and mtp["speed"]["p_welch"] is not None
    (v,) = [v for v in res["verdicts"] if v["profile"] == "mtp"]
    # 12 clean samples per arm cannot bound the excess below the 5-point margin: inconclusive, not healthy
    assert v["b"] == "spec-corrupts-output" and v["a"] in ("healthy", "spec-slower", "inconclusive")
    r = CliRunner().invoke(main, ["compare", a.run_id, a.run_id, "--runs-dir", str(root / "runs")])
    assert r.exit_code == 0 and "0/12 → 0/12" in r.output


def test_compare_with_a_run_that_could_not_be_done_says_so(two_runs):
    import shutil

    root, a, _ = two_runs
    failed = root / "runs" / "20990101-000000-dead"
    shutil.copytree(a.run_dir, failed)
    doc = json.loads((failed / "summary.json").read_text())
    doc.update(run_id=failed.name, status="failed", cause={"kind": "transport_lost"}, cells=[], verdicts=[])
    (failed / "summary.json").write_text(json.dumps(doc))
    r = CliRunner().invoke(main, ["compare", failed.name, a.run_id, "--runs-dir", str(root / "runs")])
    assert r.exit_code == 0, r.output
    assert f"run A ({failed.name}) failed: it has no cells, so its rows show as only in B" in r.output
    assert "only in B" in r.output


def test_the_shipped_systemd_units_verify_once_pointed_at_this_checkout(tmp_path):
    import getpass
    import shutil

    if shutil.which("systemd-analyze") is None:
        pytest.skip("no systemd-analyze on this machine")
    venv_bin = os.path.dirname(sys.executable)
    for name in ("mtp-remote-nightly.service", "mtp-remote-nightly.timer"):
        text = (ROOT / "docs" / "deploy" / name).read_text()
        text = text.replace("/opt/mtp-remote/.venv/bin", venv_bin).replace("/opt/mtp-remote", str(ROOT))
        (tmp_path / name).write_text(text.replace("User=ops", f"User={getpass.getuser()}"))
    r = subprocess.run(["systemd-analyze", "verify", *(str(tmp_path / n) for n in
                        ("mtp-remote-nightly.service", "mtp-remote-nightly.timer"))],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0 and "mtp-remote" not in r.stderr, r.stderr
    cron = (ROOT / "docs" / "deploy" / "crontab").read_text()
    (line,) = [ln for ln in cron.splitlines() if ln and not ln.startswith("#") and "=" not in ln.split()[0]]
    assert line.split()[:5] == ["30", "2", "*", "*", "*"] and "mtp-remote nightly" in line


def test_an_interrupt_before_any_sample_is_recorded_and_offers_no_resume(tmp_path):
    from mtp_remote.errors import Interrupted
    from mtp_remote.experiment.runner import Hooks

    def interrupt():
        raise KeyboardInterrupt

    write_inventory(tmp_path)
    with pytest.raises(Interrupted) as e:
        api.diagnose(inventory=tmp_path / "inventory.yaml", playbook=tmp_path / "playbooks" / "diagnose-mtp.yaml",
                     runs_dir=tmp_path / "runs", hooks=Hooks(checkpoint=interrupt))
    assert e.value.exit_code == 130 and "nothing to resume" in str(e.value) and "--resume" not in str(e.value)
    doc = json.loads((e.value.run_dir / "summary.json").read_text())
    assert doc["status"] == "interrupted" and doc["exit_code"] == 130 and doc["resume"] is None
    assert not (e.value.run_dir / "run.json").exists()
    (row,) = store.history(tmp_path / "runs" / "history.sqlite")
    assert (row["status"], row["exit_code"]) == ("interrupted", 130)
