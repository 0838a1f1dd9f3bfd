"""Semantic lint rules over parsed launch flags: combinations SGLang accepts but that hurt, or refuses late.

Each rule is a plain function ``(LintContext) -> Finding | None`` (or a list of findings); they read dests
(``speculative_algorithm``) from the parsed flags, so they work on the table parser's output and on a real
SGLang parser's alike. Three kinds:

- :data:`RULES`: rules of every release (public bind, draft model, draft tokens, multi-node, the attention
  backends speculative decoding cannot run on).
- :data:`VALUE_CHECKS`: the meaning of a value, not its spelling: fractions in (0, 1], ports in 1-65535, a
  host that is a host name or an IP address.
- :data:`RELEASE_RULES`: rules keyed by the SGLang release range in which ``server_args.py`` refuses (or
  silently changes) a combination. Each carries the ``anchor``, a text of that release's
  ``server_args.py`` that implements it; ``tests/sglang_parser/test_release_rules.py`` checks every anchor
  against the released sources of the pinned releases (present inside the range, absent outside).

Sources: SGLang ``server_args.py`` of 0.5.9, 0.5.10, 0.5.13 (``_handle_speculative_decoding``: topk 1
forces ``num_draft_tokens = num_steps + 1``; ``_handle_mamba_radix_cache``: 0.5.9 silently disables the radix
cache for speculative decoding on hybrid models, 0.5.10-0.5.13 raise ``not compatible with radix cache when
using --mamba-scheduler-strategy no_buffer`` and ``mamba extra_buffer is not compatible with
--disable-radix-cache``, 0.5.13 asserts ``extra_buffer_lazy is not yet supported with speculative decoding``)
and 0.5.23's ``arg_groups/`` (which renamed the flag ``--mamba-radix-cache-strategy`` and refuses none of them).
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mtp_remote.lint.findings import Finding
from mtp_remote.lint.flag_table import version_key

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
#: Speculative algorithms that cannot run without a separate draft model.
DRAFT_REQUIRED = {"EAGLE3", "STANDALONE"}
#: Architectures with linear-attention / mamba layers (SGLang's hybrid list in _handle_mamba_radix_cache).
HYBRID_ARCHITECTURES = {
    "Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "KimiLinearForCausalLM", "BailingMoeV2_5ForCausalLM", "NemotronHForCausalLM", "FalconH1ForCausalLM",
    "JetNemotronForCausalLM", "GraniteMoeHybridForCausalLM", "Lfm2ForCausalLM",
}
#: Model directory names of those families, for when config.json has not been read.
HYBRID_NAME = re.compile(r"qwen3[-_.]?next|qwen3[._][56]|kimi[-_]linear|nemotron[-_]h\b|falcon[-_]h1|"
                         r"granite[-_]4|lfm2|ling[-_]2\.5", re.IGNORECASE)
#: A shell expansion left in a value: ``$NAME``, ``${NAME}``, ``${NAME:-default}`` (any ``${...}``), a
#: positional ``$1``, a command substitution ``$(...)`` or ```...```.
VARIABLE = re.compile(r"\$(?:\{[^}]*\}?|\([^)]*\)?|[A-Za-z_][A-Za-z0-9_]*|[0-9])|`[^`]*`?")


@dataclass(frozen=True)
class LintContext:
    """What the rules see: parsed ``flags`` ({dest: value}), the ``explicit`` dests, the SGLang
    ``version`` that will run it, the env prefix, and the model's ``architectures`` when known."""

    flags: dict[str, Any]
    version: str | None
    explicit: set[str] = field(default_factory=set)
    env: dict[str, str] = field(default_factory=dict)
    architectures: tuple[str, ...] = ()

    def get(self, dest: str) -> Any:
        return self.flags.get(dest)

    @property
    def speculative(self) -> str | None:
        algo = self.get("speculative_algorithm")
        return str(algo).upper() if algo else None


def public_bind_without_api_key(ctx: LintContext) -> Finding | None:
    host = ctx.get("host")
    if host and not is_loopback(str(host)) and not ctx.get("api_key") and is_host(str(host)):
        return Finding("public-bind-without-api-key", "--host", "--api-key",
                       f"--host {host} serves every client on the network with no --api-key: bind 127.0.0.1 "
                       "and reach it through an SSH tunnel, or set --api-key")
    return None


def draft_model_path_required(ctx: LintContext) -> Finding | None:
    if ctx.speculative in DRAFT_REQUIRED and not ctx.get("speculative_draft_model_path"):
        return Finding("draft-model-path-required", "--speculative-draft-model-path", None,
                       f"--speculative-algorithm {ctx.speculative} needs a draft model: add "
                       "--speculative-draft-model-path")
    return None


def draft_tokens_adjusted(ctx: LintContext) -> Finding | None:
    steps, topk, tokens = (ctx.get("speculative_num_steps"), ctx.get("speculative_eagle_topk"),
                           ctx.get("speculative_num_draft_tokens"))
    if ctx.speculative and topk == 1 and steps is not None and tokens is not None and tokens != steps + 1:
        return Finding("draft-tokens-adjusted", "--speculative-num-draft-tokens", str(steps + 1),
                       f"with --speculative-eagle-topk 1 SGLang sets --speculative-num-draft-tokens to "
                       f"num-steps + 1 = {steps + 1}, not {tokens}: write {steps + 1} so the profile says what runs")
    return None


def multi_node(ctx: LintContext) -> Finding | None:
    nnodes = ctx.get("nnodes")
    if isinstance(nnodes, int) and nnodes > 1:
        return Finding("multi-node", "--nnodes", None,
                       f"--nnodes {nnodes}: the same command must run on every node with its --node-rank; "
                       "mtp-remote launches one host only")
    return None


def spec_attention_backend(ctx: LintContext) -> Finding | None:
    """Speculative decoding with an attention backend that has no speculative path: SGLang accepts the line
    and the server dies in warmup (the draft/verify forward needs target-verify metadata these lack)."""
    if not ctx.speculative:
        return None
    for dest in ("attention_backend", "decode_attention_backend", "prefill_attention_backend",
                 "speculative_draft_attention_backend"):
        backend = ctx.get(dest)
        if backend in SPEC_UNSUPPORTED_ATTENTION:
            flag = "--" + dest.replace("_", "-")
            return Finding("spec-attention-backend", flag, None,
                           f"{flag} {backend} has no speculative-decoding path: --speculative-algorithm "
                           f"{ctx.speculative} starts and then dies in warmup; use --attention-backend triton "
                           "(or fa3/flashinfer on GPUs), or drop the speculative flags")
    return None


#: Attention backends SGLang's speculative workers cannot run on (no target-verify / draft-extend support).
SPEC_UNSUPPORTED_ATTENTION = {"torch_native", "flex_attention"}


def is_hybrid(ctx: LintContext) -> bool:
    """Whether the model has linear-attention (Mamba/GDN) layers: by its architectures when known, else its name."""
    if ctx.architectures:
        return any(a in HYBRID_ARCHITECTURES for a in ctx.architectures)
    if any(d.startswith("mamba_") for d in ctx.explicit):
        return True
    return bool(HYBRID_NAME.search(str(ctx.get("model_path") or "")))


def _is_qwen_hybrid(ctx: LintContext) -> bool:
    if ctx.architectures:
        return any(a in QWEN_HYBRID_ARCHITECTURES for a in ctx.architectures)
    return bool(QWEN_HYBRID_NAME.search(str(ctx.get("model_path") or "")))


#: The Qwen3.5 / Qwen3-Next family (SGLang's own list in ``_handle_model_specific_adjustments``).
QWEN_HYBRID_ARCHITECTURES = {"Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration",
                             "Qwen3_5MoeForConditionalGeneration"}
QWEN_HYBRID_NAME = re.compile(r"qwen3[-_.]?next|qwen3[._][56]", re.IGNORECASE)


def mamba_strategy(ctx: LintContext) -> str:
    """The hybrid-model cache strategy that will run: ``auto`` (and unset) resolves to ``no_buffer`` on
    0.5.9-0.5.13 (``server_args.py``: "if self.mamba_scheduler_strategy == 'auto': ... = 'no_buffer'")."""
    value = ctx.get("mamba_scheduler_strategy") or ctx.get("mamba_radix_cache_strategy") or "auto"
    return "no_buffer" if value == "auto" else str(value)


def _strategy_flag(ctx: LintContext) -> str:
    return ("--mamba-radix-cache-strategy" if "mamba_radix_cache_strategy" in ctx.flags
            and "mamba_scheduler_strategy" not in ctx.flags else "--mamba-scheduler-strategy")


# --- release-keyed rules ---------------------------------------------------------------------------------


def hybrid_spec_radix_cache(ctx: LintContext) -> Finding | None:
    """0.5.10-0.5.13: hybrid model + speculative decoding + no_buffer + radix cache on -> ValueError."""
    if not ctx.speculative or ctx.get("disable_radix_cache") or not is_hybrid(ctx):
        return None
    if mamba_strategy(ctx) != "no_buffer":
        return None
    return Finding("hybrid-spec-radix-cache", "--disable-radix-cache", "--disable-radix-cache",
                   f"SGLang {ctx.version} refuses speculative decoding with the radix cache on hybrid models "
                   "(mamba no_buffer): add --disable-radix-cache, or upgrade to 0.5.14+")


def extra_buffer_without_radix_cache(ctx: LintContext) -> Finding | None:
    """0.5.10-0.5.13: ``extra_buffer`` (or ``extra_buffer_lazy``) with ``--disable-radix-cache`` -> ValueError
    ("mamba extra_buffer is not compatible with --disable-radix-cache")."""
    if not ctx.get("disable_radix_cache") or not mamba_strategy(ctx).startswith("extra_buffer"):
        return None
    if not is_hybrid(ctx):
        return None
    flag = _strategy_flag(ctx)
    return Finding("incompatible-flags", flag, "--disable-radix-cache",
                   f"SGLang {ctx.version} refuses {flag} {mamba_strategy(ctx)} with --disable-radix-cache at "
                   f"startup: use {flag} no_buffer with --disable-radix-cache, or drop --disable-radix-cache "
                   "to keep the extra buffer")


def lazy_buffer_with_speculation(ctx: LintContext) -> Finding | None:
    """0.5.13: ``extra_buffer_lazy`` with speculative decoding -> AssertionError ("extra_buffer_lazy is not yet
    supported with speculative decoding"). The fix offered is one no other rule refuses: ``extra_buffer``,
    or ``no_buffer`` when ``--disable-radix-cache`` is set (extra_buffer is refused with it)."""
    if not ctx.speculative or mamba_strategy(ctx) != "extra_buffer_lazy" or not is_hybrid(ctx):
        return None
    flag = _strategy_flag(ctx)
    fix = "no_buffer" if ctx.get("disable_radix_cache") else "extra_buffer"
    return Finding("incompatible-flags", flag, "--speculative-algorithm",
                   f"SGLang {ctx.version} refuses {flag} extra_buffer_lazy with speculative decoding at startup: "
                   f"use {flag} {fix}")


def radix_cache_flag_is_a_no_op(ctx: LintContext) -> str | None:
    """0.5.9 (a note, not a finding): on Qwen3.5/Qwen3-Next-family models SGLang itself turns the radix cache
    off when speculative decoding runs ("Disabling radix cache since speculative decoding for ... is not
    supported with radix cache yet"), so ``--disable-radix-cache`` changes nothing there."""
    if not ctx.speculative or not _is_qwen_hybrid(ctx) or mamba_strategy(ctx) != "no_buffer":
        return None
    said = "--disable-radix-cache changes nothing" if ctx.get("disable_radix_cache") else "the radix cache is off"
    return (f"SGLang {ctx.version} turns the radix cache off by itself for speculative decoding on Qwen3.5/"
            f"Qwen3-Next-family models: {said} here, and it is no mitigation for looping output")


#: The speculative algorithms each release's ``SpeculativeAlgorithm.from_string`` accepts (``speculative/
#: spec_info.py``, case-insensitive) plus the ``NEXTN`` alias server_args resolves to EAGLE. From 0.5.13 on
#: the name is no argparse choice any more: SGLang parses any string and refuses an unknown name after parsing
#: ("Unknown speculative algorithm name: MTP"), unless a plugin registered it.
SPECULATIVE_ALGORITHMS: dict[str, frozenset[str]] = {
    "0.5.13": frozenset({"DFLASH", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM", "NEXTN"}),
    "0.5.23": frozenset({"DFLASH", "UNO", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM",
                         "NEXTN"}),
}


def speculative_algorithm_name(ctx: LintContext) -> Finding | None:
    """0.5.13 and later: a ``--speculative-algorithm`` name the release's builtins do not have. argparse
    accepts it; SGLang refuses it after parsing, at startup. ``MTP`` (the usual slip: the model feature, not the
    algorithm) is suggested ``NEXTN``; any other name the closest builtin."""
    algo = ctx.speculative
    if not algo or VARIABLE.search(algo):
        return None
    known = _algorithms_of(ctx.version)
    if algo in known:
        return None
    suggestion = "NEXTN" if "MTP" in algo else next(iter(difflib.get_close_matches(algo, sorted(known), n=1)), None)
    return Finding("invalid-value", "--speculative-algorithm", suggestion,
                   f"--speculative-algorithm {ctx.get('speculative_algorithm')} is no speculative algorithm of SGLang "
                   f"{ctx.version} ({', '.join(sorted(known))}): it parses, then the server refuses it at startup "
                   f"('Unknown speculative algorithm name')" + (f"; use {suggestion}" if suggestion else "")
                   + " (unless a plugin registers that name)")


def _algorithms_of(version: str | None) -> frozenset[str]:
    """The builtin names of the newest listed release not newer than ``version``."""
    listed = sorted(SPECULATIVE_ALGORITHMS, key=version_key)
    chosen = listed[0]
    for v in listed:
        if version is not None and version_key(v)[:3] <= version_key(version)[:3]:
            chosen = v
    return SPECULATIVE_ALGORITHMS[chosen]


@dataclass(frozen=True)
class ReleaseRule:
    """A rule that holds for SGLang releases ``since <= v < until`` (``until`` None: still holds).

    ``anchor`` is text of that release's ``server_args.py`` (or ``arg_groups/``) that implements it: the
    test of the rule table finds it in every pinned release inside the range and in none outside. ``note``
    rules give a note (a fact about the line), the others a finding."""

    name: str
    since: str
    until: str | None
    anchor: str
    check: Callable[[LintContext], Any]
    note: bool = False

    def applies_to(self, version: str | None) -> bool:
        if version is None:
            return False
        v = version_key(version)[:3]
        return version_key(self.since)[:3] <= v and (self.until is None or v < version_key(self.until)[:3])


#: Release-keyed rules, checked against the released sources (see the module docstring).
RELEASE_RULES: tuple[ReleaseRule, ...] = (
    ReleaseRule("hybrid-spec-radix-cache", "0.5.10", "0.5.14",
                "is not compatible with radix cache when using --mamba-scheduler-strategy no_buffer",
                hybrid_spec_radix_cache),
    ReleaseRule("extra-buffer-without-radix-cache", "0.5.10", "0.5.14",
                "mamba extra_buffer is not compatible with --disable-radix-cache", extra_buffer_without_radix_cache),
    ReleaseRule("lazy-buffer-with-speculation", "0.5.13", "0.5.14",
                "extra_buffer_lazy is not yet supported with speculative decoding", lazy_buffer_with_speculation),
    ReleaseRule("speculative-algorithm-name", "0.5.13", None, "Or any name registered via",
                speculative_algorithm_name),
    ReleaseRule("radix-cache-off-for-speculation", "0.5.9", "0.5.10",
                "is not supported with radix cache yet", radix_cache_flag_is_a_no_op, note=True),
)


# --- value checks ----------------------------------------------------------------------------------------

_HOSTNAME = re.compile(r"^(?=.{1,253}$)(?!-)[A-Za-z0-9-]{1,63}(?<!-)(?:\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?$")


def is_host(value: str) -> bool:
    """True for an IPv4/IPv6 address (``[::1]`` too) or an RFC 1123 host name; False for anything else (a
    pasted markdown link ``[0.0.0.0](http://0.0.0.0/)``, a URL, a path)."""
    candidate = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    try:
        ipaddress.ip_address(candidate)
        return True
    except ValueError:
        return bool(_HOSTNAME.match(value))


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (all of 127.0.0.0/8, ``::1``, ``[::1]``)."""
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _flag_of(dest: str) -> str:
    return "--" + dest.replace("_", "-")


#: Flags whose string value SGLang parses as JSON at startup (``--json-model-override-args``,
#: ``--model-loader-extra-config``, ``--hicache-storage-backend-extra-config``).
_JSON_VALUED = re.compile(r"^json_|_extra_config$|_override_args$")


def _is_json(value: str) -> bool:
    try:
        json.loads(value)
        return True
    except ValueError:
        return False


def value_ranges(ctx: LintContext) -> list[Finding]:
    """``invalid-value`` for explicit values out of their range: any ``*fraction*`` outside (0, 1], any
    ``port``/``*_port`` outside 1-65535, a JSON-valued flag (:data:`_JSON_VALUED`) that is not JSON, a
    ``--host`` that is not a host name or address."""
    out = []
    for dest in sorted(ctx.explicit):
        value = ctx.get(dest)
        if value is None or isinstance(value, bool) or (isinstance(value, str) and VARIABLE.search(value)):
            continue  # an unexpanded variable is its own finding: its value is not known
        flag = _flag_of(dest)
        if "fraction" in dest and isinstance(value, (int, float)) and not 0 < value <= 1:
            out.append(Finding("invalid-value", flag, None,
                               f"{flag} {value} is not a fraction in (0, 1]: SGLang would fail or misbehave"))
        elif (dest == "port" or dest.endswith("_port")) and isinstance(value, int) and not 1 <= value <= 65535:
            out.append(Finding("invalid-value", flag, None, f"{flag} {value} is not a TCP port (1-65535)"))
        elif _JSON_VALUED.search(dest) and isinstance(value, str) and not _is_json(value):
            out.append(Finding("invalid-value", flag, None,
                               f"{flag} is not valid JSON: SGLang json.loads it at startup and stops"))
        elif dest == "host" and isinstance(value, str) and not is_host(value):
            out.append(Finding("invalid-value", flag, None,
                               f"{flag} {value!r} is neither a host name nor an IP address (a pasted link or "
                               "URL?): write e.g. 127.0.0.1"))
    return out


#: Rules of every release, in report order.
RULES: tuple[Callable[[LintContext], Finding | None], ...] = (
    public_bind_without_api_key, draft_model_path_required, draft_tokens_adjusted, multi_node,
    spec_attention_backend,
)


def apply_rules(ctx: LintContext) -> list[Finding]:
    """Every finding of the value checks, then :data:`RULES`, then the :data:`RELEASE_RULES` that apply to
    ``ctx.version``, in that order."""
    found = value_ranges(ctx)
    found += [f for rule in RULES if (f := rule(ctx)) is not None]
    found += [f for r in RELEASE_RULES if not r.note and r.applies_to(ctx.version) and (f := r.check(ctx))]
    return found


def release_notes(ctx: LintContext) -> list[str]:
    """The notes of the :data:`RELEASE_RULES` that apply to ``ctx.version`` (facts, not problems)."""
    return [n for r in RELEASE_RULES if r.note and r.applies_to(ctx.version) and (n := r.check(ctx))]


def unexpanded_variables(argv: list[str], owners: dict[int, str], env: dict[str, str]) -> list[Finding]:
    """A ``$NAME``/``${NAME}`` left in a value (the shell did not or will not expand it as meant)."""
    found = []
    for key, value in env.items():
        if VARIABLE.search(value):
            found.append(Finding("unexpanded-variable", key, None,
                                 f"{key}={value} holds an unexpanded variable: write the value out"))
    for n, word in enumerate(argv):
        m = VARIABLE.search(word)
        if m:
            flag = owners.get(n) or (word.split("=", 1)[0] if word.startswith("-") else None)
            found.append(Finding("unexpanded-variable", flag, None,
                                 f"{flag or 'argument'} {word!r} contains {m.group(0)}, which no shell expands "
                                 "in a quoted launch: write the value out"))
    return found
