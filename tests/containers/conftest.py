"""Fixtures for the container tests: a real runtime (podman or docker) and a locally built image.

No registry is reachable, so the image is a minimal rootfs imported here (``tests/support/containers.py``),
with the host's ``/usr``, this python and this clone bind-mounted read-only at run time. Without a runtime the
tests are skipped, except as root: ``make test`` installs podman then (``make system-deps``), so a missing one
is a failure. Every container a test starts carries the label ``mtp-remote=test-<pid>`` and is removed.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support import containers


@pytest.fixture(scope="session")
def runtime() -> str:
    rt = containers.runtime()
    if rt is None:
        msg = "no container runtime (podman or docker): `make system-deps` installs podman as root"
        if os.geteuid() == 0:
            pytest.fail(msg)
        pytest.skip(msg)
    try:
        containers.configure(rt)
    except RuntimeError as e:
        pytest.fail(str(e))
    return rt


@pytest.fixture(scope="session")
def image(runtime) -> str:
    """A test image of our rootfs (its own tag per test process)."""
    tag = f"localhost/mtp-remote-test:{os.getpid()}"
    containers.build_image(runtime, tag)
    yield tag
    subprocess.run([runtime, "rmi", "-f", tag], capture_output=True, check=False)


@pytest.fixture
def container_name(runtime, request):
    """A unique container name for this test, removed (with anything of ours by that name) afterwards."""
    name = f"mtp-test-{os.getpid()}-{request.node.name[:40]}".replace("[", "-").replace("]", "")
    yield name
    containers.remove(runtime, name)
