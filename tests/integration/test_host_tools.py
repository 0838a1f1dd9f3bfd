"""Host scripts check the tools they need before anything, and ``stop`` never drops a record it could not check.

The field case: a container without ``awk`` (Debian's ``awk`` is a symlink through ``/etc/alternatives``, which a
minimal image may lack). There ``stop.sh`` listed no member of the server's process group, said "stopped",
deleted its record and left the server running (``status`` then listed it as foreign). Now every host script
first checks its tools (lib.sh ``need``: exit 2, ``the host lacks awk``), and a stop that could not list the
process group keeps the record. Tested with a real sim server and a PATH without awk (and one whose awk fails).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from invoke import Config, Context

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.errors import RemoteError, StopError
from mtp_remote.serving.process import ProcessServer
from mtp_remote.remote import facts, process
from mtp_remote.remote.commands import server_argv, server_env
from tests.conftest import free_port
from tests.support import serving

pytestmark = pytest.mark.sim

PLAYBOOK = Playbook.model_validate(dict(
    name="t", base_flags="--tp-size 2 --max-running-requests 8", profiles={"baseline": {"flags": ""}},
    prompts=[{"id": "p", "text": "What is 2+2?"}], temperatures=[0.0], samples=1, max_tokens=16))
AWKS = {"awk", "mawk", "gawk", "nawk", "busybox"}


def _path_without_awk(tmp_path: Path, fake_awk: str | None = None) -> str:
    """A PATH directory with every program of /usr/bin and /bin but awk (or with ``fake_awk`` as awk)."""
    d = tmp_path / "bin"
    d.mkdir()
    for src in ("/usr/bin", "/bin"):
        for name in os.listdir(src):
            if name not in AWKS and not (d / name).exists():
                (d / name).symlink_to(Path(src) / name)
    if fake_awk is not None:
        (d / "awk").write_text(fake_awk)
        (d / "awk").chmod(0o755)
    return str(d)


def _context(path: str | None = None) -> Context:
    run = {"in_stream": False, **({"env": {"PATH": path}} if path else {})}
    return Context(config=Config(overrides={"run": run}))


@pytest.fixture
def served(tmp_path):
    """A ready sim server launched with the full PATH: (lifecycle, record)."""
    host = HostConfig(name="sim-tools", transport="local", engine="sim", workdir=str(tmp_path / "wd"),
                      port=free_port(), python=sys.executable, env={"SGLANG_SIM_TIME_SCALE": "0.01"})
    lc = ProcessServer(_context(), host, python=sys.executable, workdir=host.workdir, run_id="r1")
    lc.prepare()
    rec, _ = serving.launch_ready(lc, PLAYBOOK)
    yield lc, rec
    lc.c = _context()
    lc.stop(term_s=10, gpu_release_s=10)


def _alive(pid: int) -> bool:
    info = facts.get_process_info(_context(), pid)
    return info is not None and info.alive


def test_a_stop_on_a_host_without_awk_says_so_and_leaves_server_and_record_alone(served, tmp_path):
    lc, rec = served
    lc.c = _context(_path_without_awk(tmp_path))
    with pytest.raises(RemoteError) as e:
        lc.stop(term_s=10, gpu_release_s=10)
    assert str(e.value).startswith("the host lacks awk: mtp-remote's host scripts need it (stop.sh)")
    assert e.value.returncode == 2
    assert _alive(rec.pid), "nothing was signalled"
    assert process.read_record(_context(), lc.workdir).pid == rec.pid, "the record is kept"

    lc.c = _context()
    res = lc.stop(term_s=10, gpu_release_s=10)
    assert res.found == "running" and not _alive(rec.pid)


def test_a_stop_that_cannot_list_the_process_group_keeps_the_record(served, tmp_path):
    lc, rec = served
    lc.c = _context(_path_without_awk(tmp_path, fake_awk="#!/bin/sh\nexit 1\n"))  # awk there, but it fails
    with pytest.raises(StopError) as e:
        lc.stop(term_s=10, gpu_release_s=10)
    assert f"cannot list the processes of group {rec.pgid}" in str(e.value)
    assert _alive(rec.pid)
    assert process.read_record(_context(), lc.workdir).pid == rec.pid


def test_launch_on_a_host_without_awk_starts_nothing(tmp_path):
    host = HostConfig(name="sim-tools", transport="local", engine="sim", workdir=str(tmp_path / "wd"),
                      port=free_port(), python=sys.executable, env={"SGLANG_SIM_TIME_SCALE": "0.01"})
    lc = ProcessServer(_context(), host, python=sys.executable, workdir=host.workdir, run_id="r1")
    lc.prepare()
    lc.c = _context(_path_without_awk(tmp_path))
    with pytest.raises(RemoteError, match="^the host lacks awk: .*launch.sh"):
        lc.launch("baseline", server_argv(host, PLAYBOOK, "baseline"), server_env(host, PLAYBOOK, "baseline",
                                                                                  lc.workdir))
    assert not (Path(lc.workdir) / process.RECORD).exists()
    assert not list((Path(lc.workdir) / "logs" / "r1").iterdir()), "no server log: nothing started"
