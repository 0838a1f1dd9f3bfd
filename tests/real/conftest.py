"""Fixtures for the real-engine tests: real SGLang 0.5.9 on this machine's CPU with a tiny local model.

``real_engine`` is the cache ``make real-setup`` built before pytest started (``make test`` runs it first;
``tests/support/real_sglang.py``): nothing is built here, under a per-test timeout. When the cache lacks a step,
the tests fail (not skip) with the step names and the command that builds them. Real SGLang takes 25-90 s to get
ready on 2 shared cores: waits here are generous but bounded
(the budgets of ``tests/support/real_hosts.py``, sized for a busy machine).
"""

from __future__ import annotations

import pytest

from tests.support import real_hosts
from tests.support.real_sglang import NotBuilt, RealEngine, engine

READY_S = real_hosts.READY_S  # bound on one real SGLang start (the budgets: tests/support/real_hosts.py)


@pytest.fixture(scope="session")
def real_engine() -> RealEngine:
    try:
        return engine()
    except NotBuilt as exc:
        pytest.fail(exc.message, pytrace=False)


def wait_ready_with_health(lc, rec, url: str):
    """:func:`tests.support.real_hosts.wait_ready_with_health` bounded by :data:`READY_S`."""
    return real_hosts.wait_ready_with_health(lc, rec, url, READY_S)
