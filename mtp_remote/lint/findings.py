"""Lint findings and the lint result: the shapes ``lint-command --json`` prints.

Codes are those of ``../shared/corpus/README.md``: ``public-bind-without-api-key``,
``draft-model-path-required``, ``draft-tokens-adjusted``, ``unexpanded-variable``, ``unknown-flag``,
``ambiguous-flag``, ``invalid-value``, ``multi-node``; plus ``hybrid-spec-radix-cache`` (the combination
that fails to start on SGLang 0.5.10-0.5.13) and ``missing-required`` (argparse's "the following arguments
are required"). The compact form ``code[:flag[:suggestion]]`` is how the corpus labels name a finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Codes whose compact form carries the flag (and, for unknown-flag, the suggestion).
_FLAG_CODES = {"unknown-flag", "ambiguous-flag", "invalid-value", "missing-required"}


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
        if self.code == "unknown-flag" and self.suggestion:
            return f"{self.code}:{self.flag}:{self.suggestion}"
        return f"{self.code}:{self.flag}"

    def to_dict(self) -> dict:
        """``{"code", "flag", "suggestion", "message"}``."""
        return {"code": self.code, "flag": self.flag, "suggestion": self.suggestion, "message": self.message}


@dataclass(frozen=True)
class LintResult:
    """Parsed flags (``{dest: value}``, defaults included) and findings, with the SGLang release whose
    parser decided (``sglang_version``) and how (``source``: ``table`` or ``real-parser``)."""

    flags: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    sglang_version: str | None = None
    source: str = "table"
    env: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when there is no finding."""
        return not self.findings

    @property
    def codes(self) -> list[str]:
        """The findings in compact form, in order."""
        return [f.compact for f in self.findings]

    def to_dict(self) -> dict:
        """``{"flags", "findings": [{"code", "flag", "suggestion", "message"}], "sglang_version", "source"}``."""
        return {"flags": self.flags, "findings": [f.to_dict() for f in self.findings],
                "sglang_version": self.sglang_version, "source": self.source}
