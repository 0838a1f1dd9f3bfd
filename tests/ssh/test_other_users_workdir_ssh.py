"""Issue 33 blocker 2 and major 3, played by a real second unix user (``mtp-other``, made with ``useradd``; skipped
when not root) against root's tool over the real sshd on 127.0.0.1 (the sim as the remote):

- a workdir another user owns (or any directory above it) is refused before anything is read or made there: that
  user could rename our ``uid-0`` between a check and its use, or swap a symlink in its place — tried here in a
  loop while root prepares and launches, every attempt refused, the root-only target never written;
- in a shared directory of root's with the sticky bit (``/tmp``-like) our ``uid-0`` can be neither renamed nor
  replaced by the other user (the kernel refuses), tried in a loop during a whole launch and stop;
- a symlink the other user planted as the configured workdir is never followed (major 3); root's own symlink is;
- every step checks again: a workdir whose owner changed after ``prepare`` is refused by ``launch``.

The test directories live in a fresh root-owned 0755 directory under /tmp (so the other user can reach them).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from mtp_remote.config.inventory import load_inventory
from mtp_remote.errors import LaunchError, RemoteError
from mtp_remote.serving.process import ProcessServer
from mtp_remote.remote import connect as transport
from mtp_remote.remote import facts, hostscripts
from mtp_remote.remote.commands import server_argv, server_env
from tests.conftest import free_port
from tests.integration.test_lifecycle import PLAYBOOK
from tests.support.other_user import OtherUser, other_user

pytestmark = [pytest.mark.ssh, pytest.mark.sim]


@pytest.fixture
def alice() -> OtherUser:
    u = other_user()
    if not isinstance(u, OtherUser):
        pytest.skip(u)
    return u


@pytest.fixture
def base():
    d = Path(tempfile.mkdtemp(prefix="mtp-other-wd-", dir="/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def ssh(sshd, tmp_path):
    def connect(workdir: Path):
        inv = tmp_path / "inventory.yaml"
        inv.write_text(yaml.safe_dump({"default_host": "h", "hosts": {"h": sshd.host_config(
            engine="sim", workdir=str(workdir), port=free_port(), env={"SGLANG_SIM_TIME_SCALE": "0.01"})}}))
        host = load_inventory(inv).get(None)
        c = transport.connect(host)
        conns.append(c)
        return c, host

    conns: list = []
    yield connect
    for c in conns:
        transport.close(c)


def _secret(base: Path) -> Path:
    """A root-only file (0600 in a root 0700 directory): what a swapped symlink would make root write."""
    d = base / "root-only"
    d.mkdir(mode=0o700)
    f = d / "precious"
    f.write_text("precious\n")
    f.chmod(0o600)
    return f


def _hers(path: Path, user: OtherUser) -> None:
    """A directory of the other user's, mode 1777."""
    path.mkdir()
    os.chown(path, user.uid, user.gid)
    path.chmod(0o1777)


def _lifecycle(c, host) -> ProcessServer:
    return ProcessServer(c, host, python=host.python, workdir=host.workdir, run_id="r1")


def _launch(lc: ProcessServer, host):
    return lc.launch("baseline", server_argv(host, PLAYBOOK, "baseline"),
                     server_env(host, PLAYBOOK, "baseline", lc.workdir))


def _no_server_on(c, port: int) -> bool:
    return not [p for p in facts.get_ps(c) if f"--port {port}" in p.args]


def test_another_users_workdir_is_refused_before_anything_is_read_or_made(ssh, alice, base):
    wd = base / "alices"
    _hers(wd, alice)  # hers, shared with everyone (even sticky: she owns it, she may rename in it)
    c, host = ssh(wd)
    with pytest.raises(RemoteError, match=rf"cannot be trusted \({wd} \(mode drwxrwxrwt, owner uid {alice.uid}\) "
                                          r"can be changed by another user"):
        _lifecycle(c, host).prepare()
    assert not list(wd.iterdir()), "something was made in another user's directory"
    rep = hostscripts.read_workdir(c, str(wd))
    assert rep.result == "not-private" and str(alice.uid) in rep.detail
    # a directory of root's below one of hers is refused the same: she can rename the one above
    inner = base / "alices" / "inner"
    inner.mkdir(mode=0o700)
    c, host = ssh(inner)
    with pytest.raises(RemoteError, match=rf"cannot be trusted \({wd} "):
        _lifecycle(c, host).prepare()
    assert not list(inner.iterdir())


def test_rename_and_symlink_swap_races_in_another_users_directory_never_reach_root(ssh, alice, base):
    """Before: root worked in WD/uid-0 of her directory; she renamed it between a check and its use (our server
    orphaned), or swapped in a symlink to a root-only place (root's launch wrote through it). She now tries both
    in a tight loop while root prepares and launches ten times: each attempt of root's is refused, nothing of
    root's is made or written, no server starts."""
    secret = _secret(base)
    wd = base / "alices"
    _hers(wd, alice)
    loop = alice.popen(f"cd {wd} || exit 1; i=0; while [ $i -lt 100000 ]; do i=$((i+1)); "
                       f"mkdir uid-0 2>/dev/null; mv uid-0 moved 2>/dev/null; rm -rf moved; "
                       f"ln -sfn {secret.parent} uid-0 2>/dev/null; rm -f uid-0; done")
    try:
        c, host = ssh(wd)
        for _ in range(10):
            lc = _lifecycle(c, host)
            with pytest.raises(RemoteError, match="cannot be trusted"):
                lc.prepare()
            lc.workdir = f"{wd}/uid-0"  # as if it had been accepted: launch refuses on its own
            with pytest.raises(LaunchError) as e:
                _launch(lc, host)
            assert e.value.cause in ("workdir_not_private", "workdir_not_writable")  # hers, or none there now
        assert loop.poll() is None, "the racing loop ended before root's attempts did"
    finally:
        os.killpg(loop.pid, 9)
        loop.wait()
    assert secret.read_text() == "precious\n" and sorted(p.name for p in secret.parent.iterdir()) == ["precious"]
    assert _no_server_on(c, host.port)
    # lstat: her loop may have been killed between its `ln -s` and its `rm` — a symlink of hers to a root
    # directory, which Path.owner() follows (CI, stop 25: "root made" her symlink uid-0)
    assert not [p for p in wd.iterdir() if p.lstat().st_uid == 0], "root made something in her directory"


def test_in_roots_sticky_shared_dir_our_directory_can_be_neither_renamed_nor_swapped(ssh, alice, base):
    secret = _secret(base)
    wd = base / "shared"
    wd.mkdir()
    wd.chmod(0o1777)
    c, host = ssh(wd)
    lc = _lifecycle(c, host)
    lc.prepare(lock_owner="t@here")
    own = wd / f"uid-{os.getuid()}"
    assert lc.workdir == str(own) and own.stat().st_uid == 0
    # one try of each by hand: the kernel refuses (sticky bit), so no check-then-use gap is left to race
    for attempt in (f"mv {own} {wd}/moved", f"rm -rf {own}", f"ln -sfn {secret.parent} {own}",
                    f"ln -sfn {secret.parent} {own}/server.ident"):
        r = alice.run(attempt, check=False)
        assert r.returncode != 0, f"{attempt!r} succeeded as {alice.name}"
    loop = alice.popen(f"n=0; while :; do mv {own} {wd}/moved 2>/dev/null && n=$((n+1)); "
                       f"ln -sfn {secret.parent} {own} 2>/dev/null && n=$((n+1)); [ $n = 0 ] || echo $n >> {wd}/alice-wins; done")
    try:
        rec = _launch(lc, host)
        assert Path(rec.log_path).parent.parent.parent == own
        time.sleep(0.5)
        res = lc.stop(term_s=5, gpu_release_s=10, unlock=True)
        assert res.found == "running" and "TERM" in res.signals, res.describe()
    finally:
        os.killpg(loop.pid, 9)
        loop.wait()
    assert not (wd / "alice-wins").exists(), "a rename or swap of our directory succeeded as the other user"
    assert _no_server_on(c, host.port)
    assert secret.read_text() == "precious\n" and sorted(p.name for p in secret.parent.iterdir()) == ["precious"]
    assert own.is_dir() and not own.is_symlink() and not (own / "server.ident").exists()


def test_a_symlink_planted_as_the_workdir_is_not_followed_but_roots_own_is(ssh, alice, base):
    secret = _secret(base)
    pub = base / "pub"  # a world-writable place without the sticky bit would itself be refused: use /tmp-like
    pub.mkdir()
    pub.chmod(0o1777)
    planted = pub / "wd"
    alice.run(f"ln -s {secret.parent} {planted}")
    c, host = ssh(planted)
    with pytest.raises(RemoteError, match=rf"cannot be trusted \({planted} \(mode lrwxrwxrwx, owner uid {alice.uid}"):
        _lifecycle(c, host).prepare(lock_owner="t@here")
    assert sorted(p.name for p in secret.parent.iterdir()) == ["precious"], "root wrote through her symlink"
    # root's own symlink to a private directory of root's is followed: we work in the directory it leads to
    real = base / "real-wd"
    real.mkdir(mode=0o700)
    link = pub / "roots-link"
    link.symlink_to(real)
    c, host = ssh(link)
    lc = _lifecycle(c, host)
    lc.prepare(lock_owner="t@here")
    assert lc.workdir == str(real) and (real / "logs" / "r1").is_dir()
    lc.stop(term_s=2, gpu_release_s=2, unlock=True)


def test_a_workdir_whose_owner_changed_after_prepare_is_refused_by_launch(ssh, alice, base):
    wd = base / "mine"
    wd.mkdir(mode=0o700)
    c, host = ssh(wd)
    lc = _lifecycle(c, host)
    lc.prepare()
    assert lc.workdir == str(wd)
    os.chown(base, alice.uid, alice.gid)  # the directory above is hers now: she could rename ours
    with pytest.raises(LaunchError) as e:
        _launch(lc, host)
    assert e.value.cause == "workdir_not_private"
    assert _no_server_on(c, host.port)
