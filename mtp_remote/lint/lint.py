"""Lint an SGLang launch line: parse it as SGLang would, then check the flag combinations.

:func:`lint_command` uses the committed flag table of the host's SGLang release (no SGLang needed here);
:func:`check_with_real_parser` asks an interpreter that has SGLang installed to parse with SGLang's own
parser and applies the same rules to what it parsed — when it answers, its verdict is preferred.
"""

from __future__ import annotations

import difflib
import logging
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from mtp_remote.errors import MtpRemoteError
from mtp_remote.lint.argv_parse import parse_argv, suggest_from
from mtp_remote.lint.cmdline import split_launch_command
from mtp_remote.lint.findings import Finding, LintResult
from mtp_remote.lint.flag_history import explain_unknown
from mtp_remote.lint.flag_table import available_versions, choose_flag_table, load_flag_table, version_key
from mtp_remote.lint.probe import run_probe
from mtp_remote.lint.rules import LintContext, apply_rules, release_notes, unexpanded_variables
from mtp_remote.lint.secrets import mask_result, secret_values


log = logging.getLogger(__name__)


def lint_command(cmd: str, *, sglang_version: str | None = None,
                 architectures: tuple[str, ...] = ()) -> LintResult:
    """Lint one launch line (``[ENV=..] [nohup] python -m sglang.launch_server ...`` or ``sglang serve``).

    ``sglang_version`` is the host's SGLang (when None: the release a container image's tag in the line names,
    ``lmsysorg/sglang:v0.5.9``, else the newest table, and ``warnings`` says so;
    for a release without its own table the nearest one is used and ``warnings`` says which); a flag the
    table lacks that another release has is reported with its history (renamed, removed, added later); ``architectures`` are the model's
    config.json ``architectures`` when known (else the model path's name decides whether the model is
    hybrid). Release-keyed rules follow ``sglang_version`` itself. Returns flags as ``{dest: value}``
    (defaults included; ``explicit`` names what the line set) and findings in argv order, then value
    checks, then rule order; every secret is masked. Raises :class:`~mtp_remote.errors.ConfigError` when
    ``cmd`` is not a launch line or ``sglang_version`` is not a version.
    """
    line = split_launch_command(cmd)
    image_note = None
    if sglang_version is None and line.image_version is not None:
        sglang_version = line.image_version  # the release the container image's tag names
        image_note = f"linted for SGLang {sglang_version}: the release the line's container image tag names"
    table, warning = choose_flag_table(sglang_version)
    if sglang_version is None:
        warning = (f"no SGLang release given: linted with SGLang {table.sglang_version}'s flag table, the newest "
                   f"of {', '.join(available_versions())}; flags are added, renamed and removed between releases, "
                   f"so name the host's release (lint-command --sglang-version V)")
    parsed = parse_argv(line.argv, table)
    ctx = LintContext(flags=parsed.values, version=sglang_version or table.sglang_version,
                      explicit=parsed.explicit, env=line.env, architectures=tuple(architectures))
    findings = [*unexpanded_variables(line.argv, parsed.owners, line.env), *with_history(parsed.findings, table),
                *apply_rules(ctx)]
    findings, unverified = split_unverifiable(findings, table, sglang_version)
    result = LintResult(flags=parsed.values, findings=findings, sglang_version=table.sglang_version,
                        source="table", env=line.env, explicit=frozenset(parsed.explicit),
                        requested_version=sglang_version, warnings=[warning] if warning else [],
                        notes=[*([image_note] if image_note else []), *release_notes(ctx), *unverified])
    return mask_result(result, secret_values(line.argv, parsed.values, parsed.owners, line.env))


def split_unverifiable(findings: list[Finding], table, requested: str | None) -> tuple[list[Finding], list[str]]:
    """``(findings, notes)``: when the table used is older than the release asked for (a 0.5.14 host linted with
    0.5.13's table), an ``unknown-flag`` that a newer table has, or that no table has and that is no near miss
    of a known flag, may be a flag of that release: it becomes a note saying so, not a finding. A near miss
    (``--speculative-num-stpes``) stays a finding."""
    if requested is None or version_key(requested)[:3] <= version_key(table.sglang_version)[:3]:
        return findings, []
    kept, notes = [], []
    newer = [v for v in available_versions() if version_key(v)[:3] > version_key(table.sglang_version)[:3]]
    for f in findings:
        if f.code != "unknown-flag" or not f.flag or not f.flag.startswith("--"):
            kept.append(f)
            continue
        having = [v for v in newer if f.flag in load_flag_table(v).by_option]
        near = f.suggestion and difflib.SequenceMatcher(None, f.flag, f.suggestion).ratio() >= TYPO_RATIO
        if having or not near:
            seen = f"SGLang {having[0]} has it" if having else "no release with a table has it"
            notes.append(f"{f.flag} is not in SGLang {table.sglang_version}'s table, which is older than "
                         f"{requested}; {seen}: it may be a flag of {requested}. Lint with the host's own parser "
                         f"(`mtp-remote preflight -H HOST` reads it) to be sure")
        else:
            kept.append(f)
    return kept, notes


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
    many = ProbeAnswer.model_validate(answer)
    if many.results is None:
        log.info("real-parser check skipped: %s", many.error)
        return None
    return [result_from_answer(one, argv, many.sglang_version, architectures)
            for one, argv in zip(many.results, argvs)]


class ProbeAnswer(BaseModel):
    """The probe's answer to ``parse-many`` (:mod:`mtp_remote.lint.sglang_probe`): the release and one
    :class:`ParseAnswer` per argv, or the ``error`` that kept it from parsing (``results`` absent)."""

    model_config = ConfigDict(extra="allow")

    sglang_version: str | None = None
    results: list[dict] | None = None
    error: Any = None


class ParseAnswer(BaseModel):
    """SGLang's own parser on one argv: ``ok`` with the ``flags`` by dest, or its ``error`` and the
    ``option_strings`` it named."""

    model_config = ConfigDict(extra="allow")

    ok: bool = False
    flags: dict | None = None
    error: Any = ""
    option_strings: Any = []


def result_from_answer(answer: dict, argv: list[str], version: str | None,
                        architectures: tuple[str, ...]) -> LintResult:
    """The lint result from the host's own SGLang parser's ``answer`` (:mod:`mtp_remote.lint.probe`) for ``argv``:
    its refusal as a finding (with the flag's history in ``version``'s table), else the release rules."""
    parsed = ParseAnswer.model_validate(answer)
    secrets = secret_values(argv, parsed.flags or {}, {}, {})
    if not parsed.ok:
        finding = _finding_from_argparse(parsed.error, parsed.option_strings)
        if version is not None:
            try:
                finding = with_history([finding], choose_flag_table(version)[0])[0]
            except MtpRemoteError:
                pass
        result = LintResult(flags={}, findings=[*unexpanded_variables(argv, {}, {}), finding],
                            sglang_version=version, source="real-parser", requested_version=version)
        return mask_result(result, secrets)
    flags = parsed.flags
    explicit = _explicit_dests(argv, flags, version)
    ctx = LintContext(flags=flags, version=version, explicit=explicit, architectures=tuple(architectures))
    owners = {n + 1: w for n, w in enumerate(argv[:-1]) if w.startswith("--")}
    findings = [*unexpanded_variables(argv, owners, {}), *apply_rules(ctx)]
    result = LintResult(flags=flags, findings=findings, sglang_version=version, source="real-parser",
                        explicit=frozenset(explicit), requested_version=version, notes=release_notes(ctx))
    return mask_result(result, secrets)


def with_history(findings: list[Finding], table) -> list[Finding]:
    """``findings`` with every ``unknown-flag`` of a flag another release has explained by its history
    (:func:`mtp_remote.lint.flag_history.explain_unknown`): renamed (the new name becomes the suggestion),
    removed (SGLang's named replacement, never a similar spelling), or added later; a flag no table knows keeps
    its did-you-mean."""
    out = []
    for f in findings:
        history = explain_unknown(f.flag, table) if f.code == "unknown-flag" and f.flag else None
        # a flag another release knows is not a misspelling: its history names the successor, or nothing
        out.append(f if history is None else Finding(f.code, f.flag, history.suggest, history.message))
    return out


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


def _explicit_dests(argv: list[str], flags: dict, version: str | None) -> set[str]:
    """Dests whose flag appears in argv, each ``--word`` resolved as argparse resolves it (exact option or
    unique prefix) against the flag table of ``version``; a word the table cannot resolve counts by its
    dest-like spelling."""
    try:
        table = choose_flag_table(version)[0]
    except MtpRemoteError:
        table = None
    options = table.options() if table else []
    out: set[str] = set()
    for word in argv:
        if not word.startswith("--"):
            continue
        head = word.split("=", 1)[0]
        if table and head in table.by_option:
            out.add(table.by_option[head].dest)
            continue
        matches = [o for o in options if o.startswith(head)]
        if table and len(matches) == 1:
            out.add(table.by_option[matches[0]].dest)
        else:
            out.add(head.lstrip("-").replace("-", "_"))
    return {d for d in out if d in flags}


def misspelled_flags(argv: list[str]) -> list[dict]:
    """The flags of an SGLang ``argv`` that no release we have a table for knows, each with the spelling the
    newest release suggests (``--speculative-num-stepz`` -> ``--speculative-num-steps``). Only near misses
    count (difflib ratio >= :data:`TYPO_RATIO` to a known flag): a flag unknown everywhere without one may
    belong to a newer release. Returns ``[{"flag", "suggestion"}]`` in argv order; SGLang refuses such a line
    at startup."""
    import shlex

    cmd = "python -m sglang.launch_server " + " ".join(shlex.quote(a) for a in argv)
    unknown: dict[str, str | None] | None = None
    for version in available_versions():
        found = {f.flag: f.suggestion for f in lint_command(cmd, sglang_version=version).findings
                 if f.code == "unknown-flag"}
        unknown = found if unknown is None else {k: unknown[k] or found[k] for k in unknown if k in found}
        if not unknown:
            return []
    return [{"flag": k, "suggestion": v} for k, v in (unknown or {}).items()
            if v and difflib.SequenceMatcher(None, k, v).ratio() >= TYPO_RATIO]


#: How close an unknown flag must be to a known one to be called a misspelling of it (difflib ratio).
TYPO_RATIO = 0.85
