"""Lint findings and the lint result: the shapes ``lint-command --json`` prints.

Codes are those of ``../shared/corpus/README.md``: ``public-bind-without-api-key``,
``draft-model-path-required``, ``draft-tokens-adjusted``, ``unexpanded-variable``, ``unknown-flag``,
``ambiguous-flag``, ``invalid-value`` (also a value out of its range), ``multi-node``,
``spec-attention-backend``, ``incompatible-flags`` (``suggestion`` holds the other flag of the pair); plus
``hybrid-spec-radix-cache`` (the combination that fails to start on SGLang 0.5.10-0.5.13) and
``missing-required`` (argparse's "the following arguments are required"). The compact form
``code[:flag[:suggestion]]`` is how the corpus labels name a finding. ``docs/CLASSIFIER.md`` lists them all
with an example each.

A result never holds a secret: :func:`mtp_remote.lint.secrets.mask_result` replaced every secret value
(``--api-key`` and its prefixes, secret-looking environment values) by ``***`` before it was returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Codes whose compact form carries the flag (and, for unknown-flag, the suggestion).
_FLAG_CODES = {"unknown-flag", "ambiguous-flag", "invalid-value", "missing-required", "incompatible-flags",
               "spec-attention-backend"}
#: Codes whose compact form also carries the suggestion (for incompatible-flags: the other flag).
_SUGGESTION_CODES = {"unknown-flag", "incompatible-flags"}


@dataclass(frozen=True)
class Finding:
    """One problem in a launch line: ``code``, the ``flag`` it is about, a ``suggestion`` (a flag or
    value to use instead) and a one-line ``message`` that says what to do."""

    code: str
    flag: str | None = None
    suggestion: str | None = None
    message: str = ""

    @property
    def compact(self) -> str:
        """``unknown-flag:--speculative-num-stpes:--speculative-num-steps``, ``ambiguous-flag:--x``, or the
        bare code."""
        if self.code not in _FLAG_CODES or not self.flag:
            return self.code
        if self.code in _SUGGESTION_CODES and self.suggestion:
            return f"{self.code}:{self.flag}:{self.suggestion}"
        return f"{self.code}:{self.flag}"

    def to_dict(self) -> dict:
        """``{"code", "flag", "suggestion", "message"}``."""
        return {"code": self.code, "flag": self.flag, "suggestion": self.suggestion, "message": self.message}


@dataclass(frozen=True)
class LintResult:
    """Parsed flags (``{dest: value}``, defaults included), the dests the line set (``explicit``) and the
    findings, with the SGLang release whose parser decided (``sglang_version``) and how (``source``:
    ``table`` or ``real-parser``). ``requested_version`` is the release asked for; ``warnings`` say when its
    own table was not available (which one was used); ``notes`` are facts that are not problems (e.g. a flag
    that changes nothing on that release)."""

    flags: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    sglang_version: str | None = None
    source: str = "table"
    env: dict[str, str] = field(default_factory=dict)
    explicit: frozenset[str] = frozenset()
    requested_version: str | None = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when there is no finding."""
        return not self.findings

    @property
    def codes(self) -> list[str]:
        """The findings in compact form, in order."""
        return [f.compact for f in self.findings]

    @property
    def set_flags(self) -> dict[str, Any]:
        """Only what the line set: ``{dest: value}`` for the explicit dests."""
        return {d: v for d, v in self.flags.items() if d in self.explicit}

    def to_dict(self, *, with_defaults: bool = False) -> dict:
        """``{"flags", "findings": [{"code", "flag", "suggestion", "message"}], "sglang_version",
        "requested_version", "source", "warnings", "notes"}``; ``flags`` holds what the line set, and every
        default too with ``with_defaults``."""
        return {"flags": dict(self.flags) if with_defaults else self.set_flags,
                "findings": [f.to_dict() for f in self.findings],
                "sglang_version": self.sglang_version, "requested_version": self.requested_version,
                "source": self.source, "warnings": list(self.warnings), "notes": list(self.notes)}
