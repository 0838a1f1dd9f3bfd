"""SSH faults are causes, against a real sshd that the test breaks: a dropped connection is re-opened (the tunnel
follows it and cut requests are sent again), an sshd that stays gone ends the run as ``transport_lost`` (exit 2,
one line, samples kept, ``partial.json`` with the resume and stop commands), and the server is stopped on
reconnect or reported as left running. The engine is the simulated one, a real process on the "host"."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from invoke import Context

from mtp_remote.experiment import diagnose as api
from mtp_remote.experiment.runner import Hooks
from mtp_remote.remote import facts
from tests.conftest import ROOT, free_port

pytestmark = [pytest.mark.ssh, pytest.mark.sim]

N_PROMPTS, N_SAMPLES = 2, 2  # small runs: these tests are about the connection, not the statistics
PER_PROFILE = N_PROMPTS * (1 + N_SAMPLES)  # greedy + samples at T=0.7
#: any verdict on complete samples (too few of them to decide is ``inconclusive``; speed varies with load)
NOT_CORRUPT = (["healthy"], ["spec-slower"], ["inconclusive"])


def _files(tmp_path: Path, server, prompts: int = N_PROMPTS, samples: int = N_SAMPLES) -> tuple[str, str, int]:
    port = free_port()
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "gpu", "hosts": {"gpu": server.host_config(
        engine="sim", workdir=str(tmp_path / "wd"), port=port, connect_timeout=1,
        env={"SGLANG_SIM_TIME_SCALE": "0.01"})}}))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=samples, max_tokens=768,
              compare={**pb["compare"], "calibration": False})  # about the connection: no A/A relaunch
    pb["prompts"] = pb["prompts"][:prompts]
    pb_path = tmp_path / "pb.yaml"
    pb_path.write_text(yaml.safe_dump(pb))
    return str(inv), str(pb_path), port


def _stored(runs: Path) -> list[dict]:
    return [json.loads(ln) for p in runs.glob("*/samples.jsonl") for ln in p.read_text().splitlines()]


def _when_samples(runs: Path, n: int, action) -> threading.Thread:
    """Run ``action`` (once) as soon as ``n`` samples are stored under ``runs``."""
    def watch():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if sum(len(p.read_text().splitlines()) for p in runs.glob("*/samples.jsonl")) >= n:
                action()
                return
            time.sleep(0.005)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _servers_on(port: int) -> list[int]:
    return [p.pid for p in facts.get_ps(Context()) if f"--port {port}" in p.args and "launch_server" in p.args]


def _error(err: str) -> str:
    """The error message of stderr, unwrapped (the console wraps long lines outside a terminal)."""
    assert err.count("error:") == 1, err
    return " ".join(err[err.index("error:"):].split())


def _cli(*args: str, on_line=None) -> tuple[int, str, str]:
    """``mtp-remote ARGS`` as its own process (the exit code and stderr a user sees; the driver's PID dies with
    it, as after a real run). ``on_line(line)`` sees stdout lines as they come."""
    p = subprocess.Popen([sys.executable, "-m", "mtp_remote.cli", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT)
    out = []
    for line in p.stdout:
        out.append(line)
        if on_line:
            on_line(line)
    err = p.stderr.read()
    return p.wait(timeout=300), "".join(out), err


def test_a_connection_dropped_during_sampling_is_reopened_and_the_cut_requests_are_sent_again(own_sshd, tmp_path):
    inv, pb, port = _files(tmp_path, own_sshd.server, prompts=4, samples=3)  # more requests than concurrency
    runs = tmp_path / "runs"
    killed: list[int] = []
    _when_samples(runs, 3, lambda: killed.extend(own_sshd.kill_sessions()))
    events: list[str] = []
    res = api.diagnose(inventory=inv, playbook=pb, host="gpu", runs_dir=runs, hooks=Hooks(on_progress=events.append))
    assert killed, "the sessions were killed while sampling"
    (verdict,) = res.summary["verdicts"]  # a verdict on every sample (speed verdicts vary on a loaded machine)
    assert verdict["kind"] in ("healthy", "spec-slower", "inconclusive") and res.exit_code == (
        3 if verdict["kind"] == "inconclusive" else 0), verdict
    baseline = res.summary["profiles"][0]
    assert baseline["ssh_drops"] >= 1 and baseline["outcome"]["kind"] == "ready"
    assert any(re.search(r"the SSH connection dropped \d+ time\(s\); re-opened; \d+ cut request", e) for e in events), events
    samples = _stored(runs)
    assert len(samples) == 2 * 4 * (1 + 3) and [s["error"] for s in samples if s["error"]] == []  # none lost
    assert "released" in baseline["stop"] and not _servers_on(port)
    # the pool is re-made on the new connection once: channels follow concurrency (16) x connections, not requests
    for prof in res.summary["profiles"]:
        assert prof["tunnel_channels"] <= (prof["ssh_drops"] + 1) * (16 + 2), prof


def test_sshd_gone_during_a_nightly_ends_it_as_transport_lost_exit_2_then_stop_and_resume_work(own_sshd, tmp_path):
    inv, pb, port = _files(tmp_path, own_sshd.server)
    runs = tmp_path / "runs"
    _when_samples(runs, 2, own_sshd.stop)
    t0 = time.monotonic()
    # as a nightly job runs it: a lost connection must be "could not be done" (2), never a verdict
    code, out, err = _cli("nightly", "-i", inv, "-p", pb, "-H", "gpu", "--runs-dir", str(runs))
    elapsed = time.monotonic() - t0
    assert code == 2, (out, err)
    assert "Traceback" not in err and "Traceback" not in out, err
    line = _error(err)
    assert "profile 'baseline' ended as transport_lost" in line and "connection refused" in line, err
    assert "mtp-remote diagnose --resume" in line and f"stop with: mtp-remote stop -i {inv} -H gpu" in line
    (run_dir,) = [d for d in runs.iterdir() if (d / "samples.jsonl").exists()]
    note = json.loads((run_dir / "partial.json").read_text())
    assert note["cause"] == "transport_lost" and note["exit_code"] == 2
    assert not (run_dir / "summary.json").exists() or json.loads((run_dir / "summary.json").read_text()).get(
        "verdicts") in (None, [])  # no verdict from a cut run
    assert any("server PID" in x for x in note["left_on_host"]) and note["stop"].startswith("mtp-remote stop")
    kept = _stored(runs)
    assert len(kept) >= 2 and all(s["error"] is None for s in kept)  # a lost connection is never a failed sample
    assert note["samples"] == len(kept)
    assert _servers_on(port), "the server is still running on the host (it was reported as left running)"
    assert elapsed < 90, elapsed
    # sshd back: the reported stop command stops it, and the resume finishes the run with a verdict
    own_sshd.start()
    code, out, err = _cli("stop", "-i", inv, "-H", "gpu")
    assert code == 0, (out, err)
    assert not _servers_on(port)
    code, out, err = _cli("diagnose", "-i", inv, "-p", pb, "-H", "gpu", "--runs-dir", str(runs),
                          "--resume", run_dir.name, "--json")
    summary = json.loads(out)
    kinds = [v["kind"] for v in summary["verdicts"]]
    assert kinds in NOT_CORRUPT and code == (3 if kinds == ["inconclusive"] else 0), (out[-2000:], err[-2000:])
    assert len({(s["profile"], s["temperature"], s["prompt_id"], s["sample_index"]) for s in _stored(runs)}) \
        == 2 * PER_PROFILE
    assert not (run_dir / "partial.json").exists()


def test_drops_while_waiting_for_readiness_and_during_stop_are_ridden_out(own_sshd, tmp_path):
    """Baseline: the connection drops under the log stream (tail -F) right after launch — not read as a crash.
    Speculative profile: it drops while stop waits for the process group — the stop is re-run and completes."""
    inv, pb, port = _files(tmp_path, own_sshd.server)
    kills: dict[str, list[int]] = {}

    def kill_later(what: str, delay: float) -> None:
        threading.Timer(delay, lambda: kills.setdefault(what, own_sshd.kill_sessions())).start()

    def on_progress(msg: str) -> None:
        if msg.startswith("baseline: launched PID") and "launch" not in kills:
            kills["launch"] = []
            kill_later("launch-killed", 0.1)
        if msg.startswith("SIGTERM sent") and "stop" not in kills and "launch-killed" in kills:
            kills["stop"] = []
            kill_later("stop-killed", 0.02)

    res = api.diagnose(inventory=inv, playbook=pb, host="gpu", runs_dir=tmp_path / "runs",
                       hooks=Hooks(on_progress=on_progress))
    assert kills.get("launch-killed") and kills.get("stop-killed"), kills
    assert [p["outcome"]["kind"] for p in res.summary["profiles"]] == ["ready", "ready"]
    kinds = [v["kind"] for v in res.summary["verdicts"]]
    assert kinds in NOT_CORRUPT and res.exit_code == (3 if kinds == ["inconclusive"] else 0), kinds
    # a stop cut by the drop is re-run: it reports the GPU memory released, or (when the host-side stop script
    # had already finished its work before the session died) the group already gone
    assert all("released" in p["stop"] or "already exited" in p["stop"] for p in res.summary["profiles"]), \
        [p["stop"] for p in res.summary["profiles"]]
    assert len(_stored(tmp_path / "runs")) == 2 * PER_PROFILE
    assert not _servers_on(port)


def test_sshd_gone_during_stop_reports_the_server_left_running_with_the_stop_command(own_sshd, tmp_path):
    inv, pb, port = _files(tmp_path, own_sshd.server)
    runs = tmp_path / "runs"
    done = []

    def on_line(line: str) -> None:
        if "SIGTERM sent" in line and not done:
            done.append(1)
            own_sshd.stop()

    code, out, err = _cli("diagnose", "-i", inv, "-p", pb, "-H", "gpu", "--runs-dir", str(runs), on_line=on_line)
    assert done and code == 2, (out, err)
    assert "Traceback" not in err, err
    line = _error(err)
    assert "transport_lost" in line and "lost while stopping" in line or "connection refused" in line, line
    assert "left on the host: server PID" in line and f"stop with: mtp-remote stop -i {inv} -H gpu" in line
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]  # (runs/ also holds history.sqlite)
    note = json.loads((run_dir / "partial.json").read_text())
    assert note["cause"] == "transport_lost" and len(_stored(runs)) == PER_PROFILE == note["samples"]
    own_sshd.start()
    code, out, err = _cli("stop", "-i", inv, "-H", "gpu")
    assert code == 0, (out, err)
    assert not _servers_on(port)
