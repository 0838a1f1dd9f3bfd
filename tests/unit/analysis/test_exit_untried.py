"""Issue 33 minor: a port taken between two profiles (another server started on it meanwhile) made the speculative
profile ``launch-failed:port_in_use`` and the run exit 1 ("corrupts output"); a profile that could not be tried
for a reason of the host's is "could not be done" (exit 2). A failure of the profile itself stays 1, and a
corrupt finding elsewhere still wins."""

from __future__ import annotations

import pytest

from mtp_remote.analysis.verdict import HOST_CAUSES, exit_code
from mtp_remote.errors import EXIT_CORRUPT, EXIT_HEALTHY, EXIT_INCONCLUSIVE, EXIT_RUN_FAILED


@pytest.mark.parametrize("cause", sorted(HOST_CAUSES))
def test_a_profile_the_host_kept_from_being_tried_is_exit_2(cause):
    assert exit_code([f"launch-failed:{cause}"]) == EXIT_RUN_FAILED
    assert exit_code(["healthy", f"launch-failed:{cause}", "inconclusive"]) == EXIT_RUN_FAILED


def test_a_failure_of_the_profile_itself_or_a_corrupt_finding_stays_exit_1():
    assert exit_code(["launch-failed:cuda_graph_oom"]) == EXIT_CORRUPT
    assert exit_code(["crashed:port_in_use"]) == EXIT_CORRUPT  # after ready: the server itself failed
    assert exit_code(["spec-corrupts-output", "launch-failed:port_in_use"]) == EXIT_CORRUPT
    assert exit_code(["inconclusive"]) == EXIT_INCONCLUSIVE and exit_code(["healthy"]) == EXIT_HEALTHY
