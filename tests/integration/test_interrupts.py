"""Interrupting ``diagnose`` at each phase, a concurrent run, and a truncated samples file — end to end with
the CLI as a real process against a sim host (local transport, the same host scripts as over SSH).

Each interrupted run exits 130, leaves no server on the host, keeps its samples, prints the resume command,
and the resumed run completes with every planned sample exactly once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from invoke import Context

from mtp_remote.remote import facts
from tests.integration.test_scenarios import write_config

pytestmark = pytest.mark.sim


def _server_on(port: int) -> list:
    return [p for p in facts.get_ps(Context())
            if f"--port {port}" in p.args and "launch_server" in p.args and not p.args.startswith("[")]


def _diagnose(inv, pb, runs, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mtp_remote.cli", "diagnose", "-i", inv, "-p", pb,
                             "--runs-dir", str(runs), *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "COLUMNS": "250"})


def _read_until(p: subprocess.Popen, pattern: str, timeout_s: float = 90) -> str:
    out = ""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        out += line
        if re.search(pattern, line):
            return out
    raise AssertionError(f"never saw {pattern!r}:\n{out}")


def _samples(runs: Path) -> list[dict]:
    files = list(runs.glob("*/samples.jsonl"))
    if not files:
        return []
    out = []
    for x in files[0].read_text().splitlines():
        try:
            out.append(json.loads(x))
        except ValueError:
            pass  # a line cut by a crash
    return out


@pytest.mark.parametrize("phase,pattern,sig", [
    ("launch", r"baseline: launched PID", signal.SIGINT),
    ("sampling", r"baseline: ready in", signal.SIGTERM),
    ("stop", r"SIGTERM sent to process group", signal.SIGINT),
])
def test_an_interrupt_at_each_phase_stops_our_servers_keeps_samples_and_resumes_exactly(tmp_path, phase, pattern,
                                                                                      sig):
    inv, pb = write_config(tmp_path, "state_leak", samples=2, max_tokens=256)
    port = yaml.safe_load(Path(inv).read_text())["hosts"]["sim"]["port"]
    runs = tmp_path / "runs"
    p = _diagnose(inv, pb, runs)
    out = _read_until(p, pattern)
    p.send_signal(sig)
    rest, _ = p.communicate(timeout=120)
    out += rest
    assert p.returncode == 130, out
    assert not _server_on(port), f"a server was left running after an interrupt at {phase}:\n{out}"
    kept = _samples(runs)
    m = re.search(r"--resume\s+(\S+)", out)
    if not kept:  # interrupted before the first sample: nothing to resume, and none suggested
        assert m is None and "nothing to resume" in out, out
        return
    assert m, out
    r = subprocess.run([sys.executable, "-m", "mtp_remote.cli", "diagnose", "-i", inv, "-p", pb, "--runs-dir",
                        str(runs), "--resume", m.group(1)], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode in (0, 1, 3), r.stdout + r.stderr
    done = [s for s in _samples(runs) if s.get("error") is None]
    keys = [(s["profile"], s["prompt_id"], s["sample_index"]) for s in done]
    assert len(keys) == len(set(keys)) == 2 * 4 * 2, "every planned sample exactly once after resume"
    assert all(k in keys for k in [(s["profile"], s["prompt_id"], s["sample_index"]) for s in kept
                                   if s.get("error") is None]), "samples kept before the interrupt are reused"
    assert not _server_on(port)


def test_a_second_run_on_a_locked_host_is_refused_and_the_first_is_untouched(tmp_path):
    inv, pb = write_config(tmp_path, None, samples=2, max_tokens=128)
    runs = tmp_path / "runs"
    first = _diagnose(inv, pb, runs)
    _read_until(first, r"baseline: launched PID")
    r = subprocess.run([sys.executable, "-m", "mtp_remote.cli", "diagnose", "-i", inv, "-p", pb, "--runs-dir",
                        str(tmp_path / "runs2")], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 2 and "locked by" in (r.stdout + r.stderr), r.stdout + r.stderr
    rest, _ = first.communicate(timeout=300)
    assert first.returncode in (0, 3), rest  # 8 clean samples per arm: inconclusive (3) is the likely verdict


def test_a_truncated_samples_file_resumes_without_losing_the_next_record(tmp_path):
    inv, pb = write_config(tmp_path, None, samples=2, max_tokens=128)
    runs = tmp_path / "runs"
    p = _diagnose(inv, pb, runs)
    out = _read_until(p, r"baseline: ready in")
    deadline = time.monotonic() + 60  # interrupt once a sample is stored (before it there is nothing to resume)
    while not _samples(runs) and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out += p.communicate(timeout=120)[0]
    run_id = re.search(r"--resume\s+(\S+)", out).group(1)
    path = runs / run_id / "samples.jsonl"
    cut = '{"profile": "mtp", "temperature": 0.7, "prompt_id": "tw'
    with path.open("a") as f:
        f.write(cut)  # a write cut by a crash
    r = subprocess.run([sys.executable, "-m", "mtp_remote.cli", "diagnose", "-i", inv, "-p", pb, "--runs-dir",
                        str(runs), "--resume", run_id], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode in (0, 3), r.stdout + r.stderr  # inconclusive (3) at 8 samples per arm
    lines = path.read_text().splitlines()
    unreadable = []
    for x in lines:
        try:
            json.loads(x)
        except ValueError:
            unreadable.append(x)
    assert unreadable == [cut], "only the cut line is unreadable; the next record starts on its own line"
    done = {(s["profile"], s["prompt_id"], s["sample_index"]) for s in _samples(runs) if s.get("error") is None}
    assert len(done) == 2 * 4 * 2
