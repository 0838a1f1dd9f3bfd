"""`launch`/`smoke`/`logs --help` promised groups ("a,b,c or a group name: every one of them at once") and refused
them (issue 30). Each command's -H help now says what the command does with it, and a one-host command refuses a
list with a clear error (exit 2), never a traceback."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main

MANY = ("diagnose", "mitigate", "nightly", "preflight", "status", "stop")
ONE = ("launch", "logs", "smoke", "bisect")


def _host_help(command: str) -> str:
    out = CliRunner().invoke(main, [command, "--help"], terminal_width=400).output
    return " ".join(next(ln for ln in out.splitlines() if "--host" in ln).split())


@pytest.mark.parametrize("command", MANY + ONE)
def test_the_host_option_says_whether_the_command_takes_many_hosts(command):
    text = _host_help(command)
    if command in MANY:
        assert text.endswith("a,b,c or a group name: every one of them at once."), text
    else:
        assert text.endswith("one host only."), text


@pytest.mark.parametrize("argv", [["launch", "--profile", "mtp"], ["smoke"], ["logs"], ["bisect"]])
def test_a_one_host_command_refuses_a_list_with_a_clear_error(tmp_path, argv):
    hosts = {n: {"transport": "local", "engine": "sim", "workdir": str(tmp_path / n), "port": p}
             for n, p in (("a", 31901), ("b", 31902))}
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "a", "hosts": hosts}))
    r = CliRunner().invoke(main, [*argv, "-i", str(inv), "-H", "a,b"])
    assert r.exit_code == 2 and "unknown host 'a,b'; choose one of: a, b" in r.output, r.output
    assert "Traceback" not in r.output
