"""Launching a server through a kind in a test and waiting until it answers: the steps many lifecycle tests share."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from mtp_remote.config.playbook import Playbook
from mtp_remote.remote.commands import server_argv, server_env


def health_check(url: str) -> Callable[[], bool]:
    """A ``health()`` for ``wait_ready``: True once ``URL/health`` answers 200 (2 s per try)."""

    def health() -> bool:
        try:
            return httpx.get(f"{url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    return health


def launch_ready(kind, playbook: Playbook, profile: str = "baseline", *, timeout_s: float = 60.0):
    """Launch ``profile`` of ``playbook`` through ``kind`` (a ProcessServer or its like, on 127.0.0.1:its port)
    and wait until it is ready and answers /health; asserts it did. Returns (record, outcome)."""
    host = kind.host
    rec = kind.launch(profile, server_argv(host, playbook, profile), server_env(host, playbook, profile, kind.workdir))
    outcome = kind.wait_ready(rec, timeout_s=timeout_s, health=health_check(f"http://127.0.0.1:{host.port}"))
    assert outcome.ok, outcome.describe() + "\n" + "\n".join(outcome.log_tail)
    return rec, outcome
