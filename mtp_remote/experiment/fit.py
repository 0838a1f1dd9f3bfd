"""Do the long prompts fit? Before a profile is sampled, each prompt read from a file or replayed from a recorded
request is sent once with one output token: the server's own tokenizer counts its tokens (``usage.prompt_tokens``),
and that count plus the playbook's ``max_tokens`` must stay within the server's context length (``/server_info``
``context_length``, else ``/v1/models`` ``max_model_len``). SGLang refuses a request past it (400: "Requested token
count exceeds the model's maximum context length"), so a prompt that does not fit would only give failed samples.
"""

from __future__ import annotations

from ..client import ServerClient
from ..config.playbook import Playbook, Prompt
from ..errors import ConfigError


def long_prompts(pb: Playbook) -> list[Prompt]:
    """The prompts whose length the playbook does not show: read from a ``file`` or replayed (``source``)."""
    return [p for p in pb.prompts if p.file is not None or p.source is not None]


async def prompt_tokens(sc: ServerClient, pb: Playbook, p: Prompt) -> tuple[int | None, str | None]:
    """(tokens of ``p`` as the server counts them, error text) from a one-token request at T = 0."""
    if pb.api == "chat":
        comp = await sc.chat(p.user_text, temperature=0.0, max_tokens=1, fields=p.chat_fields())
    else:
        comp = await sc.generate(pb.prompt_template.replace("{prompt}", p.user_text), temperature=0.0,
                                 max_new_tokens=1)
    return (comp.prompt_tokens or None), comp.error


async def check_prompts_fit(sc: ServerClient, pb: Playbook, profile: str, info: dict | None = None) -> dict:
    """``{"context_length", "max_tokens", "prompt_tokens": {prompt id: tokens}}`` for :func:`long_prompts`
    (``{}`` when there are none). Raises ConfigError (field ``max_tokens``/``prompts``) naming each prompt that
    does not fit, its tokens, ``max_tokens`` and the context length, or the server's refusal of it."""
    todo = long_prompts(pb)
    if not todo:
        return {}
    ctx = await sc.context_length(info)
    counts: dict[str, int | None] = {}
    bad = []
    for p in todo:
        n, error = await prompt_tokens(sc, pb, p)
        counts[p.id] = n
        if error is not None:
            bad.append(f"{p.id} ({p.file or p.source}): the server refused it: {error[:200]}")
        elif ctx is not None and n is not None and n + pb.max_tokens > ctx:
            bad.append(f"{p.id} ({p.file or p.source}): {n} prompt tokens + max_tokens {pb.max_tokens} = "
                       f"{n + pb.max_tokens} > the context length {ctx}")
    if bad:
        raise ConfigError(f"profile {profile}: prompts do not fit the server's context: " + "; ".join(bad) +
                          " (lower max_tokens, shorten the prompt, or raise --context-length)", field="prompts")
    return {"context_length": ctx, "max_tokens": pb.max_tokens, "prompt_tokens": counts}
