"""Secrets sweep: an ``--api-key`` and secret environment values of arbitrary names (no KEY/TOKEN pattern)
never show up in any output, any run file, any file on the host's workdir, or the host's process list.

The one exception is SGLang's own: it takes the API key only on its command line, so the server process's
argv holds it (docs/RELIABILITY.md says so); the environment secrets are nowhere, not even there.
Runs every command an operator uses against a sim host (local transport, the same scripts as over SSH):
diagnose (and its reports), launch, status, logs, preflight, smoke, stop, lint-command — locally and through
the real sshd on 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from secrets import token_hex

import pytest
from click.testing import CliRunner

from mtp_remote.cli.main import main
from tests.integration.test_lifecycle import PLAYBOOK, sim_host

pytestmark = pytest.mark.sim

#: Unique to this test process: the process list is the machine's, and another checkout's test run (another
#: session, another xdist worker) must not show up as a leak of these secrets.
_RUN = token_hex(4)
API_KEY = f"sk-SWEEP-api-{_RUN}"
ENV_SECRETS = {"DB_PASSWD": f"hunter2-SWEEP-11-{_RUN}", "ODD_NAME_X": f"opaque-SWEEP-22-{_RUN}",
               "GH_TOKEN_RO": f"ghp-SWEEP-33-{_RUN}"}
PROFILE_SECRET = ("MY_CRED", f"cred-SWEEP-44-{_RUN}")
ALL = [API_KEY, *ENV_SECRETS.values(), PROFILE_SECRET[1]]
ENV_ONLY = [*ENV_SECRETS.values(), PROFILE_SECRET[1]]


class PsWatch:
    """Samples ``ps -eo pid,args`` every 50 ms while active; keeps every line that holds a secret."""

    def __init__(self):
        self.hits: list[str] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            out = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=False).stdout
            self.hits += [line for line in out.splitlines() if any(s in line for s in ALL)]
            self._stop.wait(0.05)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


class _stopped_after:
    """Stop whatever the test launched, even when it fails half-way."""

    def __init__(self, inv: Path):
        self.inv = inv

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        CliRunner().invoke(main, ["stop", "-i", str(self.inv)])


def _only_the_server_holds_the_api_key(lines: list[str], port: int) -> None:
    for line in lines:
        assert not any(s in line for s in ENV_ONLY), f"an environment secret on a process list: {line}"
        if API_KEY in line:
            words = line.split()
            # a sim server carries its own --api-key (SGLang reads it only from argv); one on another port is
            # another test's, maybe another clone's on this machine (the key is this file's constant)
            is_server = "-m" in words and "mtp_remote.sim.launch_server" in words and "--port" in words
            is_launch_step = "setsid" in line and "nohup" in line  # the launch step's own shell, gone at once
            assert is_server or is_launch_step, f"the API key on another process's argv: {line}"


def _no_secret_in_files(root: Path, secrets: list[str], *, allow_server_log: bool = False) -> list[Path]:
    seen = []
    for f in sorted(root.rglob("*")):
        if not f.is_file():
            continue
        data = f.read_bytes()
        seen.append(f)
        for s in secrets:
            if s.encode() in data:
                if allow_server_log and s == API_KEY and f.suffix == ".log" and "/logs/" in str(f):
                    continue  # SGLang prints its server_args (api_key included) into its own log on the host
                raise AssertionError(f"{s!r} found in {f}")
    return seen


@pytest.mark.parametrize("transport", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_no_secret_leaks_from_any_command_output_file_or_process_list(tmp_path, request, transport):
    host = sim_host(tmp_path, **ENV_SECRETS)
    if transport == "ssh":  # the same host through the real sshd on 127.0.0.1
        from mtp_remote.config.inventory import HostConfig

        sshd = request.getfixturevalue("sshd")
        host = HostConfig(**sshd.host_config(engine="sim", workdir=host.workdir, port=host.port, env=host.env),
                          name="sim-test")
    pb = PLAYBOOK.model_dump()
    pb["base_flags"] = pb["base_flags"] + ["--api-key", API_KEY]
    pb["profiles"]["mtp"]["env"] = {PROFILE_SECRET[0]: PROFILE_SECRET[1]}
    pb["temperatures"], pb["samples"] = [0.7], 2
    inv = tmp_path / "inventory.yaml"
    inv.write_text(json.dumps({"default_host": "sim-test", "hosts": {"sim-test": host.model_dump(exclude={"name"})}}))
    pbf = tmp_path / "pb.yaml"
    pbf.write_text(json.dumps(pb))
    runs = tmp_path / "runs"
    cli = CliRunner()
    outputs: list[str] = []

    def run(*args, ok=(0, 1, 3)):
        r = cli.invoke(main, list(args))
        outputs.append(r.output)  # stdout and stderr
        assert r.exit_code in ok, r.output + repr(r.exception)
        return r

    with PsWatch() as ps, _stopped_after(inv):
        run("diagnose", "-i", str(inv), "-p", str(pbf), "--runs-dir", str(runs))
        run("diagnose", "-i", str(inv), "-p", str(pbf), "--runs-dir", str(runs), "--json")
        run("launch", "-i", str(inv), "-p", str(pbf), "--profile", "mtp", ok=(0,))
        live = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=False).stdout
        assert any(API_KEY in line for line in live.splitlines()), [x for x in live.splitlines() if "launch_server" in x]
        run("status", "-i", str(inv))
        run("status", "-i", str(inv), "--json")
        run("logs", "-i", str(inv), "-n", "400")
        run("preflight", "-i", str(inv), "-p", str(pbf), ok=(0, 1, 2))
        run("preflight", "-i", str(inv), "-p", str(pbf), "--json", ok=(0, 1, 2))
        run("smoke", "-i", str(inv), "-p", str(pbf), "--max-tokens", "64")
        run("smoke", "-i", str(inv), "-p", str(pbf), "--max-tokens", "64", "--json")
        run("stop", "-i", str(inv), ok=(0,))
    run("lint-command", f"python -m sglang.launch_server --model-path /m --api-key {API_KEY} --tp-size 2")
    run("lint-command", "--json", f"python -m sglang.launch_server --model-path /m --api-ke {API_KEY}")
    run("history", "--help")

    text = "\n".join(outputs)
    for s in ALL:
        assert s not in text, f"{s!r} printed:\n{text[text.find(s) - 400:text.find(s) + 100]}"
    _only_the_server_holds_the_api_key(ps.hits, host.port)
    files = _no_secret_in_files(runs, ALL)
    assert {"summary.json", "report.md", "report.html", "samples.jsonl", "run.json"} <= {f.name for f in files}
    host_files = _no_secret_in_files(Path(host.workdir), ALL, allow_server_log=True)
    assert any(f.suffix == ".log" for f in host_files)
    assert not list(Path(host.workdir).glob(".launch-env.*")), "the environment file was removed"
