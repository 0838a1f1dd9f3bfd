"""Shared fixtures: the corpus path and a real OpenSSH sshd on 127.0.0.1.

The sshd fixture (``tests/support/sshd.py``) uses throwaway host and user keys in a temporary directory, a
random port, and nothing from ~/.ssh; it logs in as the user running the tests (root in CI). Tests that need
it are skipped, with the reason, when no sshd binary exists (``make test`` installs openssh-server when it
runs as root).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.sshd import SshdError, SshServer, free_port, running_sshd, sshd_binary

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"

__all__ = ["ROOT", "CORPUS", "free_port", "SshServer"]


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.exists():
        pytest.fail(f"corpus not found at {CORPUS}: ../shared must sit beside the repository")
    return CORPUS


@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> SshServer:
    if sshd_binary() is None:
        pytest.skip("no sshd binary: install openssh-server (make test does it when run as root)")
    try:
        with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
            yield server
    except SshdError as e:
        pytest.fail(str(e))
