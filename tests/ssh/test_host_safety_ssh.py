"""Issue 17's host-side findings, tried as an attacker would, through the real host scripts over the real sshd on
127.0.0.1 (logged in as root, the sim as the remote): a stranger that now holds our old process group number is
never signalled; in a shared workdir (mode 1777) records, symlinks and directories another user planted are never
trusted or followed; a corrupt lock is stale only once it is a minute old; read-only commands create nothing.

"Another local user" is ``nobody``: files are planted and then ``chown``ed to it (we run as root).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.config.inventory import load_inventory
from mtp_remote.errors import LockError, RemoteError
from mtp_remote.remote import connect as transport
from mtp_remote.remote import process
from mtp_remote.serving.process import ProcessServer
from tests.conftest import free_port
from tests.support.disk import fill, small_tmpfs

pytestmark = [pytest.mark.ssh, pytest.mark.sim]

NOBODY = 65534


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _alive(pid: int) -> bool:
    try:
        return _stat(pid)[0] not in ("Z", "X")
    except OSError:
        return False


def _kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def _leaderless_group(*commands: str) -> tuple[int, dict[str, int]]:
    """A process group whose leader has exited and whose members run ``commands`` (a daemonised stranger
    looks like this): (the PGID, {command: PID})."""
    script = " ".join(f"{c} >/dev/null 2>&1 </dev/null & echo $!;" for c in commands) + " echo $$"
    out = subprocess.run(["setsid", "sh", "-c", script], capture_output=True, text=True, check=True).stdout.split()
    pids, pgid = [int(x) for x in out[:-1]], int(out[-1])
    deadline = time.monotonic() + 5
    while _alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(int(_stat(p)[2]) == pgid for p in pids) and not _alive(pgid)
    return pgid, dict(zip(commands, pids))


def _record(pgid: int, start: int, sha: str) -> process.ServerRecord:
    return process.ServerRecord(pid=pgid, pgid=pgid, start_ticks=start, cmdline=["python3", "-m", "x"],
                                profile="p", port=1, log_path="/nonexistent.log", run_id="r", started_at=0.0,
                                boot_id=Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
                                cmdline_sha256=sha)


def _cmdline_sha(pid: int) -> str:
    return hashlib.sha256(Path(f"/proc/{pid}/cmdline").read_bytes()).hexdigest()


@pytest.fixture
def ssh(sshd, tmp_path):
    """(connection over the real sshd, a HostConfig) for a sim host whose workdir is under tmp_path."""
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "h", "hosts": {"h": sshd.host_config(
        engine="sim", workdir=str(tmp_path / "wd"), port=free_port(), env={"SGLANG_SIM_TIME_SCALE": "0.01"})}}))
    host = load_inventory(inv).get(None)
    c = transport.connect(host)
    try:
        yield c, host, str(inv)
    finally:
        transport.close(c)


# -- PID reuse: a leaderless group ---------------------------------------------------------------------------

def test_a_stranger_holding_our_old_process_group_is_never_signalled(ssh, tmp_path):
    c, host, _ = ssh
    wd = tmp_path / "wd"
    wd.mkdir(mode=0o700)
    pgid, pids = _leaderless_group("sleep 301", "sleep 302")
    ours, stranger = pids["sleep 301"], pids["sleep 302"]
    try:
        # The record: our server started before both members; only "sleep 301" has our command line.
        process.write_record(c, str(wd), _record(pgid, int(_stat(ours)[19]) - 1, _cmdline_sha(ours)))
        res = process.stop_server(c, str(wd), "", term_s=2, kill_s=2, gpu_release_s=2)
        assert res.found == "group-only" and res.members == [ours] and res.strangers == [stranger]
        assert "TERM" in res.signals and f"PIDs [{stranger}]" in res.describe()
        assert not _alive(ours), "a member with our command line, started after our server, is ours"
        assert _alive(stranger), "a stranger in the group number we recorded was signalled"
    finally:
        _kill(pids.values())


def test_a_member_with_our_command_line_that_predates_our_record_is_never_signalled(ssh, tmp_path):
    c, host, _ = ssh
    wd = tmp_path / "wd"
    wd.mkdir(mode=0o700)
    pgid, pids = _leaderless_group("sleep 303")
    older = pids["sleep 303"]
    try:
        # Same command line hash, but it started before the server of the record: not a process of that server.
        process.write_record(c, str(wd), _record(pgid, int(_stat(older)[19]) + 100, _cmdline_sha(older)))
        res = process.stop_server(c, str(wd), "", term_s=2, kill_s=2, gpu_release_s=2)
        assert res.found == "gone" and res.strangers == [older] and not res.signals
        assert _alive(older)
        assert not (wd / "server.ident").exists(), "the stale record was dropped"
    finally:
        _kill(pids.values())


# -- a shared workdir (mode 1777) -----------------------------------------------------------------------------

@pytest.fixture
def shared(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o1777)
    return d


def _plant(path: Path, text: str = "", *, link_to: Path | None = None) -> None:
    """A file (or a symlink) made by another local user (``nobody``)."""
    if link_to is not None:
        path.symlink_to(link_to)
        os.lchown(path, NOBODY, NOBODY)
    else:
        path.write_text(text)
        os.chown(path, NOBODY, NOBODY)


def test_a_record_planted_in_a_shared_workdir_never_makes_stop_signal_anything(ssh, tmp_path, shared):
    c, host, inv = ssh
    victim = subprocess.Popen(["setsid", "sleep", "300"])  # root's process group: what the planted record names
    try:
        time.sleep(0.2)
        start = int(_stat(victim.pid)[19])
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        ident = f"{victim.pid} {victim.pid} {start} {boot} {_cmdline_sha(victim.pid)}\n"
        _plant(shared / "server.ident", ident)
        _plant(shared / "server.json", json.dumps({"pid": victim.pid, "pgid": victim.pid, "start_ticks": start}))
        data = yaml.safe_load(Path(inv).read_text())
        data["hosts"]["h"]["workdir"] = str(shared)
        Path(inv).write_text(yaml.safe_dump(data))
        r = CliRunner().invoke(main, ["stop", "-i", inv])
        assert r.exit_code == 0, r.output
        assert victim.poll() is None, "root's stop killed the group a planted record named"
        assert "no server recorded" in r.output and not (shared / f"uid-{os.getuid()}").exists()
        # We work in our own subdirectory (made by a run); planted there, a record is not a file of ours either.
        lc = ProcessServer(c, host, python="python3", workdir=str(shared), run_id="r1")
        lc.prepare()
        own = shared / f"uid-{os.getuid()}"
        assert lc.workdir == str(own) and own.stat().st_uid == os.getuid() and own.stat().st_mode & 0o777 == 0o700
        _plant(own / "server.ident", ident)
        res = process.stop_server(c, str(own), "", term_s=2, kill_s=2, gpu_release_s=2)
        assert res.found == "refused" and "not a file of ours" in res.reason and not res.signals
        assert victim.poll() is None
        assert oct(shared.stat().st_mode & 0o7777) == "0o1777", "the shared workdir keeps its mode"
    finally:
        victim.kill()
        victim.wait()


def test_planted_symlinks_in_a_shared_workdir_never_make_launch_write_elsewhere(ssh, tmp_path, shared):
    c, host, _ = ssh
    target = tmp_path / "root-owned"
    target.write_text("precious\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _plant(shared / "logs", link_to=elsewhere)  # a `logs` symlink and the record's temporary names, for many PIDs
    for n in range(1, 200):
        for name in ("server.ident", "server.json", "server.pid"):
            _plant(shared / f"{name}.tmp.{n}", link_to=target)
    host.workdir = str(shared)
    lc = ProcessServer(c, host, python=host.python or "python3", workdir=host.workdir, run_id="r1")
    lc.prepare(lock_owner="t@here")
    assert lc.workdir == f"{shared}/uid-{os.getuid()}"
    from mtp_remote.remote.commands import server_argv, server_env
    from tests.integration.test_lifecycle import PLAYBOOK
    rec = lc.launch("baseline", server_argv(host, PLAYBOOK, "baseline"), server_env(host, PLAYBOOK, "baseline", lc.workdir))
    try:
        assert rec.log_path.startswith(lc.workdir + "/logs/")
        assert target.read_text() == "precious\n", "a planted temporary-file symlink was written through"
        assert not list(elsewhere.iterdir()), "the log went through a planted `logs` symlink"
    finally:
        lc.stop(term_s=5, gpu_release_s=10, unlock=True)


def test_a_planted_subdirectory_or_symlink_in_its_place_is_refused_not_followed(ssh, tmp_path, shared):
    c, host, _ = ssh
    host.workdir = str(shared)
    own = shared / f"uid-{os.getuid()}"
    root_dir = tmp_path / "root-dir"
    root_dir.mkdir(mode=0o700)
    _plant(own, link_to=root_dir)
    with pytest.raises(RemoteError, match="cannot be trusted"):
        ProcessServer(c, host, python="python3", workdir=host.workdir, run_id="r1").prepare()
    assert not list(root_dir.iterdir()), "nothing was made through the planted symlink"
    own.unlink()
    own.mkdir(mode=0o700)
    os.chown(own, NOBODY, NOBODY)  # another user's directory under our name
    with pytest.raises(RemoteError, match="cannot be trusted"):
        ProcessServer(c, host, python="python3", workdir=host.workdir, run_id="r1").prepare()
    assert not list(own.iterdir())


# -- the lock ------------------------------------------------------------------------------------------------

def test_a_corrupt_lock_counts_as_stale_once_it_is_a_minute_old(ssh, tmp_path):
    c, host, _ = ssh
    lc = ProcessServer(c, host, python="python3", workdir=host.workdir, run_id="r1")
    lc.prepare()
    lock = Path(lc.workdir) / "lock"
    lock.write_bytes(b"\x00garbage\n")
    with pytest.raises(LockError, match="corrupt"):  # it may be a lock being written: never taken at once
        lc.acquire_lock("t@here")
    old = time.time() - 120
    os.utime(lock, (old, old))
    lc.acquire_lock("t@here")
    assert lock.read_text().split()[:2] == ["t@here", "r1"]
    lock.write_text("")  # empty (a full disk at create): the same rule
    os.utime(lock, (old, old))
    lc.acquire_lock("t@here")
    assert lock.read_text().split()[1] == "r1"


# -- read-only commands --------------------------------------------------------------------------------------

def test_stop_status_and_preflight_create_nothing_when_the_workdir_does_not_exist(ssh, tmp_path):
    c, host, inv = ssh
    wd = tmp_path / "wd"
    assert not wd.exists()
    for args in (["stop", "-i", inv], ["status", "-i", inv], ["preflight", "-i", inv, "--json"]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code in (0, 2) if args[0] == "preflight" else r.exit_code == 0, r.output
        assert not wd.exists(), f"{args[0]} created {wd}"
    checks = {ch["name"]: ch for ch in json.loads(r.output)}
    assert checks["workdir"]["status"] == "ok" and "does not exist yet" in checks["workdir"]["detail"]
    assert "no server recorded" in CliRunner().invoke(main, ["stop", "-i", inv]).output


# -- a full disk -------------------------------------------------------------------------------------------------

@pytest.fixture
def tiny_tmpfs(tmp_path):
    with small_tmpfs(tmp_path / "small", "64k") as mnt:
        yield mnt


def test_a_full_disk_attempt_leaves_no_empty_write_test_file(ssh, tmp_path, tiny_tmpfs):
    from mtp_remote.host import preflight as ops

    c, host, _ = ssh
    host.workdir = str(tiny_tmpfs / "wd")
    ProcessServer(c, host, python="python3", workdir=host.workdir, run_id="r1").prepare()
    fill(tiny_tmpfs / "fill")
    for _ in range(2):
        with pytest.raises(RemoteError, match="is not writable"):
            ProcessServer(c, host, python="python3", workdir=host.workdir, run_id="r1").prepare()
        checks = {ch.name: ch for ch in ops.preflight(c, host, None, host.python or "python3")}
        assert checks["workdir"].status == "fail"
    assert not list((tiny_tmpfs / "wd").glob(".write-test.*")), "a write test left its empty file"


# -- local files the connection reads ------------------------------------------------------------------------

@pytest.mark.parametrize("field", ["known_hosts", "key_file"])
def test_dev_zero_as_known_hosts_or_key_file_is_refused_at_once_naming_it(sshd, tmp_path, field):
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "h", "hosts": {"h": {**sshd.host_config(
        engine="sim", workdir=str(tmp_path / "wd")), field: "/dev/zero"}}}))
    t0 = time.monotonic()
    r = CliRunner().invoke(main, ["status", "-i", str(inv)])
    assert r.exit_code == 2 and "/dev/zero" in r.output and "Traceback" not in r.output, r.output
    assert time.monotonic() - t0 < 10
