"""check_with_real_parser against a real, pinned SGLang installed in a throwaway venv (CPU torch, no GPU).

The venv is cached under ``~/.cache/mtp-remote/lint-venvs/sglang-<version>`` (``$MTP_REMOTE_REAL_CACHE``
moves the parent, as for the real engine), shared by every clone on the machine. It is a step of
``make real-setup`` (``tests/support/real_sglang.py``), which ``make test`` runs before pytest (~60-90 s cold on
2 cores): nothing is built here; without it the tests fail, naming the command that builds it.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from mtp_remote.lint.cmdline import split_launch_command
from mtp_remote.lint.lint import check_many_with_real_parser, check_with_real_parser, lint_command
from tests.conftest import free_port
from tests.support.real_sglang import LINT_SGLANG_VERSION, LINT_STEP, NotBuilt, lint_python, require

PINNED = LINT_SGLANG_VERSION  # the newest table; the corpus speaks 0.5.23
COMMANDS = json.loads(
    (Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "commands" / "commands.json").read_text())

pytestmark = pytest.mark.timeout(1500)


@pytest.fixture(scope="module")
def sglang_python() -> str:
    """The lint venv ``make real-setup`` built (``~/.cache/mtp-remote/lint-venvs``, outside any clone)."""
    try:
        return str(lint_python(require((LINT_STEP,))))
    except NotBuilt as exc:
        pytest.fail(exc.message, pytrace=False)


def test_the_real_parser_reports_its_own_version_and_parses_the_field_case(sglang_python):
    argv = split_launch_command(COMMANDS["c01_field_case_mtp"]["cmd"]).argv
    result = check_with_real_parser(sglang_python, argv)
    assert result is not None and result.source == "real-parser"
    assert result.sglang_version == PINNED
    assert result.flags["speculative_algorithm"] == "NEXTN"
    assert result.flags["tp_size"] == 2
    assert result.codes == ["public-bind-without-api-key"]


NAMES = sorted(n for n, c in COMMANDS.items() if c.get("sglang_version", PINNED) == PINNED)  # the pinned parser's
ERRORS = [
    (["--cuda-graph-max-bs", "16"], "ambiguous-flag:--cuda-graph-max-bs"),
    (["--tp-size", "two"], "invalid-value:--tp-size"),
    (["--load-format", "nonsense"], "invalid-value:--load-format"),
    (["--speculative-num-stpes", "3"], "unknown-flag:--speculative-num-stpes:--speculative-num-steps"),
]
ERROR_ARGVS = [["--model-path", "/models/Qwen2.5-7B-Instruct", *extra] for extra, _ in ERRORS]


@pytest.fixture(scope="module")
def real_results(sglang_python) -> list:
    """One probe run (one ~2 s SGLang import) for every corpus command and every error case."""
    argvs = [split_launch_command(COMMANDS[n]["cmd"]).argv for n in NAMES] + ERROR_ARGVS
    results = check_many_with_real_parser(sglang_python, argvs)
    assert results is not None
    return results


@pytest.mark.parametrize("index, name", list(enumerate(NAMES)))
def test_real_parser_and_flag_table_agree_on_every_corpus_command(real_results, index, name):
    real = real_results[index]
    table = lint_command(COMMANDS[name]["cmd"], sglang_version=PINNED)
    assert table.codes == COMMANDS[name]["findings"]
    if not real.flags:  # argparse stops at its first error: that error is one of the table parser's findings
        assert len(real.codes) == 1 and real.codes[0] in table.codes
        return
    assert real.codes == table.codes
    for dest, value in COMMANDS[name]["flags"].items():
        assert real.flags[dest] == value
    assert real.to_dict()["flags"] == table.to_dict()["flags"]  # what the line set, secrets masked
    if "secret" in COMMANDS[name]:
        assert COMMANDS[name]["secret"] not in repr(real)


@pytest.mark.parametrize("index, case", list(enumerate(ERRORS)))
def test_argparse_errors_of_the_real_parser_become_the_table_parsers_findings(real_results, index, case):
    real = real_results[len(NAMES) + index]
    argv, code = ERROR_ARGVS[index], case[1]
    assert real.codes == [code]
    assert lint_command("python -m sglang.launch_server " + shlex.join(argv), sglang_version=PINNED).codes == [code]


def test_a_python_without_sglang_gives_none(tmp_path):
    import sys

    assert check_with_real_parser(sys.executable, ["--model-path", "/m"]) is None
    assert check_with_real_parser(str(tmp_path / "no-such-python"), ["--model-path", "/m"]) is None


def _spellings(table) -> list[list[str]]:
    """Every long option of the table, written whole and as two shorter prefixes, with a plausible value in
    both ``--x v`` and ``--x=v`` forms. Options whose type is an opaque SGLang callable are left out."""
    known_types = {None, "str", "int", "float", "human_readable_int", "loads", "json_list_type", "nullable_str"}
    argvs = []
    for spec in table.actions:
        if spec.action == "help" or spec.type not in known_types:
            continue
        value = (str(spec.choices[0]) if spec.choices else
                 {"int": "3", "float": "0.5", "human_readable_int": "32k", "loads": "{}", "json_list_type": "[]"}
                 .get(spec.type or "", "x"))
        for n, option in enumerate(o for o in spec.option_strings if o.startswith("--")):
            for cut in (0, 2, 5):
                written = option[: len(option) - cut] if cut < len(option) - 3 else option
                if not spec.takes_value:
                    words = [written]
                elif (n + cut) % 2 and spec.nargs not in ("+", "*"):
                    words = [f"{written}={value}"]
                else:
                    words = [written, value]
                argvs.append(["--model-path", "/m", *words])
    return argvs


def test_the_table_parser_agrees_with_sglangs_argparse_on_every_flag_and_prefix(sglang_python):
    from mtp_remote.lint.flag_table import load_flag_table

    argvs = _spellings(load_flag_table(PINNED))
    real = check_many_with_real_parser(sglang_python, argvs)
    assert real is not None and len(argvs) > 1000
    differ = []
    for argv, theirs in zip(argvs, real):
        ours = lint_command("python -m sglang.launch_server " + shlex.join(argv), sglang_version=PINNED)
        same_values = all(ours.flags.get(dest) == value for dest, value in theirs.flags.items())
        if ours.codes != theirs.codes or not same_values:
            differ.append((argv[2:], ours.codes, theirs.codes))
    assert differ == []


def test_preflight_over_ssh_lints_with_the_hosts_own_sglang_parser(sglang_python, sshd, tmp_path):
    """A host whose python has SGLang: preflight runs SGLang's own argparse there (through SSH) and uses its
    verdict; a misspelt flag in the playbook is reported with SGLang's suggestion."""
    import yaml

    from mtp_remote.config.inventory import HostConfig
    from mtp_remote.config.playbook import load_playbook
    from mtp_remote.host.preflight import preflight
    from mtp_remote.remote import connect

    pb = yaml.safe_load((Path(__file__).resolve().parents[2] / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb["profiles"]["mtp"]["flags"] += " --speculative-num-stpes 3"
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))
    host = HostConfig(name="gpu", **sshd.host_config(engine="sglang", python=sglang_python,
                                                    workdir=str(tmp_path / "wd"), port=free_port()))
    c = connect.connect(host)
    try:
        checks = {ch.name: ch for ch in preflight(c, host, load_playbook(tmp_path / "pb.yaml"), sglang_python)}
    finally:
        connect.close(c)
    assert checks["sglang"].status == "ok" and checks["sglang"].detail == PINNED
    assert checks["lint:baseline"].status == "ok" and "host's SGLang parser" in checks["lint:baseline"].detail
    mtp = checks["lint:mtp"]
    assert mtp.status == "warn" and "host's SGLang parser" in mtp.detail
    assert "unknown-flag --speculative-num-stpes" in mtp.detail
