"""Attach: two sim servers the test starts itself (a healthy baseline without speculation, and an MTP server with
the field fault, state_leak) are diagnosed with ``diagnose --attach`` — never launched, signalled or stopped by the
tool, no lock — and found ``spec-corrupts-output``, with the verdict saying what attached evidence cannot include;
both servers still run afterwards with the same PIDs and never logged a shutdown."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from tests.conftest import ROOT
from tests.sim.conftest import FIELD_FLAGS, MTP_FLAGS, sim, sim_env  # noqa: F401 - fixtures

pytestmark = pytest.mark.sim


@pytest.fixture
def pair(sim):  # noqa: F811 - the fixture imported above
    base = sim(FIELD_FLAGS)
    leak = sim(FIELD_FLAGS + MTP_FLAGS, faults="state_leak")
    return base, leak


def _playbook(tmp_path, **over) -> str:
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=3, max_tokens=1024, temperatures=[0.0, 0.7])
    pb["prompts"] = pb["prompts"][:4]
    pb.update(over)
    path = tmp_path / "pb.yaml"
    path.write_text(yaml.safe_dump(pb))
    return str(path)


def _cli(*args, cwd, timeout=900):
    return subprocess.run([sys.executable, "-m", "mtp_remote.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, cwd=cwd)


def test_attached_sims_are_diagnosed_corrupt_and_left_running_with_the_same_pids(pair, tmp_path):
    base, leak = pair
    pids = (base.proc.pid, leak.proc.pid)
    r = _cli("diagnose", "--attach", f"baseline={base.url}", "--attach", f"mtp={leak.url}",
             "-p", _playbook(tmp_path), "--runs-dir", str(tmp_path / "runs"), "--json", cwd=str(tmp_path))
    assert r.returncode == 1, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    (v,) = doc["verdicts"]
    assert v["profile"] == "mtp" and v["kind"] == "spec-corrupts-output", v["evidence"]
    assert "cannot include: no A/A relaunch" in v["evidence"] and "no launch control" in v["evidence"]
    # the opening line: no host, the endpoints, that they are not touched, and the load bound
    assert (f"no host (attached endpoints only); attached baseline={base.url}, mtp={leak.url} (never launched, "
            f"signalled or stopped; no lock); load on each at most 2 requests in flight, 2 requests/s") in r.stderr
    prof = {p["profile"]: p for p in doc["profiles"]}
    assert prof["mtp"]["speculative"] is True and prof["baseline"]["speculative"] is False
    assert prof["mtp"]["attached"]["where"] == leak.url and prof["mtp"]["attached"]["simulated"] is True
    # its flags read back from /server_info, as SGLang holds them after start-up (NEXTN is run as EAGLE)
    argv = prof["mtp"]["argv_masked"]
    assert argv[argv.index("--speculative-algorithm"):][:4] == ["--speculative-algorithm", "EAGLE",
                                                                "--speculative-draft-model-path", "/models/Qwen3.6-27B"]
    assert "--speculative-algorithm" not in prof["baseline"]["argv_masked"]
    assert prof["mtp"]["attached"]["lint"]["codes"] == []
    assert prof["mtp"]["attached"]["model"] == "/models/Qwen3.6-27B"
    assert prof["mtp"]["stop"].startswith("not stopped:") and prof["baseline"]["stop"].startswith("not stopped:")
    occupancy = prof["mtp"]["occupancy"]
    assert occupancy["limit"] == 2 and occupancy["mean_in_flight"] <= 2.0
    # 14 requests an arm at 2 a second at most: the first and last start 6.5 s apart at least
    assert occupancy["full_s"] >= 6.0, occupancy

    for sp, pid in zip(pair, pids):  # diagnosed, never touched
        assert sp.proc.poll() is None and sp.proc.pid == pid
        assert httpx.get(sp.url + "/health", timeout=10).status_code == 200
        assert "Gracefully exiting" not in sp.log and "SIGTERM" not in sp.log
    assert not (tmp_path / "wd").exists()  # no workdir, no lock: nothing ran on a host


def test_an_attached_baseline_that_speculates_is_refused(pair, tmp_path):
    _, leak = pair
    r = _cli("diagnose", "--attach", f"baseline={leak.url}", "--attach", f"mtp={leak.url}",
             "-p", _playbook(tmp_path), "--runs-dir", str(tmp_path / "runs"), cwd=str(tmp_path))
    assert r.returncode == 2 and "the attached baseline" in r.stderr and "speculates (EAGLE)" in r.stderr, r.stderr
    assert leak.proc.poll() is None


@pytest.mark.parametrize("attach,needle", [
    (["baseline=ftp://127.0.0.1:1", "mtp=http://127.0.0.1:1"], "the scheme must be one of http, https"),
    (["baseline=http://127.0.0.1:1", "bad/name=http://127.0.0.1:2"], "endpoint name 'bad/name'"),
    (["base=http://127.0.0.1:1", "mtp=http://127.0.0.1:2"], "no attached endpoint is named 'baseline'"),
    (["baseline=http://127.0.0.1:1"], "give the baseline and at least one endpoint"),
    (["http://127.0.0.1:1", "mtp=http://127.0.0.1:2"], "give NAME=URL"),
])
def test_bad_attach_arguments_are_one_error_line_and_exit_2(tmp_path, attach, needle, monkeypatch):
    # in-process (the command line is refused before anything starts: no process boundary to test); an exception
    # escaping the command would be CliRunner's exit code 1 with r.exception set, a traceback in a real process
    monkeypatch.chdir(tmp_path)
    args = [x for a in attach for x in ("--attach", a)]
    r = CliRunner().invoke(main, ["diagnose", *args, "-p", _playbook(tmp_path), "--runs-dir", str(tmp_path / "runs")])
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), (r.output, r.exception)
    assert needle in r.stderr and "Traceback" not in r.output, r.stderr


def test_an_attached_endpoint_on_a_host_port_against_a_baseline_the_tool_launches(sim, tmp_path):  # noqa: F811
    # the production server (started by hand, on the host's port 'prod') is attached through the host's tunnel; the
    # baseline is launched by the tool on the host's own port, stopped after its profile; the attached one is not
    from tests.support.ports import free_port

    leak = sim(FIELD_FLAGS + MTP_FLAGS, faults="state_leak")
    inv = {"default_host": "box", "hosts": {"box": {
        "transport": "local", "engine": "sim", "workdir": str(tmp_path / "wd"), "port": free_port(),
        "python": sys.executable, "env": {"SGLANG_SIM_TIME_SCALE": "0.01"}}}}
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(inv))
    pb = _playbook(tmp_path, profiles={"baseline": {"flags": ""}, "prod-mtp": {"attach": {"port": leak.port}}},
                   load={"concurrency": 3, "request_rate": 10})
    r = _cli("diagnose", "-i", str(tmp_path / "inventory.yaml"), "-p", pb, "--runs-dir", str(tmp_path / "runs"),
             "--json", cwd=str(tmp_path))
    assert r.returncode == 1, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    (v,) = doc["verdicts"]
    assert v["profile"] == "prod-mtp" and v["kind"] == "spec-corrupts-output", v["evidence"]
    assert "cannot include: no A/A relaunch" in v["evidence"]
    assert (f"host box [local], engine sim (simulated); attached prod-mtp=host port {leak.port} (never launched, "
            f"signalled or stopped; no lock); load on each at most 3 requests in flight, 10 requests/s") in r.stderr
    prof = {p["profile"]: p for p in doc["profiles"]}
    assert prof["baseline"]["attached"] is None and prof["baseline"]["stop"].startswith("stopped")
    assert prof["prod-mtp"]["stop"].startswith("not stopped:") and prof["prod-mtp"]["occupancy"]["limit"] == 3
    assert leak.proc.poll() is None and "Gracefully exiting" not in leak.log
    assert not (tmp_path / "wd" / "lock").exists()  # the run's lock (for the launched baseline) was released


def test_fab_diagnose_takes_the_same_attach_arguments(tmp_path):
    r = subprocess.run([sys.executable, "-m", "fabric", "diagnose", "--attach",
                        "baseline=http://127.0.0.1:1,mtp=gopher://127.0.0.1:2", "--playbook", _playbook(tmp_path),
                        "--runs-dir", str(tmp_path / "runs")], capture_output=True, text=True, timeout=120,
                       check=False, cwd=str(ROOT))
    assert r.returncode == 2 and "--attach: URL 'gopher://127.0.0.1:2': the scheme must be one of http, https" in \
        r.stderr and "Traceback" not in r.stderr, r.stderr
