"""Playbook → an ordered plan: one launch per distinct profile (baseline first) and the requests of each.

Pure: no I/O. A request's seed is ``playbook.seed + sample_index`` in every arm, so samples pair across
profiles by (prompt id, sample index, seed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config.inventory import HostConfig
from ..config.playbook import Playbook
from ..remote.commands import server_argv, server_env


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: where it belongs (profile, temperature, prompt, sample index), its seed and, for a
    shaped prompt (messages, tools...), its chat body fields; ``prompt`` is the user text (shown in reports)."""

    profile: str
    temperature: float
    prompt_id: str
    prompt: str
    sample_index: int
    seed: int
    #: the prompt's chat body fields beyond one user message (``Prompt.chat_fields``), None for a plain prompt
    chat: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def key(self) -> tuple:
        """Identity used for pairing and for resume: (profile, temperature, prompt id, sample index)."""
        return (self.profile, float(self.temperature), self.prompt_id, self.sample_index)


@dataclass(frozen=True)
class LaunchPlan:
    """One server launch: profile, argv (unmasked; mask before logging), env, and its requests."""

    profile: str
    speculative: bool
    argv: list[str]
    env: dict[str, str]
    requests: list[RequestSpec]


def plan_requests(playbook: Playbook, profile: str) -> list[RequestSpec]:
    """Requests of one profile, ordered by temperature, then sample index, then prompt (so a partial run
    still covers every prompt). ``greedy_samples`` per prompt at T=0, ``samples`` above."""
    out = []
    for t in playbook.temperatures:
        for i in range(playbook.samples_at(t)):
            for p in playbook.prompts:
                out.append(RequestSpec(profile=profile, temperature=float(t), prompt_id=p.id, prompt=p.user_text,
                                       sample_index=i, seed=playbook.seed + i, chat=p.chat_fields()))
    return out


def plan_run(host: HostConfig, playbook: Playbook, workdir: str, profiles: list[str] | None = None) -> list[LaunchPlan]:
    """The launches of a run, baseline first. ``profiles`` restricts to those names (baseline always kept).

    Raises ValueError naming the valid profiles for an unknown one."""
    order = playbook.profile_order()
    if profiles:
        unknown = [p for p in profiles if p not in playbook.profiles]
        if unknown:
            raise ValueError(f"unknown profile(s) {unknown}; choose from {order}")
        order = [p for p in order if p == playbook.baseline or p in profiles]
    return [LaunchPlan(profile=p, speculative=playbook.profiles[p].speculative,
                       argv=_argv(host, playbook, p), env=server_env(host, playbook, p, workdir),
                       requests=plan_requests(playbook, p)) for p in order]


def _argv(host: HostConfig, playbook: Playbook, profile: str) -> list[str]:
    """The launch line of ``profile``; for an attached profile (never launched) only what names its endpoint,
    ``["--attached", where]``, so two attached profiles are never taken for one server (:func:`server_key`)."""
    where = playbook.profiles[profile].attach
    return ["--attached", where.where] if where is not None else server_argv(host, playbook, profile)


def server_key(lp: LaunchPlan) -> tuple:
    """What makes two launches the same server: the exact argv (model and flags) and environment."""
    return (tuple(lp.argv), tuple(sorted(lp.env.items())))


def order_for_reuse(plans: list[LaunchPlan], keep_first: int = 1) -> list[LaunchPlan]:
    """``plans`` with launches of the same server (:func:`server_key`) side by side, so that each distinct server
    is launched once and serves them in turn; otherwise the order is kept (the first ``keep_first`` — the
    baseline — stay first). Pure; stable."""
    head, rest = plans[:keep_first], plans[keep_first:]
    out = list(head)
    for lp in rest:
        at = max((i for i, q in enumerate(out) if server_key(q) == server_key(lp)), default=None)
        if at is None or at < len(head) - 1:
            out.append(lp)
        else:
            out.insert(at + 1, lp)
    return out
