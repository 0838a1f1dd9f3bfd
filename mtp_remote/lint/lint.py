"""Lint an SGLang launch line: parse it as SGLang would, then check the flag combinations.

:func:`lint_command` uses the committed flag table of the host's SGLang release (no SGLang needed here);
:func:`check_with_real_parser` asks an interpreter that has SGLang installed to parse with SGLang's own
parser and applies the same rules to what it parsed — when it answers, its verdict is preferred.
"""

from __future__ import annotations

import logging
import re

from mtp_remote.errors import MtpRemoteError
from mtp_remote.lint.argv_parse import parse_argv, suggest_from
from mtp_remote.lint.cmdline import split_launch_command
from mtp_remote.lint.findings import Finding, LintResult
from mtp_remote.lint.flag_table import select_flag_table
from mtp_remote.lint.probe import run_probe
from mtp_remote.lint.rules import LintContext, apply_rules, unexpanded_variables

log = logging.getLogger(__name__)


def lint_command(cmd: str, *, sglang_version: str | None = None,
                 architectures: tuple[str, ...] = ()) -> LintResult:
    """Lint one launch line (``[ENV=..] [nohup] python -m sglang.launch_server ...`` or ``sglang serve``).

    ``sglang_version`` is the host's SGLang (the newest table is used when None); ``architectures`` are
    the model's config.json ``architectures`` when known (else the model path's name decides whether the
    model is hybrid). Returns flags as ``{dest: value}`` (defaults included) and findings in argv order,
    then rule order. Raises :class:`~mtp_remote.errors.ConfigError` when ``cmd`` is not a launch line.
    """
    line = split_launch_command(cmd)
    table = select_flag_table(sglang_version)
    parsed = parse_argv(line.argv, table)
    ctx = LintContext(flags=parsed.values, version=sglang_version or table.sglang_version,
                      explicit=parsed.explicit, env=line.env, architectures=tuple(architectures))
    findings = [*unexpanded_variables(line.argv, parsed.owners, line.env), *parsed.findings, *apply_rules(ctx)]
    return LintResult(flags=parsed.values, findings=findings, sglang_version=table.sglang_version,
                      source="table", env=line.env)


def check_with_real_parser(python: str, argv: list[str], *, architectures: tuple[str, ...] = (),
                           timeout_s: float = 120.0) -> LintResult | None:
    """Parse ``argv`` (SGLang's arguments only) with the SGLang installed for ``python``.

    Runs :mod:`mtp_remote.lint.sglang_probe` under ``python`` (its own parser: ``ServerArgs.add_cli_args``),
    turns argparse's error, if any, into a finding (``unknown-flag`` with a suggestion, ``ambiguous-flag``,
    ``invalid-value``, ``missing-required``) and applies the same rules as :func:`lint_command` to the
    parsed flags. Returns None when ``python`` cannot run or has no importable SGLang. Takes ~2 s (SGLang's
    imports); use :func:`check_many_with_real_parser` for several lines.
    """
    results = check_many_with_real_parser(python, [argv], architectures=architectures, timeout_s=timeout_s)
    return results[0] if results is not None else None


def check_many_with_real_parser(python: str, argvs: list[list[str]], *, architectures: tuple[str, ...] = (),
                                timeout_s: float = 120.0) -> list[LintResult] | None:
    """:func:`check_with_real_parser` for several argvs in one interpreter start; None as there."""
    try:
        answer = run_probe(python, "parse-many", argvs, timeout_s=timeout_s)
    except MtpRemoteError as exc:
        log.info("real-parser check skipped: %s", exc)
        return None
    if "results" not in answer:
        log.info("real-parser check skipped: %s", answer.get("error"))
        return None
    version = answer.get("sglang_version")
    return [_result_from_answer(one, argv, version, architectures) for one, argv in zip(answer["results"], argvs)]


def _result_from_answer(answer: dict, argv: list[str], version: str | None,
                        architectures: tuple[str, ...]) -> LintResult:
    if not answer["ok"]:
        finding = _finding_from_argparse(answer.get("error", ""), answer.get("option_strings", []))
        return LintResult(flags={}, findings=[*unexpanded_variables(argv, {}, {}), finding],
                          sglang_version=version, source="real-parser")
    flags = answer["flags"]
    ctx = LintContext(flags=flags, version=version, explicit=_explicit_dests(argv, flags),
                      architectures=tuple(architectures))
    owners = {n + 1: w for n, w in enumerate(argv[:-1]) if w.startswith("--")}
    findings = [*unexpanded_variables(argv, owners, {}), *apply_rules(ctx)]
    return LintResult(flags=flags, findings=findings, sglang_version=version, source="real-parser")


_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)")
_AMBIGUOUS = re.compile(r"ambiguous option: (\S+?)(?:=\S*)? could match")
_REQUIRED = re.compile(r"the following arguments are required: ([^/,\s]+)")
_ARGUMENT = re.compile(r"argument ([^/:\s]+)")


def _finding_from_argparse(error: str, option_strings: list[str]) -> Finding:
    """argparse's one error message -> one finding (argparse stops at the first error)."""
    if m := _UNRECOGNIZED.search(error):
        flag = next((w for w in m.group(1).split() if w.startswith("-")), m.group(1).split()[0])
        hint = suggest_from(flag.split("=")[0], option_strings)
        return Finding("unknown-flag", flag.split("=")[0], hint, f"SGLang: {error}")
    if m := _AMBIGUOUS.search(error):
        return Finding("ambiguous-flag", m.group(1), None, f"SGLang: {error}")
    if m := _REQUIRED.search(error):
        return Finding("missing-required", m.group(1), None, f"SGLang: {error}")
    m = _ARGUMENT.search(error)
    return Finding("invalid-value", m.group(1) if m else None, None, f"SGLang: {error}")


def _explicit_dests(argv: list[str], flags: dict) -> set[str]:
    """Dests whose flag appears in argv (by the dest-like spelling of each ``--word``; prefixes included)."""
    written = {w.lstrip("-").split("=")[0].replace("-", "_") for w in argv if w.startswith("--")}
    return {d for d in flags if any(d == w or d.startswith(w) for w in written)}
