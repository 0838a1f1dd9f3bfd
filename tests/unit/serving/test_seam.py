"""The runner drives any kind of server through the seam (:class:`mtp_remote.serving.base.ServerKind`).

``SubprocessKind`` is a plain class, no patching and no shell: it starts the simulated engine as a child process
of the test (``subprocess.Popen``), keeps its log in a file, polls it, and stops it with SIGTERM — a kind the
runner has never heard of. Its capabilities decide what the runner asks of it (no lock, no A/A relaunch), and
it records every call so the test reads the server's life as the runner drove it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.errors import LaunchError
from mtp_remote.experiment.runner import Runner
from mtp_remote.remote.connect import Tunnel
from mtp_remote.remote.logfile import Polled
from mtp_remote.serving.base import Capabilities, WaitOutcome
from mtp_remote.serving.readiness import follow_to_ready
from tests.support.ports import free_port
from tests.support.seam import run_through_the_seam

pytestmark = pytest.mark.sim  # the sim engine runs as a child process of the test

ROOT = Path(__file__).resolve().parents[3]


class _Child:
    pid: int

    @property
    def ident(self) -> str:
        return str(self.pid)

    @property
    def label(self) -> str:
        return f"child {self.pid}"


@dataclass
class Record(_Child):
    """The identity record of one child process."""

    profile: str
    run_id: str
    port: int
    log_path: str
    argv_masked: list[str]
    pid: int


@dataclass
class Stopped(_Child):
    found: str
    log_path: str | None = None
    gpu_release_s: float = 0.0
    unlocked: bool = False
    pid: int = 0

    def describe(self) -> str:
        return f"stopped child {self.pid}" if self.found == "running" else "nothing to stop"


@dataclass
class SubprocessKind:
    """The sim engine as a child process of this test: poll-only logs, stop by SIGTERM, no lock, no relaunch."""

    workdir: str
    port: int
    run_id: str
    refuse: set[str] = field(default_factory=set)  # profiles whose launch is refused
    capabilities: Capabilities = Capabilities(kind="subprocess", identity="pid", drain=True, gpu_release="none",
                                              logs="poll", relaunch=False, launch=True, lock=False,
                                              host_view=True)
    c: object = None
    calls: list[str] = field(default_factory=list)
    children: dict[int, subprocess.Popen] = field(default_factory=dict)
    current: Record | None = None

    def on_progress(self, msg: str) -> None:
        pass

    def prepare(self, lock_owner: str | None = None) -> None:
        self.calls.append(f"prepare lock={lock_owner is not None}")
        Path(self.workdir).mkdir(parents=True, exist_ok=True)

    def release_lock(self) -> None:
        self.calls.append("release_lock")

    def find_leftover(self) -> Record | None:
        self.calls.append("find_leftover")  # nothing of an earlier attempt survives a test

    def launch(self, profile: str, argv: list[str], env: dict[str, str]) -> Record:
        self.calls.append(f"launch {profile}")
        if profile in self.refuse:
            raise LaunchError(f"{profile}: refused by the test kind", cause="refused_by_kind")
        log_path = f"{self.workdir}/{profile}.log"
        with open(log_path, "wb") as out:
            p = subprocess.Popen([sys.executable, "-m", "mtp_remote.sim.launch_server", *argv], stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, **env},
                                 start_new_session=True)
        self.children[p.pid] = p
        self.current = Record(profile, self.run_id, self.port, log_path, list(argv), p.pid)
        return self.current

    def follow(self, rec: Record) -> None:
        self.calls.append(f"follow {rec.profile}")  # None: this kind can only poll

    def wait_ready(self, rec: Record, *, timeout_s: float, health=None, stream=None) -> WaitOutcome:
        self.calls.append(f"wait_ready {rec.profile}")
        return follow_to_ready(self, rec, stream, timeout_s, health)[0]

    def poll(self, rec: Record, offset: int) -> Polled:
        with open(rec.log_path, "rb") as f:
            f.seek(offset)
            data = f.read()
        return Polled(self.children[rec.pid].poll() is None, data.decode("utf-8", "replace"), len(data))

    @contextmanager
    def reach(self):
        self.calls.append("reach")
        yield Tunnel(url=f"http://127.0.0.1:{self.port}")

    def stop(self, *, term_s=60.0, gpu_release_s=120.0, drain_s=None, unlock=False, drain_name="") -> Stopped:
        self.calls.append(f"stop unlock={unlock}")
        rec, self.current = self.current, None
        if rec is None:
            return Stopped(found="none", unlocked=unlock)
        p = self.children[rec.pid]
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(term_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        return Stopped(found="running", log_path=rec.log_path, unlocked=unlock, pid=rec.pid)

    def read_log(self, log_path: str) -> str:
        return Path(log_path).read_text(errors="replace")

    def status(self):
        rec = self.current
        if rec is None:
            return None, "none"
        return rec, "running" if self.children[rec.pid].poll() is None else "not running"

    def kill_all(self) -> None:
        for p in self.children.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def _setup(tmp_path: Path, **playbook) -> tuple[HostConfig, Playbook, SubprocessKind]:
    port = free_port()
    host = HostConfig.model_validate(dict(name="sub", transport="local", engine="sim", port=port,
                                          workdir=str(tmp_path / "wd"), python=sys.executable,
                                          env={"SGLANG_SIM_TIME_SCALE": "0.01", "SGLANG_SIM_FAULTS": "state_leak"}))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update({"samples": 2, "max_tokens": 256, "temperatures": [0.7], "prompts": pb["prompts"][:2], **playbook})
    kind = SubprocessKind(workdir=str(tmp_path / "wd"), port=port, run_id="r1")
    return host, Playbook.model_validate(pb), kind


def _run(tmp_path: Path, host: HostConfig, playbook: Playbook, kind: SubprocessKind) -> list:
    """The runner's profile runs with ``kind``; every child the kind started is gone afterwards."""
    try:
        return Runner(host, playbook, tmp_path / "run", run_id="r1", python=sys.executable, kind=kind).run()
    finally:
        kind.kill_all()


def test_the_runner_drives_a_kind_it_has_never_heard_of_through_the_seam(tmp_path):
    host, playbook, kind = _setup(tmp_path, compare={"calibration": True, "margin": 0.5})
    try:
        runs = run_through_the_seam(kind, host, playbook, tmp_path / "run", python=sys.executable)
    finally:
        kind.kill_all()
    assert [r.profile for r in runs] == ["baseline", "mtp"]  # no A/A arm: this kind cannot relaunch
    assert [r.stop for r in runs] == [f"stopped child {pid}" for pid in kind.children]
    assert kind.calls == ["prepare lock=False", "stop unlock=False",  # the leftover (none: a new run)
                          "launch baseline", "follow baseline", "reach", "wait_ready baseline", "stop unlock=False",
                          "launch mtp", "follow mtp", "reach", "wait_ready mtp", "stop unlock=False",
                          "stop unlock=True",  # the end of the run: what is left, and the lock in the same step
                          "find_leftover"]  # the contract's own look: nothing left
    assert all(p.returncode is not None for p in kind.children.values()), "every child stopped"
    lines = (tmp_path / "run" / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 2 * 2 * 2  # 2 profiles x 2 prompts x 2 samples
    assert (tmp_path / "run" / "logs" / "mtp.log").read_text().count("The server is fired up") == 1


def test_a_launch_the_kind_refuses_is_the_profiles_launch_failure(tmp_path):
    host, playbook, kind = _setup(tmp_path)
    kind.refuse = {"mtp"}
    runs = _run(tmp_path, host, playbook, kind)
    baseline, mtp = runs
    assert baseline.launched and not mtp.launched
    assert mtp.failure() == ("refused_by_kind", "mtp: refused by the test kind", False)
    assert kind.calls[-2:] == ["launch mtp", "stop unlock=True"]


def test_a_server_that_dies_while_sampling_is_seen_by_polls_alone(tmp_path):
    """No log stream: the crash watch polls the kind (alive + new log text) and names the cause."""
    host, playbook, kind = _setup(tmp_path, max_tokens=4096, samples=4)
    t0 = time.monotonic()
    samples = tmp_path / "run" / "samples.jsonl"

    class Dying(SubprocessKind):
        def poll(self, rec, offset):
            child = self.children[rec.pid]
            if rec.profile == "mtp" and child.poll() is None and '"mtp"' in samples.read_text():
                child.kill()  # the server dies under the runner once it has answered
                child.wait()
            return super().poll(rec, offset)

    dying = Dying(workdir=kind.workdir, port=kind.port, run_id="r1")
    baseline, mtp = _run(tmp_path, host, playbook, dying)
    assert baseline.launched and not mtp.launched
    cause, _, after_ready = mtp.failure()
    assert cause == "process_exited" and after_ready is True
    assert time.monotonic() - t0 < 120


def test_the_process_kind_meets_the_same_contract(tmp_path):
    """Today's kind, opened from the host's ``server`` field, on the sim as a real process (local transport)."""
    from invoke import Context

    from mtp_remote.serving.kinds import open_server

    host, playbook, _ = _setup(tmp_path, compare={"calibration": True, "margin": 0.5})
    kind = open_server(Context(), host, python=sys.executable, run_id="r1")
    runs = run_through_the_seam(kind, host, playbook, tmp_path / "run", python=sys.executable)
    assert [r.profile for r in runs] == ["baseline", "baseline-aa", "mtp"]  # the A/A arm: a relaunch
    assert all(r.stop.startswith("stopped PID ") and r.gpu_release_s is not None for r in runs)
    assert not (Path(kind.workdir) / "lock").exists(), "the lock went with the last stop"
