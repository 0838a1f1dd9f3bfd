"""Shell command builders: server argv and env, secrets masked — every value quoted.

The launch and the signals are host-side scripts (``remote/scripts/*.sh``, :mod:`mtp_remote.remote.hostscripts`).

Builders are pure: they take typed values and return a :class:`Command` whose ``text`` is what runs and
whose ``masked`` is what may be logged or written (values of ``--api-key`` and of secret-looking
environment variables replaced by ``***``). Every user value passes through ``shlex.quote``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..config.inventory import HostConfig
from ..config.playbook import Playbook
from ..config.validation import secret_env_values

#: Flags whose value is a secret and is masked in anything logged (and any prefix of them that argparse
#: would expand: ``--api-ke X`` sets ``--api-key``).
SECRET_FLAGS = ("--api-key", "--admin-api-key")
#: Where the server listens on the host: loopback only, reached through an SSH tunnel.
BIND_HOST = "127.0.0.1"


@dataclass(frozen=True)
class Command:
    """A shell command line: ``text`` runs, ``masked`` is safe to log."""

    text: str
    masked: str

    def __str__(self) -> str:  # never leak the secret form by accident
        return self.masked


def _q(value: object) -> str:
    return shlex.quote(str(value))


def is_secret_flag(token: str) -> bool:
    """True when ``token``'s option name (before ``=``) is a secret flag or a prefix argparse may expand to
    one (``--api-ke``, ``--admin-api``); at least ``--a`` long."""
    if not token.startswith("--") or len(token) <= 3:
        return False
    name = token.split("=", 1)[0]
    return any(f.startswith(name) for f in SECRET_FLAGS) and len(name) > 3


def mask_argv(argv: Sequence[str]) -> list[str]:
    """Copy of ``argv`` with the values of secret flags (``--api-key X``, ``--api-key=X``, ``--api-ke X``)
    as ``***``."""
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next:
            out.append("***")
            hide_next = False
        elif is_secret_flag(a) and "=" in a:
            out.append(a.split("=", 1)[0] + "=***")
        elif is_secret_flag(a):
            out.append(a)
            hide_next = True
        else:
            out.append(a)
    return out


def mask_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every non-trivial secret value replaced by ``***``."""
    for s in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(s, "***")
    return text


_LOG_SECRETS = re.compile(r"((?:admin_)?api_key=')[^']*(')|(--(?:admin-)?api-key[= ])\S+")


def mask_log_secrets(text: str) -> str:
    """Log text with API keys masked wherever SGLang prints them (``server_args=ServerArgs(... api_key='…')``,
    echoed command lines), whatever their value — for logs of servers we did not configure."""
    return _LOG_SECRETS.sub(lambda m: f"{m.group(1)}***{m.group(2)}" if m.group(1) else f"{m.group(3)}***", text)


def secrets_of(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The secret values in an argv and an environment (to mask them in logs and reports): secret flags'
    values and every environment value whose name is not in :data:`~mtp_remote.config.SHOWN_ENV`."""
    vals = secret_env_values(dict(env))
    for i, a in enumerate(argv):
        if is_secret_flag(a) and "=" in a:
            vals.append(a.split("=", 1)[1])
        elif is_secret_flag(a) and i + 1 < len(argv):
            vals.append(argv[i + 1])
    return vals


def playbook_secrets(playbook: Playbook, host: HostConfig) -> list[str]:
    """Every secret a run may print: API keys in the base and profile flags, secret-looking env values."""
    vals = secrets_of(playbook.base_flags, host.env)
    for prof in playbook.profiles.values():
        vals += secrets_of(prof.flags, prof.env)
    return vals


def mask_secrets(obj, secrets: Iterable[str]):
    """A JSON-able structure with every secret value replaced by ``***`` (strings inside lists/dicts)."""
    if isinstance(obj, str):
        return mask_text(obj, secrets)
    if isinstance(obj, list):
        return [mask_secrets(x, secrets) for x in obj]
    if isinstance(obj, tuple):
        return tuple(mask_secrets(x, secrets) for x in obj)
    if isinstance(obj, dict):
        return {k: mask_secrets(v, secrets) for k, v in obj.items()}
    return obj


def api_key_of(argv: Sequence[str]) -> str | None:
    """The value of ``--api-key`` (or a prefix of it argparse expands) in an argv (the server then wants it
    as a Bearer token), or None. Given more than once (base flags, then a profile's), the last one: argparse,
    and so SGLang, keeps the last value of a repeated option."""
    key = None
    for i, a in enumerate(argv):
        name = a.split("=", 1)[0]
        if len(name) > 5 and "--api-key".startswith(name):
            if "=" in a:
                key = a.split("=", 1)[1]
            elif i + 1 < len(argv):
                key = argv[i + 1]
    return key


def server_argv(host: HostConfig, playbook: Playbook, profile: str) -> list[str]:
    """SGLang argv for one profile: ``--model-path`` from the host, the playbook's base flags, the
    profile's flags, then ``--host 127.0.0.1 --port <host.port>``. ``{model_path}`` in a flag stands for the
    host's model path (e.g. ``--speculative-draft-model-path {model_path}`` for a model that drafts for itself).

    Raises KeyError for an unknown profile (the playbook validator names the choices earlier)."""
    prof = playbook.profiles[profile]
    flags = [f.replace("{model_path}", host.model_path) for f in (*playbook.base_flags, *prof.flags)]
    return ["--model-path", host.model_path, *flags, "--host", BIND_HOST, "--port", str(host.port)]


def server_env(host: HostConfig, playbook: Playbook, profile: str, workdir: str) -> dict[str, str]:
    """Environment for the server: host env, profile env, CUDA_VISIBLE_DEVICES from ``host.gpus``, and for
    sim hosts the simulator's state directory under the workdir (one simulated machine per host)."""
    env: dict[str, str] = {}
    if host.gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in host.gpus)
    if host.is_sim:
        env["SGLANG_SIM_STATE_DIR"] = sim_state_dir(host, workdir)
    env.update(host.env)
    env.update(playbook.profiles[profile].env)
    return env


def sim_state_dir(host: HostConfig, workdir: str) -> str:
    """Where a sim host keeps its simulated GPU state: ``SGLANG_SIM_STATE_DIR`` from the host env, else
    ``<workdir>/sim-gpus`` (one simulated machine per inventory host)."""
    return host.env.get("SGLANG_SIM_STATE_DIR") or f"{workdir}/sim-gpus"
