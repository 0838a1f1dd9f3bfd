"""Semantic lint rules over parsed launch flags: combinations SGLang accepts but that hurt, or refuses late.

Each rule is a plain function ``(LintContext) -> Finding | None`` listed in :data:`RULES`; they read dests
(``speculative_algorithm``) from the parsed flags, so they work on the table parser's output and on a real
SGLang parser's alike. Sources: SGLang ``server_args.py`` of the releases in the flag tables
(``_handle_speculative_decoding``: topk 1 forces ``num_draft_tokens = num_steps + 1``;
``_handle_mamba_radix_cache``: 0.5.9 silently disables the radix cache for speculative decoding on hybrid
models, 0.5.10-0.5.13 raise ``not compatible with radix cache when using --mamba-scheduler-strategy
no_buffer``, 0.5.14 and later handle it).
"""

from __future__ import annotations

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
#: The releases that refuse speculative decoding + radix cache on hybrid models (inclusive, exclusive).
HYBRID_RADIX_BROKEN = ((0, 5, 10), (0, 5, 14))
_VARIABLE = re.compile(r"\$(?:\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")


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
    if host and str(host) not in LOOPBACK_HOSTS and not ctx.get("api_key"):
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


def hybrid_spec_radix_cache(ctx: LintContext) -> Finding | None:
    if not ctx.speculative or ctx.get("disable_radix_cache") or ctx.version is None:
        return None
    if ctx.get("mamba_scheduler_strategy") == "extra_buffer":
        return None
    if not HYBRID_RADIX_BROKEN[0] <= version_key(ctx.version)[:3] < HYBRID_RADIX_BROKEN[1]:
        return None
    if not _is_hybrid(ctx):
        return None
    return Finding("hybrid-spec-radix-cache", "--disable-radix-cache", "--disable-radix-cache",
                   f"SGLang {ctx.version} refuses speculative decoding with the radix cache on hybrid models "
                   "(mamba no_buffer): add --disable-radix-cache, or upgrade to 0.5.14+")


def _is_hybrid(ctx: LintContext) -> bool:
    if ctx.architectures:
        return any(a in HYBRID_ARCHITECTURES for a in ctx.architectures)
    if any(d.startswith("mamba_") for d in ctx.explicit):
        return True
    return bool(HYBRID_NAME.search(str(ctx.get("model_path") or "")))


#: Rules in report order.
RULES: tuple[Callable[[LintContext], Finding | None], ...] = (
    public_bind_without_api_key, draft_model_path_required, draft_tokens_adjusted, multi_node,
    hybrid_spec_radix_cache,
)


def apply_rules(ctx: LintContext) -> list[Finding]:
    """Every rule's finding, in :data:`RULES` order."""
    return [f for rule in RULES if (f := rule(ctx)) is not None]


def unexpanded_variables(argv: list[str], owners: dict[int, str], env: dict[str, str]) -> list[Finding]:
    """A ``$NAME``/``${NAME}`` left in a value (the shell did not or will not expand it as meant)."""
    found = []
    for key, value in env.items():
        if _VARIABLE.search(value):
            found.append(Finding("unexpanded-variable", key, None,
                                 f"{key}={value} holds an unexpanded variable: write the value out"))
    for n, word in enumerate(argv):
        m = _VARIABLE.search(word)
        if m:
            flag = owners.get(n) or (word.split("=", 1)[0] if word.startswith("-") else None)
            found.append(Finding("unexpanded-variable", flag, None,
                                 f"{flag or 'argument'} {word!r} contains {m.group(0)}, which no shell expands "
                                 "in a quoted launch: write the path out"))
    return found
