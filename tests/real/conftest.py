"""Fixtures for the real-engine tests: real SGLang 0.5.9 on this machine's CPU with a tiny local model.

``real_engine`` builds the cached venv and model on first use (``tests/support/real_sglang.py``: a few minutes,
once per machine; later runs, other clones and CI on the same machine reuse it) and skips only when the package
registry cannot be reached. Real SGLang takes 25-90 s to get ready on 2 shared cores: waits here are generous
but bounded.
"""

from __future__ import annotations

import pytest

from mtp_remote.errors import MtpRemoteError
from mtp_remote.lint.sglang_env import registry_unreachable
from tests.support import real_hosts
from tests.support.real_sglang import RealEngine, ensure_real_sglang

READY_S = 400.0  # bound on one real SGLang start (about 25 s quiet, 60-90 s on a loaded machine)


@pytest.fixture(scope="session")
def real_engine() -> RealEngine:
    try:
        return ensure_real_sglang(log=lambda msg: print(f"[real-setup] {msg}"))
    except MtpRemoteError as exc:
        if registry_unreachable(exc):
            pytest.skip(f"package registry unreachable, cannot build real SGLang: {exc}")
        raise


def wait_ready_with_health(lc, rec, url: str):
    """:func:`tests.support.real_hosts.wait_ready_with_health` bounded by :data:`READY_S`."""
    return real_hosts.wait_ready_with_health(lc, rec, url, READY_S)
