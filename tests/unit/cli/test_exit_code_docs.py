"""nightly's exit code 3 (inconclusive: `analysis.verdict.exit_code`) was missing from `nightly --help`,
docs/runbooks/nightly-setup.md and the systemd unit (issue 30), and a fleet's exit code was called "the largest of
the hosts'" where it is the most severe (2 > 1 > 3 > 0: `errors.worst_exit`)."""

from __future__ import annotations

from click.testing import CliRunner

from mtp_remote.analysis.verdict import exit_code
from mtp_remote.cli.main import main
from mtp_remote.errors import worst_exit
from tests.conftest import ROOT


def test_every_place_that_lists_the_nightlys_exit_codes_names_inconclusive():
    assert exit_code(["inconclusive"]) == 3
    help_text = " ".join(CliRunner().invoke(main, ["nightly", "--help"], terminal_width=400).output.split())
    assert "2 when the run could not be done, 3 inconclusive" in help_text
    setup = " ".join((ROOT / "docs" / "runbooks" / "nightly-setup.md").read_text().split())
    assert "2 the night could not be done, 3 inconclusive" in setup and "failed on 1, 2 and 3" in setup
    unit = (ROOT / "docs" / "deploy" / "mtp-remote-nightly.service").read_text()
    assert "3 inconclusive" in unit and "1, 2 and 3 mark the" in unit


def test_a_fleets_exit_code_is_the_most_severe_not_the_largest():
    assert worst_exit([3, 1]) == 1 and worst_exit([3, 0]) == 3 and worst_exit([1, 2, 3]) == 2
    for path in ("docs/runbooks/nightly-setup.md", "docs/deploy/mtp-remote-nightly.service",
                 "mtp_remote/fleet/nightly_fleet.py", "mtp_remote/report/fleet_ci.py"):
        assert "largest of" not in (ROOT / path).read_text().replace("r-th largest", ""), path
    help_text = " ".join(CliRunner().invoke(main, ["nightly", "--help"], terminal_width=400).output.split())
    assert "the most severe of the hosts' (2, then 1, then 3, then 0)" in help_text
