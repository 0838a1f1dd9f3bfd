"""Shared fixtures: the corpus path and a real OpenSSH sshd on 127.0.0.1.

The sshd fixture (``tests/support/sshd.py``) uses throwaway host and user keys in a temporary directory, a
random port, and nothing from ~/.ssh; it logs in as the user running the tests (root in CI). Tests that need
it are skipped, with the reason, when no sshd binary exists (``make test`` installs openssh-server when it
runs as root).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.sshd import SshdError, SshServer, free_port, running_sshd, sshd_binary

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"

__all__ = ["ROOT", "CORPUS", "free_port", "SshServer"]

# the tests choose their hosts' ports themselves (tests/support/ports.py): an operator's offset for the shipped
# sim hosts (README, "The demo") must not move them
os.environ.pop("MTP_REMOTE_PORT_OFFSET", None)


#: The xdist group of the files that run one after another on one worker, never beside each other: real SGLang
#: on the CPU (its torch threads take every core) and the tests that assert a measured speed or duration
#: (tokens/s ratios, parallel wall time, signal timing).
ONE_WORKER = "timed-and-real-engine"
TIMED_FILES = frozenset({
    "tests/real/test_cpu_tree_ops.py", "tests/real/test_real_diagnose.py", "tests/real/test_real_lifecycle.py",
    "tests/real/test_real_hybrid.py", "tests/real/test_real_reference.py", "tests/real/test_real_faults.py",
    "tests/real/test_real_loop_stop.py", "tests/real/test_real_container.py",
    "tests/integration/test_mitigate.py", "tests/integration/test_speed_verdicts.py",
    "tests/integration/test_sampling_occupancy.py",
    "tests/integration/test_force_signal.py", "tests/integration/test_real_behaviour_lifecycle.py",
    "tests/integration/test_wait_ready.py",
    "tests/sim/test_sim_perf.py", "tests/sim/test_sim_mitigation.py", "tests/ssh/test_fleet_ssh.py",
    "tests/ssh/test_connect_errors.py", "tests/integration/test_gpu_namespace.py", "tests/containers/test_sim_pid1.py",
})


def pytest_configure(config):
    # pytest-xdist registers the mark when loaded; a serial run (-p no:xdist) must know it too
    config.addinivalue_line("markers", "xdist_group(name): the tests of one group run on one xdist worker")
    if getattr(config.option, "dist", None) == "loadgroup":
        # the controller hands out the groups in the order the workers collected them (the order
        # pytest_collection_modifyitems sets: ONE_WORKER first), not biggest test count first
        config.option.loadscopereorder = False


def pytest_itemcollected(item):
    """The units of ``--dist loadgroup`` (``make test``): every test gets an ``xdist_group`` mark as it is
    collected (before xdist's worker appends each item's group to its node id): the :data:`TIMED_FILES` the one
    group :data:`ONE_WORKER`, every other file a group of its own (its path), so the tests of a file share its
    module fixtures and never run beside each other, as with ``--dist loadfile``. A test that sets its own
    ``xdist_group`` keeps it. Without xdist the mark is inert."""
    if item.get_closest_marker("xdist_group") is None:
        path = item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(ONE_WORKER if path in TIMED_FILES else path))


@pytest.hookimpl(trylast=True)  # after xdist's worker hook, which appends each test's group to its node id
def pytest_collection_modifyitems(config, items):
    """Refuse to run ``--dist loadgroup`` ungrouped: pytest-xdist 3.8 names a test's group by appending
    ``@<group>`` to its node id, which pytest 9.2 ignores (pytest-dev/pytest-xdist#1386), so the files' tests
    would spread over the workers, real SGLang beside the timed tests (``pyproject.toml`` pins pytest < 9.2).
    Then put the items in the order the groups are handed out (:func:`_loadgroup_order`)."""
    if not getattr(config.option, "loadgroup", False) or not items:
        return
    if "@" not in items[0].nodeid:
        raise pytest.UsageError(
            f"--dist loadgroup does not group with pytest {pytest.__version__} and this pytest-xdist "
            "(pytest-dev/pytest-xdist#1386): install the pinned versions (make install)")
    items.sort(key=_loadgroup_order)


def _loadgroup_order(item) -> tuple[bool, bool]:
    """The order ``--dist loadgroup`` hands the groups out in (``pytest_configure`` turns off xdist's own, most
    tests first, which started ONE_WORKER fifth): ONE_WORKER first, the longest unit (real SGLang: most of
    ``make test``'s wall time), so one worker starts on it at once while the others share every other group in
    collection order (tests/integration's sim files first, tests/unit's small ones last). Within ONE_WORKER the
    timed sim files come before tests/real: they mostly wait on the sim's clock and use little CPU, so they run
    while the other worker is busiest, and the real engine, which wants every core, runs last, when the other
    worker has least left. A stable sort: each file's tests keep their order."""
    one_worker = item.nodeid.endswith("@" + ONE_WORKER)
    return not one_worker, one_worker and item.nodeid.startswith("tests/real/")


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
