"""The ``attach`` kind: endpoints someone else serves (a production deployment, an operator's pod, another team's
server). ``launch`` returns a record of what is there — its flags read back from ``/server_info`` (as a launch
line: :func:`mtp_remote.lint.served.lint_served`), its model from ``/get_model_info``, whether it speculates — and
never starts anything; ``stop`` never signals it; it takes no host lock for it; it has no log (readiness is
``/health``; the crash watch is the requests themselves) and no A/A relaunch.

An attached endpoint is reached at its base URL (``attach.url``, directly from the driver) or at a port of the host
through the host's SSH tunnel (``attach.port``). Profiles that are not attached (a baseline the tool launches on
other GPUs of the host) are handed to the host's own kind (``inner``): then the host lock is taken for them, and
only what ``inner`` launched is ever stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..client import ServerClient
from ..config.inventory import HostConfig
from ..config.playbook import AttachConfig
from ..errors import LaunchError
from ..interrupts import run_async
from ..lint.served import lint_served
from ..remote.connect import Tunnel, open_tunnel
from ..remote.logfile import Polled
from ..responses import ModelInfo, ServerInfo
from .base import Capabilities, Crashed, Ready, ServerKind, TimedOut, WaitOutcome

#: Seconds an attached endpoint gets to answer ``/health`` 200 before it counts as not ready.
ATTACH_READY_S = 30.0

#: What the evidence of a run with an attached arm cannot include (the verdict says so).
LIMITS = ("no A/A relaunch (launch-to-launch noise not measured)",
          "no launch control (flags as served, read from /server_info; the arms may differ in more than "
          "speculation)")


class _Attached:
    """``ident`` and ``label`` of what stands for an attached endpoint (its record, its stop): ``where`` names it."""

    where: str

    @property
    def ident(self) -> str:
        return "attached"

    @property
    def label(self) -> str:
        return f"attached endpoint {self.where}"


@dataclass
class AttachedRecord(_Attached):
    """What an attached endpoint is: where (``url``, or the host ``port`` through the tunnel), its launch line
    read back (``argv_masked``), whether it speculates, its model, the lint of its flags, ``simulated`` when it
    is mtp-remote's simulated engine (its ``/server_info`` says so)."""

    profile: str
    run_id: str
    where: str
    url: str | None
    port: int
    argv_masked: list[str]
    speculative: bool
    model: str | None
    server_info: dict = field(default_factory=dict)
    lint: dict = field(default_factory=dict)
    simulated: bool = False
    log_path: str = ""
    attached: bool = True
    api_key: str | None = field(default=None, repr=False)  # sent as a Bearer token; never in to_dict

    def to_dict(self) -> dict:
        """For summary.json (``profiles[].attached``)."""
        return {"where": self.where, "speculative": self.speculative, "model": self.model,
                "argv": self.argv_masked, "lint": self.lint, "simulated": self.simulated,
                "version": ServerInfo.model_validate(self.server_info).version}


@dataclass
class NotStopped(_Attached):
    """The stop of an attached endpoint: nothing is signalled."""

    where: str
    found: str = "attached"
    log_path: str | None = None
    gpu_release_s: float = 0.0
    unlocked: bool = False

    def describe(self) -> str:
        return f"not stopped: {self.where} is an attached endpoint (never launched, signalled or stopped by us)"


async def _read(url: str, api_key: str | None) -> tuple[int | None, dict, dict]:
    async with ServerClient(url, timeout_s=15.0, api_key=api_key) as sc:
        return await sc.health(), await sc.server_info(), await sc.model_info()


async def _health(url: str, api_key: str | None, timeout_s: float) -> tuple[int | None, float]:
    t0 = time.monotonic()
    async with ServerClient(url, timeout_s=10.0, api_key=api_key) as sc:
        while True:
            code = await sc.health()
            if code == 200 or time.monotonic() - t0 > timeout_s:
                return code, time.monotonic() - t0
            await asyncio.sleep(0.5)


class AttachServer:
    """The :class:`~.base.ServerKind` of a run with attached profiles (``endpoints``: profile -> where), handing
    every other profile to ``inner`` (the host's own kind; None when every profile is attached). ``api_keys``:
    profile -> the endpoint's API key (read from the environment variable its ``attach.api_key_env`` names)."""

    def __init__(self, c, host: HostConfig, endpoints: dict[str, AttachConfig], *, run_id: str,
                 inner: ServerKind | None = None, api_keys: dict[str, str] | None = None,
                 on_progress: Callable[[str], None] | None = None):
        self.c, self.host, self.endpoints, self.inner = c, host, endpoints, inner
        self.run_id = run_id
        self.api_keys = api_keys or {}
        self.on_progress = on_progress or (lambda msg: None)
        self.workdir = inner.workdir if inner is not None else "(attached: none)"
        lock = bool(inner is not None and inner.capabilities.lock)
        self.capabilities = Capabilities(kind="attach", identity="none", drain=False, gpu_release="none",
                                         logs="none", relaunch=False, launch=False, lock=lock,
                                         host_view=inner is not None and inner.capabilities.host_view)
        self._current: AttachedRecord | None = None

    # -- where requests go -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _reach(self, where: AttachConfig) -> Iterator[Tunnel]:
        if where.url is not None:
            yield Tunnel(url=where.url)
            return
        with open_tunnel(self.c, self.host.model_copy(update={"port": where.port})) as t:
            yield t

    def reach(self):
        if self._current is not None:
            return self._reach(self.endpoints[self._current.profile])
        return self.inner.reach()

    # -- the life of a server, for an attached one: nothing is started or stopped ----------------------------

    def prepare(self, lock_owner: str | None = None) -> None:
        if self.inner is not None:
            self.inner.prepare(lock_owner=lock_owner)
            self.workdir = self.inner.workdir

    def release_lock(self) -> None:
        if self.inner is not None:
            self.inner.release_lock()

    def find_leftover(self):
        return self.inner.find_leftover() if self.inner is not None else None

    def launch(self, profile: str, argv: list[str], env: dict[str, str]):
        """An attached profile: read what is there (``/health``, ``/server_info``, ``/get_model_info``) and
        return its record; raises LaunchError (cause ``attach_unreachable``) when it does not answer. Any other
        profile: the inner kind's launch."""
        where = self.endpoints.get(profile)
        if where is None:
            self._current = None
            if self.inner is None:
                raise LaunchError(f"profile {profile!r} is neither attached nor launchable here", cause="attach")
            return self.inner.launch(profile, argv, env)
        with self._reach(where) as t:
            code, info, model = run_async(_read(t.url, self.api_keys.get(profile)))
        if code is None and not info:
            raise LaunchError(f"attached endpoint {where.where} of profile {profile!r} does not answer (no /health, "
                              f"no /server_info)", cause="attach_unreachable")
        result, served = lint_served(info, model)
        facts = ServerInfo.model_validate(info)
        rec = AttachedRecord(
            profile=profile, run_id=self.run_id, where=where.where, url=where.url, port=where.port or 0,
            argv_masked=served, speculative=bool(facts.speculative_algorithm),
            model=ModelInfo.model_validate(model).model_path or facts.model_path, server_info=info,
            lint={"codes": result.codes, "findings": [f.to_dict() for f in result.findings],
                  "sglang_version": result.sglang_version, "warnings": result.warnings},
            simulated=bool(facts.simulated), api_key=self.api_keys.get(profile))
        self._current = rec
        spec = "speculative" if rec.speculative else "no speculation"
        self.on_progress(f"{profile}: attached to {where.where} ({spec}; model {rec.model}; not launched, will not "
                         f"be stopped)")
        for f in result.findings:
            self.on_progress(f"{profile}: lint of its served flags: {f.compact}: {f.message}")
        return rec

    def follow(self, rec):
        return None if getattr(rec, "attached", False) else self.inner.follow(rec)

    def wait_ready(self, rec, *, timeout_s: float, health=None, stream=None) -> WaitOutcome:
        """An attached endpoint is ready when ``/health`` answers 200 (within :data:`ATTACH_READY_S`)."""
        if not getattr(rec, "attached", False):
            return self.inner.wait_ready(rec, timeout_s=timeout_s, health=health, stream=stream)
        with self._reach(self.endpoints[rec.profile]) as t:
            code, waited = run_async(_health(t.url, self.api_keys.get(rec.profile), min(timeout_s, ATTACH_READY_S)))
        if code == 200:
            return Ready(profile=rec.profile, elapsed_s=waited, milestones=[{"name": "attached", "seen_s": 0.0}])
        kind = TimedOut if code is not None else Crashed
        return kind(profile=rec.profile, elapsed_s=waited, cause="attach_unhealthy",
                    hint=f"the attached endpoint {rec.where} answers /health {code or 'nothing'}; it is not ours "
                         f"to restart: ask whoever runs it")

    def poll(self, rec, offset: int) -> Polled:
        """An attached endpoint has no log and no process of ours: it counts as alive (its requests failing say
        otherwise)."""
        if getattr(rec, "attached", False):
            return Polled(True, "", 0)
        return self.inner.poll(rec, offset)

    def stop(self, *, term_s: float = 60.0, gpu_release_s: float = 120.0, drain_s: float | None = None,
             unlock: bool = False, drain_name: str = "timeouts.drain_s"):
        """Never signals an attached endpoint; the inner kind stops only what it launched (and releases the
        lock)."""
        current, self._current = self._current, None
        if self.inner is not None and (current is None or unlock):
            return self.inner.stop(term_s=term_s, gpu_release_s=gpu_release_s, drain_s=drain_s, unlock=unlock,
                                   drain_name=drain_name)
        return NotStopped(where=current.where if current is not None else "(none)")

    def read_log(self, log_path: str) -> str:
        if not log_path:
            return ""
        return self.inner.read_log(log_path) if self.inner is not None else ""

    def status(self):
        """What the host's own kind recorded (an attached endpoint is never recorded: nothing of ours)."""
        return self.inner.status() if self.inner is not None else (None, "none")
