"""The fleet nightly's metrics merge every host's exposition into one valid text: each family's HELP and TYPE
once, all hosts' samples under it, the group label on every sample (with or without labels of its own)."""

from __future__ import annotations

from mtp_remote.report.fleet_ci import merge_prometheus

A = """# HELP mtp_remote_up 1 when the last run completed.
# TYPE mtp_remote_up gauge
mtp_remote_up{host="gpu-1",playbook="nightly"} 1
# HELP mtp_remote_regressions Tested regressions.
# TYPE mtp_remote_regressions gauge
mtp_remote_regressions{host="gpu-1",playbook="nightly"} 0
"""
B = """# HELP mtp_remote_up 1 when the last run completed.
# TYPE mtp_remote_up gauge
mtp_remote_up{host="gpu-down",playbook="nightly"} 0
# HELP mtp_remote_build_info Bare sample.
# TYPE mtp_remote_build_info gauge
mtp_remote_build_info 1
"""


def test_families_are_declared_once_with_every_hosts_samples_labelled_with_the_group():
    out = merge_prometheus([A, B], 'group="rack"').splitlines()
    assert out == [
        "# HELP mtp_remote_up 1 when the last run completed.",
        "# TYPE mtp_remote_up gauge",
        'mtp_remote_up{group="rack",host="gpu-1",playbook="nightly"} 1',
        'mtp_remote_up{group="rack",host="gpu-down",playbook="nightly"} 0',
        "# HELP mtp_remote_regressions Tested regressions.",
        "# TYPE mtp_remote_regressions gauge",
        'mtp_remote_regressions{group="rack",host="gpu-1",playbook="nightly"} 0',
        "# HELP mtp_remote_build_info Bare sample.",
        "# TYPE mtp_remote_build_info gauge",
        'mtp_remote_build_info{group="rack"} 1',
    ]
