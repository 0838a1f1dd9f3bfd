"""Diagnose endpoints that are already serving: the playbook, host and server kind of a run with attached profiles
(``diagnose --attach NAME=URL ...``, or ``attach:`` in a playbook's profiles), its opening line, and what its
verdicts cannot include.

An attached endpoint is never launched, signalled or stopped, and no host lock is taken for it
(:class:`~mtp_remote.serving.attach.AttachServer`); its load is bounded by the playbook's ``load`` (requests in
flight, requests per second: gentle defaults) and the run's opening line says so.
"""

from __future__ import annotations

import os

from ..config.endpoints import Endpoint
from ..config.inventory import HostConfig
from ..config.playbook import Playbook
from ..errors import ConfigError
from ..serving.attach import LIMITS, AttachServer
from ..serving.kinds import open_server

#: The host of a run whose every profile is an attached URL: nothing runs on it (no SSH, no workdir used).
ATTACHED_HOST = "attached"


def attached_host() -> HostConfig:
    """The stand-in host of a run with only attached URLs (local transport: nothing is run on it)."""
    return HostConfig(name=ATTACHED_HOST, transport="local", engine="sglang", workdir="~/.mtp-remote/attached")


def attached_playbook(pb: Playbook, endpoints: list[Endpoint], *, playbook_file: str = "") -> Playbook:
    """``pb`` with its profiles replaced by ``endpoints`` (each attached at its URL; the one named as the
    playbook's ``baseline`` is the baseline): its prompts, sampling, comparison and ``load`` are kept, its launch
    flags, mitigations and A/A calibration dropped (nothing is launched). Raises ConfigError when no endpoint is
    the baseline or only the baseline is given."""
    names = [e.name for e in endpoints]
    if pb.baseline not in names:
        raise ConfigError(f"no attached endpoint is named {pb.baseline!r} (the playbook's baseline): give "
                          f"--attach {pb.baseline}=URL", field="--attach")
    if len(endpoints) < 2:
        raise ConfigError("give the baseline and at least one endpoint to compare with it: --attach "
                          f"{pb.baseline}=URL --attach NAME=URL", field="--attach")
    data = pb.model_dump()
    data.update(profiles={e.name: {"attach": {"url": e.url}, "description": f"attached: {e.url}"}
                          for e in endpoints},
                base_flags=[], mitigations=[], compare={**data["compare"], "calibration": False})
    try:
        return Playbook.model_validate(data)
    except ValueError as e:
        raise ConfigError(str(e).splitlines()[-1], file=playbook_file, field="--attach") from None


def api_keys(pb: Playbook) -> dict[str, str]:
    """Profile -> the API key of its attached endpoint (from the environment variable ``attach.api_key_env``
    names). Raises ConfigError naming the variable when it is unset."""
    out = {}
    for name, where in pb.attached.items():
        if where.api_key_env:
            key = os.environ.get(where.api_key_env)
            if not key:
                raise ConfigError(f"environment variable {where.api_key_env} (the API key of attached profile "
                                  f"{name!r}) is not set", field=f"profiles.{name}.attach.api_key_env")
            out[name] = key
    return out


def attach_line(pb: Playbook) -> str:
    """What the opening line says of the attached endpoints and the load they get."""
    where = ", ".join(f"{n}={a.where}" for n, a in pb.attached.items())
    rate = (f"{pb.load.request_rate:g} requests/s" if pb.load.request_rate else "no request-rate bound")
    return (f"attached {where} (never launched, signalled or stopped; no lock); load on each at most "
            f"{pb.load.concurrency} requests in flight, {rate}")


def attach_kind(c, host: HostConfig, pb: Playbook, *, python: str, run_id: str, on_progress) -> AttachServer:
    """The server kind of a run with attached profiles: :class:`~mtp_remote.serving.attach.AttachServer`, with
    the host's own kind for the profiles it launches (None when every profile is attached)."""
    launched = [p for p in pb.profiles if p not in pb.attached]
    inner = open_server(c, host, python=python, run_id=run_id, on_progress=on_progress) if launched else None
    return AttachServer(c, host, pb.attached, run_id=run_id, inner=inner, api_keys=api_keys(pb),
                        on_progress=on_progress)


def _flags(argv: list[str]) -> dict[str, str]:
    """``{"--flag": "value words"}`` of a launch line read back (a switch: "")."""
    out: dict[str, str] = {}
    flag = None
    for word in argv:
        if word.startswith("--"):
            flag = word
            out[flag] = ""
        elif flag is not None:
            out[flag] = f"{out[flag]} {word}".strip()
    return out


def flag_differences(base: list[str], arm: list[str]) -> list[str]:
    """The served flags (``--speculative-*`` aside) in which ``arm``'s launch line differs from ``base``'s, as
    ``--flag A vs B`` (``unset`` where one has none). Pure."""
    a, b = _flags(base), _flags(arm)
    out = []
    for f in sorted(set(a) | set(b)):
        if f.startswith("--speculative-") or a.get(f) == b.get(f):
            continue
        out.append(f"{f} {b.get(f, 'unset') or 'on'} vs {a.get(f, 'unset') or 'on'}")
    return out


def cannot_include(verdicts: list, attached: set[str], baseline: str, argv: dict[str, list[str]] | None = None) -> None:
    """Add to each verdict whose arm or baseline is attached what its evidence cannot include
    (:data:`~mtp_remote.serving.attach.LIMITS`): in ``warnings``, and after its evidence; with ``argv`` (profile
    -> its launch line, read back for the attached ones) also the served flags in which the arm differs from the
    baseline beyond speculation."""
    argv = argv or {}
    for v in verdicts:
        if v.profile not in attached and baseline not in attached:
            continue
        limits = list(LIMITS)
        diff = flag_differences(argv.get(baseline) or [], argv.get(v.profile) or []) if argv else []
        if diff:
            limits.append(f"the arms' served flags also differ beyond speculation: {', '.join(diff[:6])}")
        v.warnings = [*v.warnings, *(f"cannot include: {x}" for x in limits)]
        v.evidence = f"{v.evidence}; attached, so the evidence cannot include: {'; '.join(limits)}"
