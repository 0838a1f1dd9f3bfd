"""The SLURM suite's fixture: a real one-node cluster on 127.0.0.1 (tests/support/slurm.py), one per session
(per pytest-xdist worker), its daemons stopped by PID at the end. Skipped, with the reason, when the packages
are missing or the tests do not run as root (``make test`` installs them as root: ``make system-deps``)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.slurm import SlurmCluster, SlurmSetupError, missing_binaries, running_slurm


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    missing = missing_binaries()
    if missing:
        pytest.skip(f"no {', '.join(missing)}: install slurmctld slurmd munge slurm-client (make system-deps)")
    if os.geteuid() != 0:
        pytest.skip("the SLURM test cluster runs as root")
    # a directory of its own, not pytest's basetemp: a pytest session started meanwhile (another checkout on
    # the machine) prunes old basetemps, and the cluster's munge socket and state must outlive this session
    d = Path(tempfile.mkdtemp(prefix="mtp-slurm-"))
    try:
        with running_slurm(d) as cluster:
            yield cluster
    except SlurmSetupError as e:
        pytest.fail(str(e))
    finally:
        shutil.rmtree(d, ignore_errors=True)
