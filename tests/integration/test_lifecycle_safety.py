"""Lifecycle safety against the simulated engine as a real process (local transport, same scripts as SSH).

The identity record is read once after exec even when ``setsid`` is slow; a record naming the caller's own
process group is never signalled; a launch that cannot write its record leaves no server; the workdir's
mode is never changed; two contenders for a stale lock never both win; a stop interrupted after the leader
died still waits for the recorded children; one launch cycle costs a handful of round trips.
"""

from __future__ import annotations

import collections
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
from invoke import Context

from mtp_remote.errors import LaunchError, LockError, RemoteError
from mtp_remote.serving.process import ProcessServer
from mtp_remote.remote import facts, process
from mtp_remote.remote.commands import server_argv, server_env
from tests.integration.test_lifecycle import PLAYBOOK, sim_host
from tests.support import serving
from tests.support.disk import fill, small_tmpfs

pytestmark = pytest.mark.sim

_STARTED: list[ProcessServer] = []


@pytest.fixture(autouse=True)
def _stop_what_tests_started():
    yield
    while _STARTED:
        lc = _STARTED.pop()
        try:
            lc.stop(term_s=10, gpu_release_s=10)
        except Exception as e:  # noqa: BLE001 - best effort cleanup of a failed test
            print(f"cleanup: {e}")


def lifecycle(host, run_id: str = "r1", c=None) -> ProcessServer:
    lc = ProcessServer(c or Context(), host, python=sys.executable, workdir=host.workdir, run_id=run_id)
    lc.prepare()
    _STARTED.append(lc)
    return lc


def launch(lc: ProcessServer, profile: str = "baseline"):
    return lc.launch(profile, server_argv(lc.host, PLAYBOOK, profile), server_env(lc.host, PLAYBOOK, profile, lc.workdir))


def alive(pid: int) -> bool:
    info = facts.get_process_info(Context(), pid)
    return info is not None and info.alive


def group_alive(pgid: int) -> list[int]:
    return [p.pid for p in facts.group_members(facts.get_ps(Context()), pgid) if not p.args.startswith("[")]


def ours_running(lc) -> list:
    """Live server processes on this test's port (other sessions run sims on this machine too)."""
    return [p for p in facts.get_ps(lc.c) if f"--port {lc.host.port}" in p.args and not p.args.startswith("[")]


@pytest.fixture
def slow_setsid(tmp_path, monkeypatch):
    """A ``setsid`` on PATH that sleeps 0.1 s before exec'ing the real one: the window in which
    ``/proc/PID/stat`` still shows the launching shell's group is widened from microseconds to 100 ms."""
    real = shutil.which("setsid")
    d = tmp_path / "slowbin"
    d.mkdir()
    (d / "setsid").write_text(f"#!/bin/sh\nsleep 0.1\nexec {real} \"$@\"\n")
    (d / "setsid").chmod(0o755)
    monkeypatch.setenv("PATH", f"{d}:{os.environ['PATH']}")
    return d


def test_the_identity_record_is_read_after_exec_even_with_a_slow_setsid(tmp_path, slow_setsid):
    host = sim_host(tmp_path)
    lc = lifecycle(host)
    my_group = os.getpgrp()
    for i in range(5):
        rec = launch(lc)
        info = facts.get_process_info(lc.c, rec.pid)
        assert rec.pgid == rec.pid == info.pgid, f"try {i}: the record holds the launching shell's group"
        assert rec.pgid != my_group
        assert info.cmdline[1:3] == ("-m", "mtp_remote.sim.launch_server")
        assert rec.start_ticks == info.start_ticks
        stored = process.read_record(lc.c, lc.workdir)
        assert (stored.pid, stored.pgid, stored.start_ticks) == (rec.pid, rec.pgid, rec.start_ticks)
        assert (Path(lc.workdir) / "server.ident").read_text().split()[:3] == [str(rec.pid)] * 2 + [str(rec.start_ticks)]
        res = lc.stop(term_s=10, gpu_release_s=10)
        assert res.found == "running" and "TERM" in res.signals
        assert not group_alive(rec.pgid)
    assert os.getpgrp() == my_group  # and we are still here: our own group was never signalled


def test_a_record_naming_the_callers_own_group_is_never_signalled(tmp_path):
    """The old failure: a record holding the launching shell's group made stop kill the tool itself. The stop
    runs in a child process in a session of its own, whose group the record names (so a regression kills
    only that child): stop refuses, the child lives, the record is dropped."""
    wd = tmp_path / "wd"
    wd.mkdir()
    code = textwrap.dedent(f"""
        import os, sys
        from invoke import Context
        from mtp_remote.remote import facts, process
        c = Context()
        me = os.getpid()
        info = facts.get_process_info(c, me)
        assert os.getpgrp() == me
        rec = process.ServerRecord(pid=me, pgid=me, start_ticks=info.start_ticks, cmdline=list(info.cmdline),
                                   profile="baseline", port=1, log_path="x", run_id="r", started_at=0.0)
        process.write_record(c, {str(wd)!r}, rec)
        res = process.stop_server(c, {str(wd)!r}, "", term_s=2, gpu_release_s=2)
        print("FOUND", res.found, res.signals, res.reason)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       start_new_session=True, check=False)
    assert p.returncode == 0, p.stderr
    assert "FOUND refused [] process group" in p.stdout and "holds the caller" in p.stdout
    assert not (wd / "server.json").exists()


def test_a_launch_that_cannot_write_its_record_stops_the_server_it_started(tmp_path, monkeypatch):
    """``mv`` of the record fails after the server started (as on a disk that fills in between): the
    server just started is SIGKILLed, nothing is left running, and the error says so."""
    real = shutil.which("mv")
    d = tmp_path / "bin"
    d.mkdir()
    (d / "mv").write_text(f'#!/bin/sh\ncase "$*" in *server.json) echo "mv: No space left on device" >&2; exit 1 ;; esac\n'
                          f'exec {real} "$@"\n')
    (d / "mv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{d}:{os.environ['PATH']}")
    host = sim_host(tmp_path)
    lc = lifecycle(host)
    with pytest.raises(LaunchError) as e:
        launch(lc)
    assert e.value.cause == "record_write_failed" and "was stopped" in e.value.message
    time.sleep(0.3)
    assert not ours_running(lc), "an untracked server was left running"
    assert not (Path(lc.workdir) / "server.ident").exists()


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 64 KiB tmpfs under tmp_path (root only; skipped otherwise)."""
    with small_tmpfs(tmp_path / "small", "64k") as mnt:
        yield mnt


def test_a_full_disk_starts_nothing_and_says_the_workdir_is_not_writable(tmp_path, tiny_tmpfs):
    host = sim_host(tmp_path)
    host.workdir = str(tiny_tmpfs / "wd")
    lc = lifecycle(host)
    fill(tiny_tmpfs / "fill")
    with pytest.raises(LaunchError) as e:
        launch(lc)
    assert e.value.cause in ("workdir_not_writable", "record_write_failed"), e.value.message
    time.sleep(0.2)
    assert not ours_running(lc)
    assert not list(Path(lc.workdir).glob(".launch-env.*")), "the environment file was removed"


def test_a_read_only_workdir_is_refused_before_anything_starts(tmp_path, tiny_tmpfs):
    from mtp_remote.host import preflight as ops

    (tiny_tmpfs / "wd" / "logs" / "r1").mkdir(parents=True)
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_tmpfs)], check=True)
    host = sim_host(tmp_path)
    host.workdir = str(tiny_tmpfs / "wd")
    with pytest.raises(RemoteError, match="is not writable"):
        ProcessServer(Context(), host, python=sys.executable, workdir=host.workdir, run_id="r1").prepare()
    checks = {c.name: c for c in ops.preflight(Context(), host, None, sys.executable)}
    assert checks["workdir"].status == "fail" and "not writable" in checks["workdir"].detail


def test_an_existing_workdir_keeps_its_mode_and_new_ones_are_private(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    host = sim_host(tmp_path)
    host.workdir = str(shared)
    lifecycle(host)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    host.workdir = str(tmp_path / "new" / "wd")
    lifecycle(host)
    assert stat.S_IMODE((tmp_path / "new" / "wd").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "new" / "wd" / "logs").stat().st_mode) == 0o700


def test_two_contenders_for_a_stale_lock_never_both_win(tmp_path):
    host = sim_host(tmp_path)
    wins = []
    for i in range(20):
        a, b = (ProcessServer(Context(), host, python=sys.executable, workdir=host.workdir, run_id=f"c{i}-{x}")
                for x in "ab")
        a.prepare()
        (Path(a.workdir) / "lock").write_text(f"old@gone dead-run {int(time.time()) - 7 * 3600} 1\n")
        won = []

        def take(lc, won=won):
            try:
                lc.acquire_lock(f"{lc.run_id}@here")
                won.append(lc.run_id)
            except LockError:
                pass

        ts = [threading.Thread(target=take, args=(lc,)) for lc in (a, b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert len(won) == 1, f"try {i}: winners {won}"
        assert (Path(a.workdir) / "lock").read_text().split()[1] == won[0]
        wins.append(won[0])
        (Path(a.workdir) / "lock").unlink()
    assert len(wins) == 20


def test_a_stop_interrupted_after_the_leader_died_waits_for_the_recorded_children(tmp_path):
    lc = lifecycle(sim_host(tmp_path, SGLANG_SIM_FAULTS="stale_orphan"))
    rec = launch(lc)
    assert lc.wait_ready(rec, timeout_s=60, health=serving.health_check(f"http://127.0.0.1:{lc.host.port}")).ok
    kids = {pid for pid, _ in process.read_record(lc.c, lc.workdir).children}
    assert kids
    os.killpg(rec.pgid, 9)  # the first stop got as far as killing the group, then was interrupted
    deadline = time.monotonic() + 10
    while group_alive(rec.pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    held = {a.pid for a in facts.get_gpu_apps(lc.c, lc.smi)}
    assert held & kids, "the orphaned scheduler still holds GPU memory"
    res = lc.stop(term_s=10, gpu_release_s=20)
    assert res.found == "group-only" and "KILL(orphans)" in res.signals
    assert not {a.pid for a in facts.get_gpu_apps(lc.c, lc.smi)} & kids, "released before stop returned"
    assert not [k for k in kids if alive(k)]


class CountingContext(Context):
    """An Invoke Context that counts ``run`` calls: each is one SSH exec session over Fabric."""

    def __init__(self):
        super().__init__()
        object.__setattr__(self, "calls", collections.Counter())

    def run(self, command, **kw):
        self.calls[command.split()[0] if command else ""] += 1
        return super().run(command, **kw)


def test_one_launch_cycle_is_a_handful_of_round_trips(tmp_path):
    """prepare + lock, stop of a leftover, launch (+exec wait + identity + record), one log stream (ready line,
    children, the log text), stop (+group gone + strays + GPU release) + unlock: 5 exec sessions (37 before the
    host-side scripts, 11 before the log stream)."""
    host = sim_host(tmp_path)
    c = CountingContext()
    lc = lifecycle(host, c=c)
    c.calls.clear()  # the helper prepared the workdir already
    lc.prepare(lock_owner="me@here")
    lc.stop(term_s=10, gpu_release_s=10)
    rec = launch(lc)
    n_launch = sum(c.calls.values())
    stream = lc.follow(rec)
    out = lc.wait_ready(rec, timeout_s=60, stream=stream,
                        health=lambda: httpx.get(f"http://127.0.0.1:{host.port}/health", timeout=2).status_code == 200)
    assert out.ok
    res = lc.stop(term_s=10, gpu_release_s=10, unlock=True)
    assert res.found == "running" and res.unlocked
    assert stream.wait_end(3.0) and "fired up and ready to roll" in stream.text
    total = sum(c.calls.values())
    assert n_launch == 3, dict(c.calls)  # prepare + lock, stop (nothing recorded), launch
    assert total == 5, dict(c.calls)


def test_ctrl_c_while_launch_waits_stops_the_server_it_started(tmp_path):
    import json
    import re
    import signal

    host = sim_host(tmp_path, SGLANG_SIM_TIME_SCALE="1.0")  # a slow start: seconds to ready
    inv = tmp_path / "inventory.yaml"
    inv.write_text(json.dumps({"default_host": "sim-test", "hosts": {"sim-test": host.model_dump(exclude={"name"})}}))
    pb = tmp_path / "pb.yaml"
    pb.write_text(json.dumps(PLAYBOOK.model_dump()))
    p = subprocess.Popen([sys.executable, "-m", "mtp_remote.cli", "launch", "-i", str(inv), "-p", str(pb),
                          "--profile", "baseline"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, "COLUMNS": "200"})
    out = ""
    pid = None
    deadline = time.monotonic() + 60
    while pid is None and time.monotonic() < deadline:
        line = p.stdout.readline()
        out += line
        m = re.search(r"launched PID (\d+)", line)
        if m:
            pid = int(m.group(1))
    assert pid, out
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    rest, _ = p.communicate(timeout=60)
    out += rest
    assert p.returncode == 130, out
    assert f"stopping the server we started (PID {pid})" in out
    assert not alive(pid)
    assert not (Path(host.workdir) / "server.json").exists()
