"""Mitigation candidates for a corrupting speculative profile: which flag changes to try, and which to skip.

Pure: flags and host facts in, :class:`Candidate` list out. Candidates come from the playbook's
``mitigations:`` list first, then a built-in list for the model family: fewer speculative steps / draft tokens,
topk 1, each ``--mamba-scheduler-strategy`` the release accepts (hybrid models), ``--disable-overlap-schedule``,
``--disable-cuda-graph``, another attention backend, ``--mamba-ssm-dtype float32`` (hybrid models) and the usual
guess ``--disable-radix-cache``. Each is linted (:func:`mtp_remote.lint.lint.lint_command`) against the host's SGLang
release: one the release refuses (unknown flag, invalid value) is skipped with the lint's words, and so is a
no-op — a candidate whose effective settings equal the profile's once SGLang's own post-processing is applied
(topk 1 forces draft tokens = steps + 1; ``auto`` mamba strategy is ``no_buffer``; SGLang 0.5.9 turns the
radix cache off itself for speculative decoding on hybrid models: ``lint.rules`` sources).
"""

from __future__ import annotations

import shlex
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ..lint.flag_table import select_flag_table, version_key
from ..lint.lint import lint_command
from ..lint.rules import LintContext, is_hybrid
from .records import Record

#: Lint findings that mean "this release will not start with these flags".
REFUSED = {"unknown-flag", "invalid-value", "ambiguous-flag", "missing-required", "hybrid-spec-radix-cache",
           "draft-model-path-required"}
#: Releases that turn the radix cache off by themselves under speculation on hybrid models (incl., excl.).
RADIX_AUTO_OFF = ((0, 5, 9), (0, 5, 10))
ALT_BACKENDS = ("triton", "flashinfer", "fa3")


class Candidate(Record):
    """One change to try: ``name`` (profile name), the full profile ``flags``, ``change`` in words, where it
    came from (``playbook`` or ``built-in``) and, when it is not launched, ``skipped`` (the reason). Stored in
    mitigation.json's ``candidates`` as its fields (``to_dict``; ``Candidate.of`` reads them back)."""

    model_config = ConfigDict(frozen=True)
    WHOLE: ClassVar[bool] = True

    name: str
    flags: tuple[str, ...]
    change: str
    source: str
    skipped: str | None = None


def parse_flags(flags: list[str] | tuple[str, ...]) -> list[tuple[str, str | None]]:
    """``--a 1 --b --c=x`` -> [("--a", "1"), ("--b", None), ("--c", "x")] (order kept; words that follow a
    flag and do not start with ``--`` are its value)."""
    out: list[tuple[str, str | None]] = []
    i = 0
    flags = list(flags)
    while i < len(flags):
        w = flags[i]
        if w.startswith("--") and "=" in w:
            k, v = w.split("=", 1)
            out.append((k, v))
        elif w.startswith("--"):
            if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
                out.append((w, flags[i + 1]))
                i += 1
            else:
                out.append((w, None))
        else:  # a stray value: keep it attached to nothing
            out.append((w, None))
        i += 1
    return out


def unparse_flags(pairs: list[tuple[str, str | None]]) -> list[str]:
    out: list[str] = []
    for k, v in pairs:
        out += [k] if v is None else [k, v]
    return out


def with_flags(flags, set_: dict[str, str | None] | None = None, remove: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``flags`` with each of ``set_`` replaced in place (or appended) and ``remove`` dropped."""
    pairs = [(k, v) for k, v in parse_flags(flags) if k not in remove]
    for k, v in (set_ or {}).items():
        idx = [i for i, (name, _) in enumerate(pairs) if name == k]
        if idx:
            pairs[idx[0]] = (k, v)
            pairs = [p for j, p in enumerate(pairs) if j not in idx[1:]]
        else:
            pairs.append((k, v))
    return tuple(unparse_flags(pairs))


def _value(flags, name: str) -> str | None:
    vals = [v for k, v in parse_flags(flags) if k == name]
    return vals[-1] if vals else None


def launch_line(model_path: str, base_flags, flags) -> str:
    """The launch line that is linted (and printed): ``python -m sglang.launch_server`` + argv."""
    argv = ["--model-path", model_path, *base_flags, *flags]
    return "python -m sglang.launch_server " + " ".join(shlex.quote(a) for a in argv)


class _Settings(BaseModel):
    """SGLang server arguments by dest (``{dest: value}``), the ones its post-processing rewrites declared."""

    model_config = ConfigDict(extra="allow")

    speculative_algorithm: Any = None
    speculative_num_steps: Any = None
    speculative_eagle_topk: Any = None
    speculative_num_draft_tokens: Any = None
    mamba_scheduler_strategy: Any = None
    disable_radix_cache: Any = None


def effective_settings(values: dict, version: str | None, hybrid: bool) -> dict:
    """Parsed flag values ({dest: value}) with SGLang's post-processing that makes flags no-ops applied."""
    v = _Settings.model_validate(values)
    spec = bool(v.speculative_algorithm)
    if spec:
        v.speculative_num_steps = steps = v.speculative_num_steps or 3
        v.speculative_eagle_topk = topk = v.speculative_eagle_topk or 1
        v.speculative_num_draft_tokens = steps + 1 if topk == 1 else v.speculative_num_draft_tokens
        if str(v.speculative_algorithm).upper() == "NEXTN":
            v.speculative_algorithm = "EAGLE"
    if v.mamba_scheduler_strategy in (None, "auto"):
        v.mamba_scheduler_strategy = "no_buffer"
    if spec and hybrid and version and RADIX_AUTO_OFF[0] <= version_key(version)[:3] < RADIX_AUTO_OFF[1]:
        v.disable_radix_cache = True
    return v.model_dump(exclude_unset=True)


def _builtin(flags: tuple[str, ...], version: str | None, hybrid: bool) -> list[tuple[str, dict, tuple, str]]:
    """(name, set, remove, change) of the built-in candidates for a speculative profile's flags."""
    out = []
    steps = int(_value(flags, "--speculative-num-steps") or 3)
    topk = int(_value(flags, "--speculative-eagle-topk") or 1)
    for n in sorted({steps - 1, 1}, reverse=True):
        if 1 <= n < steps:
            out.append((f"steps-{n}", {"--speculative-num-steps": str(n), "--speculative-num-draft-tokens": str(n + 1)},
                        (), f"--speculative-num-steps {n} --speculative-num-draft-tokens {n + 1}"))
    out.append(("topk-1", {"--speculative-eagle-topk": "1",
                           "--speculative-num-draft-tokens": str(steps + 1)}, (),
                f"--speculative-eagle-topk 1 (now {topk})"))
    table = select_flag_table(version)
    if hybrid:
        spec = table.by_option.get("--mamba-scheduler-strategy")
        choices = list(spec.choices or ()) if spec else []  # a release without the flag offers none
        for ch in choices:
            if ch != "auto":
                out.append((f"mamba-{ch.replace('_', '-')}", {"--mamba-scheduler-strategy": ch}, (),
                            f"--mamba-scheduler-strategy {ch}"))
    out.append(("no-overlap", {"--disable-overlap-schedule": None}, (), "--disable-overlap-schedule"))
    out.append(("no-cuda-graph", {"--disable-cuda-graph": None}, (), "--disable-cuda-graph"))
    current = _value(flags, "--attention-backend")
    alt = next(b for b in ALT_BACKENDS if b != current)
    out.append((f"attn-{alt}", {"--attention-backend": alt}, (), f"--attention-backend {alt}"))
    if hybrid:
        out.append(("ssm-fp32", {"--mamba-ssm-dtype": "float32"}, (), "--mamba-ssm-dtype float32"))
    out.append(("no-radix", {"--disable-radix-cache": None}, (), "--disable-radix-cache"))
    return out


def plan_candidates(*, model_path: str, base_flags, profile_flags, playbook_mitigations=(),
                    sglang_version: str | None = None, architectures: tuple[str, ...] = ()) -> list[Candidate]:
    """Candidates for one corrupting profile, each linted against ``sglang_version`` (newest table when None).

    ``playbook_mitigations`` are ``config.MitigationConfig`` objects (name, flags, remove, description);
    they come first. Duplicates (same resulting flags) are dropped, keeping the first."""
    profile_flags = tuple(profile_flags)
    base = lint_command(launch_line(model_path, base_flags, profile_flags), sglang_version=sglang_version,
                        architectures=architectures)
    ctx = LintContext(flags=base.flags, version=sglang_version or base.sglang_version,
                      explicit=set(), architectures=tuple(architectures))
    hybrid = is_hybrid(LintContext(flags={**base.flags, "model_path": model_path}, version=ctx.version,
                                    architectures=tuple(architectures)))
    version = sglang_version or base.sglang_version
    before = effective_settings(base.flags, version, hybrid)
    raw = [(m.name, {k: v for k, v in parse_flags(m.flags)}, tuple(m.remove),
            m.description or " ".join(m.flags + [f"(without {r})" for r in m.remove]), "playbook")
           for m in playbook_mitigations]
    raw += [(*b, "built-in") for b in _builtin(profile_flags, version, hybrid)]
    out: list[Candidate] = []
    seen: set[tuple[str, ...]] = set()
    for name, set_, remove, change, source in raw:
        flags = with_flags(profile_flags, set_, remove)
        if flags in seen:
            continue
        seen.add(flags)
        res = lint_command(launch_line(model_path, base_flags, flags), sglang_version=sglang_version,
                           architectures=architectures)
        refused = [f for f in res.findings if f.code in REFUSED and f not in base.findings]
        skipped = None
        if refused:
            skipped = f"SGLang {version} refuses it: {refused[0].message}"
        elif effective_settings(res.flags, version, hybrid) == before:
            skipped = f"no-op on SGLang {version}: " + _noop_reason(set_, version, hybrid)
        out.append(Candidate(name=name, flags=flags, change=change, source=source, skipped=skipped))
    return out


def _noop_reason(set_: dict, version: str | None, hybrid: bool) -> str:
    if "--disable-radix-cache" in set_ and hybrid:
        return ("it turns the radix cache off by itself for speculative decoding on hybrid (Qwen3.5/Qwen3-Next) "
                "models")
    if "--speculative-eagle-topk" in set_:
        return "topk is 1 already"
    if "--mamba-scheduler-strategy" in set_:
        return "the profile already runs that strategy (auto resolves to no_buffer)"
    return "the effective server settings do not change"
