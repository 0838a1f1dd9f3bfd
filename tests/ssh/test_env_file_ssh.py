"""The server's environment file is data, never shell: a name ending in a newline (``"pwned\\n"``) is refused by
the real config loader, and even when such a file reaches the real ``launch.sh`` over the real sshd, the
host-side loader refuses it and runs nothing; values full of shell syntax reach the server verbatim.

A ``pwned`` program is put first on the host's PATH: it creates a file when run. Issue 17's blocker: the old
env file was sourced by ``sh``, so the line ``pwned\\n='x'`` ran ``pwned`` as uid 0.
"""

from __future__ import annotations

import json
import os
import stat
import time

import pytest
import yaml

from mtp_remote.config.inventory import load_inventory
from mtp_remote.errors import ConfigError
from mtp_remote.remote import connect as transport
from mtp_remote.remote import hostscripts

pytestmark = [pytest.mark.ssh]


@pytest.fixture
def trap(tmp_path):
    """A directory with an executable ``pwned`` (and ``reboot``) that leave a mark when anything runs them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mark = tmp_path / "ran"
    for name in ("pwned", "reboot"):
        p = bin_dir / name
        p.write_text(f"#!/bin/sh\necho {name} >> {mark}\n")
        p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir, mark


def _inventory(sshd, tmp_path, env: dict) -> object:
    f = tmp_path / "inventory.yaml"
    f.write_text(yaml.safe_dump({"default_host": "h", "hosts": {"h": sshd.host_config(
        engine="sim", workdir=str(tmp_path / "wd"), env=env)}}))
    return f


@pytest.mark.parametrize("name", ["pwned\n", "pwned\r\n", "A\npwned", "reboot\n"])
def test_a_newline_in_an_env_name_is_refused_by_the_real_loader(sshd, tmp_path, name):
    f = _inventory(sshd, tmp_path, {name: "x"})
    with pytest.raises(ConfigError) as e:
        load_inventory(f)
    assert str(f) in str(e.value) and "hosts.h.env" in str(e.value) and "must match" in str(e.value)
    with pytest.raises(ValueError, match="cannot be passed"):
        hostscripts.env_file_text({name: "x"})


def _launch(c, wd, env_json: str, py: str, path_dir):
    """Run the real launch.sh over ``c`` with ``env_json`` as its environment file; the 'server' is ``py -m
    envprint`` (it prints ``$EVIL`` as JSON to the log), run with the trap first on PATH."""
    log = f"{wd}/logs/r/p.log"
    os.makedirs(os.path.dirname(log), exist_ok=True)
    stdin = json.dumps({"profile": "p"}) + "\n" + env_json
    script = hostscripts.script_command("launch.sh", [wd, log, 1, 5, "-", 0, py, 2, "-m", "envprint"])
    r = c.run(f"PATH={path_dir}:$PATH {script}", in_stream=hostscripts.WholeStdin(stdin), hide=True, warn=True)
    return r, log


def test_the_real_host_script_over_sshd_never_executes_the_env_file(sshd, tmp_path, trap):
    bin_dir, mark = trap
    host = load_inventory(_inventory(sshd, tmp_path, {})).get(None)
    wd = tmp_path / "wd"
    wd.mkdir(mode=0o700)
    py = host.python or "python3"
    c = transport.connect(host)
    try:
        # A file as the old loader took it (shell lines) and a JSON one whose key ends in a newline: neither runs.
        for env_text in ("pwned\n='x'\nreboot\n", json.dumps({"pwned\n": "x", "reboot\n": "y"}) + "\n"):
            r, log = _launch(c, str(wd), env_text, py, bin_dir)
            assert "result ok" not in r.stdout, r.stdout
            assert not mark.exists(), f"the env file ran a command: {mark.read_text()}"
            assert not list(wd.glob(".launch-env.*")), "the environment file was removed"
        # A valid name whose value is all shell syntax reaches the server verbatim.
        value = "$(pwned)\n`reboot`; pwned\n'\"x"
        mod_dir = tmp_path / "mod"
        mod_dir.mkdir()
        (mod_dir / "envprint.py").write_text(
            "import json, os, time\nprint(json.dumps(os.environ.get('EVIL')), flush=True)\ntime.sleep(1)\n")
        env = hostscripts.env_file_text({"EVIL": value, "PYTHONPATH": str(mod_dir)})
        r, log = _launch(c, str(wd), env, py, bin_dir)
        assert "result ok" in r.stdout, r.stdout
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not open(log).read().strip():
            time.sleep(0.05)
        assert json.loads(open(log).read().strip().splitlines()[-1]) == value
        assert not mark.exists(), "a value was executed"
        assert not list(wd.glob(".launch-env.*"))
    finally:
        c.run(f"kill -KILL -- -$(cat {wd}/server.pid) 2>/dev/null; true", hide=True, warn=True)
        transport.close(c)
