"""What a reader gets on paper: ``--help`` lists every command's whole first sentence (click cut each with
"...") and never breaks a hyphenated word or flag across lines; a table written to a file or a pipe keeps
each cell on one line, so a flag or a path in it is never broken mid-word."""

from __future__ import annotations

import re

from click.testing import CliRunner

from mtp_remote.cli.main import main


def _help(*args, columns="80"):
    return CliRunner(env={"COLUMNS": columns}).invoke(main, [*args, "--help"]).output


def test_the_command_list_shows_each_commands_whole_first_sentence():
    out = _help()
    commands = out.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    assert "..." not in commands
    entries = re.split(r"\n(?=  \S)", commands.strip("\n"))
    assert len(entries) >= 18
    for entry in entries:
        text = " ".join(entry.split()[1:])
        assert text.endswith("."), entry


def test_help_never_breaks_a_line_after_a_hyphen():
    for args in ((), ("mitigate",), ("diagnose",), ("lint-command",), ("stop",), ("nightly",)):
        out = _help(*args, columns="60")
        broken = [ln for ln in out.splitlines() if re.search(r"\w-$", ln)]
        assert not broken, (args, broken)


def test_a_table_written_to_a_file_keeps_a_long_path_and_flag_on_one_line(tmp_path):
    path = "/models/" + "-".join(["qwen3-next-80b-a3b-instruct-fp8-dynamic-mtp-head"] * 4)
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"default_host: a\nhosts:\n  a:\n    transport: local\n    engine: sim\n    port: 30555\n"
                   f"    model_path: {path}\n    env:\n      SGLANG_SIM_FAULTS: state_leak,radix_incompatible\n")
    out = CliRunner().invoke(main, ["hosts", "-i", str(inv)]).output  # CliRunner's stdout is no terminal
    assert any(path in line for line in out.splitlines())
    assert any("state_leak,radix_incompatible" in line for line in out.splitlines())
