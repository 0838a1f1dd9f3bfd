"""Issue 33 major 4 and the minor on a non-UTF-8 lock: the host lock is never taken over while its run lives — not
by the same ``user@host`` from another machine (containers, cloned VMs: the lock names its machine, boot and a
random instance), not when it is older than 6 h (a GPU ``mitigate`` or a nightly: the holder touches it every
30 s, and only a lock untouched for 5 min is stale, by the host's own clock) — and a lock whose line holds a byte
that is not UTF-8 is judged and taken over like any other (the takeover compares the line's bytes, hashed).
Local transport, the real host scripts."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from invoke import Context

from mtp_remote.errors import LockError
from mtp_remote.serving.process import ProcessServer
from mtp_remote.remote import lock as lock_commands, lockbeat
from tests.integration.test_lifecycle import sim_host

OWNER = "ci@runner"


def _lc(tmp_path, run_id: str = "r1") -> ProcessServer:
    host = sim_host(tmp_path)
    return ProcessServer(Context(), host, python=sys.executable, workdir=host.workdir, run_id=run_id)


def _plant(lc: ProcessServer, line: bytes, *, touched_s_ago: float = 0.0) -> Path:
    lock = Path(lc.workdir) / "lock"
    lock.write_bytes(line + b"\n")
    t = time.time() - touched_s_ago
    os.utime(lock, (t, t))
    return lock


def test_the_same_owner_from_another_machine_never_takes_a_live_lock(tmp_path):
    lc = _lc(tmp_path)
    lc.prepare()
    # the other machine's driver: the same user@host name, a PID that does not exist here, another machine id
    _plant(lc, f"{OWNER} other-run {int(time.time())} 999999 0123456789ab.deadbeef".encode())
    with pytest.raises(LockError, match=f"locked by {OWNER} .run other-run, alive: its heartbeat"):
        lc.acquire_lock(OWNER)
    # the same line written on this machine and boot by a driver that is gone: a killed run, taken over
    lock = _plant(lc, f"{OWNER} other-run {int(time.time())} 999999 {lockbeat.machine()}.deadbeef".encode())
    lc.acquire_lock(OWNER)
    assert lock.read_text().split()[1] == "r1"
    lc.release_lock()


def test_a_lock_older_than_six_hours_whose_run_lives_is_never_taken_over(tmp_path):
    lc = _lc(tmp_path)
    lc.prepare()
    seven_h_ago = int(time.time()) - 7 * 3600
    _plant(lc, f"other@box long-run {seven_h_ago} 1 0123456789ab.cafe0001".encode(), touched_s_ago=20)
    with pytest.raises(LockError, match="alive: its heartbeat 2[0-9] s ago"):
        lc.acquire_lock(OWNER)
    lock = _plant(lc, f"other@box long-run {seven_h_ago} 1 0123456789ab.cafe0001".encode(),
                  touched_s_ago=lockbeat.STALE_S + 60)
    lc.acquire_lock(OWNER)  # no heartbeat for over 5 min: its run is dead
    assert lock.read_text().split()[:2] == [OWNER, "r1"]
    lc.release_lock()


def test_a_held_lock_is_touched_while_its_run_lives_and_not_after(tmp_path, monkeypatch):
    monkeypatch.setattr(lockbeat, "BEAT_S", 0.2)
    lc = _lc(tmp_path)
    lc.prepare(lock_owner=OWNER)
    lock = Path(lc.workdir) / "lock"
    assert lock.read_text().split()[4] == lockbeat.instance()
    old = time.time() - 1000
    os.utime(lock, (old, old))
    time.sleep(1.0)
    assert time.time() - lock.stat().st_mtime < 5, "the heartbeat did not touch the lock"
    other = _lc(tmp_path, "r2")
    with pytest.raises(LockError, match="alive: its heartbeat"):
        other.acquire_lock("someone@else")
    lc.release_lock()
    assert not lock.exists()


@pytest.mark.parametrize("line", [b"ci\xff@runner r0 100 1", b"\xff\xfe garbage"], ids=["old-epoch", "corrupt"])
def test_a_lock_with_a_byte_that_is_not_utf8_is_stale_like_any_other(tmp_path, line):
    lc = _lc(tmp_path)
    lc.prepare()
    lock = _plant(lc, line, touched_s_ago=120)
    lc.acquire_lock(OWNER)
    assert lock.read_text().split()[:2] == [OWNER, "r1"]
    lc.release_lock()


def test_a_lock_released_while_we_look_at_it_is_taken_not_read_as_empty(tmp_path, monkeypatch):
    """Stop 38, four workers: an interrupted run released its lock (``rm``) between the resume's failed link and
    its read of the lock, and the resume was refused: "the host lock … is corrupt ('')". The lock is now read
    through a second name of its own; when it is gone by then, the link is tried again. An ``ln`` stand-in plays
    the holder: it removes the lock as the script links it to read."""
    shim = tmp_path / "bin"
    shim.mkdir()
    real_ln = next(p for p in ("/usr/bin/ln", "/bin/ln") if os.path.exists(p))
    (shim / "ln").write_text(
        "#!/bin/sh\n"
        f'case "$1" in */lock) [ -e "{tmp_path}/released" ] || {{ : > "{tmp_path}/released"; rm -f "$1"; }} ;; esac\n'
        f'exec {real_ln} "$@"\n')
    (shim / "ln").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    lc = _lc(tmp_path, run_id="resume")
    lc.prepare()
    _plant(lc, f"{OWNER} interrupted {int(time.time())} {os.getpid()} {lockbeat.machine()}.cafe0002".encode())
    lc.acquire_lock(OWNER)
    assert (tmp_path / "released").exists()  # the holder did release it mid-look
    wd = Path(lc.workdir)
    assert (wd / "lock").read_text().split()[:2] == [OWNER, "resume"]
    assert sorted(p.name for p in wd.iterdir() if p.name.startswith(".lock")) == []
    lc.release_lock()
    # a live holder that does not release: refused, and the second name it was read through is gone too
    _plant(lc, f"{OWNER} live {int(time.time())} {os.getpid()} {lockbeat.machine()}.cafe0003".encode())
    with pytest.raises(LockError, match="run live"):
        lc.acquire_lock(OWNER)
    assert sorted(p.name for p in wd.iterdir() if p.name.startswith(".lock")) == []


def test_a_stale_lock_released_during_the_takeover_is_taken_as_a_free_one(tmp_path, monkeypatch):
    """The takeover's compare-and-swap waits for its mutex (here held by a contender that never lets go); its
    holder released the lock meanwhile. The takeover says "gone" and the lock is linked anew, not judged as the
    empty line a read of the missing file gives ("corrupt ('')")."""
    lc = _lc(tmp_path, run_id="after")
    lc.prepare()
    stale = _plant(lc, f"{OWNER} killed {int(time.time())} 999999 {lockbeat.machine()}.cafe0004".encode())
    (Path(lc.workdir) / "lock.takeover").mkdir()  # a contender's mutex, fresh: the takeover gives up after ~5 s
    swaps = []
    real = lock_commands.take_over

    def released_first(c, path, seen_sha, mine):
        stale.unlink()
        swaps.append(out := real(c, path, seen_sha, mine))
        return out

    monkeypatch.setattr(lock_commands, "take_over", released_first)
    lc.acquire_lock(OWNER)
    assert swaps == ["gone\n"]
    assert stale.read_text().split()[:2] == [OWNER, "after"]
    lc.release_lock()
