"""Issue 33 major 5 (bar ``issue-reliability-4``): the tool SIGKILLed while ``launch.sh`` runs on the host — the same
as an SSH connection that drops then: the script's reader is gone — leaves no server without a record.

Before, ``launch.sh`` said ``pid N`` at once and died of SIGPIPE at its next line, after starting the server and
before writing its record: ``stop`` then called our own server foreign and a resume ended with a false
``launch-failed:port_in_use``. A ``setsid`` that waits 1.5 s before it execs (on PATH) holds the script in its
identity wait while the tool is killed; the record must then appear, name the live server, and ``stop`` must stop
it. Local transport (the same script as over SSH), the sim as a real process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from invoke import Context

from mtp_remote.serving.process import ProcessServer
from mtp_remote.remote import facts, process
from tests.conftest import ROOT
from tests.integration.test_lifecycle import sim_host

pytestmark = pytest.mark.sim

TOOL = textwrap.dedent("""
    import json, sys
    from invoke import Context
    from mtp_remote.config.inventory import HostConfig
    from mtp_remote.serving.process import ProcessServer
    from mtp_remote.remote.commands import server_argv, server_env
    from tests.integration.test_lifecycle import PLAYBOOK
    host = HostConfig.model_validate(json.loads(sys.argv[1]))
    lc = ProcessServer(Context(), host, python=host.python, workdir=host.workdir, run_id="r1")
    lc.prepare()
    print("launching", flush=True)
    lc.launch("baseline", server_argv(host, PLAYBOOK, "baseline"), server_env(host, PLAYBOOK, "baseline", lc.workdir))
    print("launched", flush=True)
""")


def _on_port(port: int) -> list[facts.PsEntry]:
    return [p for p in facts.get_ps(Context()) if f"--port {port}" in p.args and not p.args.startswith("[")]


@pytest.fixture
def slow_setsid_path(tmp_path) -> str:
    real = shutil.which("setsid")
    d = tmp_path / "slowbin"
    d.mkdir()
    (d / "setsid").write_text(f"#!/bin/sh\nsleep 1.5\nexec {real} \"$@\"\n")
    (d / "setsid").chmod(0o755)
    return f"{d}:{os.environ['PATH']}"


def test_a_sigkill_of_the_tool_during_launch_leaves_no_server_without_a_record(tmp_path, slow_setsid_path):
    host = sim_host(tmp_path)
    tool = subprocess.Popen([sys.executable, "-c", TOOL, json.dumps(host.model_dump(mode="json"))],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True,
                            env={**os.environ, "PATH": slow_setsid_path, "PYTHONPATH": str(ROOT)})
    try:
        assert tool.stdout.readline().strip() == "launching"
        time.sleep(0.7)  # launch.sh has started the server's shell and waits for its exec (1.5 s)
        assert tool.poll() is None, "the launch ended before the tool could be killed"
        os.kill(tool.pid, signal.SIGKILL)
        tool.wait()
        ident = Path(host.workdir) / "server.ident"
        deadline = time.monotonic() + 20
        while not ident.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        running = _on_port(host.port)
        assert running, "no server started (the test did not reach its window)"
        assert ident.exists(), f"a server runs (PIDs {[p.pid for p in running]}) with no record"
        rec = process.read_record(Context(), host.workdir)
        assert rec.pid in [p.pid for p in running] and rec.pgid == rec.pid
        lc = ProcessServer(Context(), host, python=host.python, workdir=host.workdir, run_id="r2")
        res = lc.stop(term_s=10, gpu_release_s=10)
        assert res.found == "running" and "TERM" in res.signals, res.describe()
        assert not _on_port(host.port), "our server was left running"
    finally:
        if tool.poll() is None:
            os.kill(tool.pid, signal.SIGKILL)
        for p in _on_port(host.port):  # a failed test: stop what it started, by PID
            os.kill(p.pid, signal.SIGKILL)
