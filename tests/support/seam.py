"""What the runner asks of any kind of server (:class:`mtp_remote.serving.base.ServerKind`), as one check a kind's
own tests can run: :func:`run_through_the_seam`.

A kind passes when a small diagnose runs on it end to end: every profile launched, ready and sampled (every request
answered), its stop reported, its log kept in the run directory, the A/A arm planned only when the kind can
relaunch, the host lock asked for only when the kind has one, and nothing of ours left running afterwards
(``find_leftover`` finds nothing).
"""

from __future__ import annotations

import json
from pathlib import Path

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.experiment.runner import ProfileRun, Runner
from mtp_remote.serving.base import ServerKind


def run_through_the_seam(kind: ServerKind, host: HostConfig, playbook: Playbook, run_dir: Path, *,
                         python: str) -> list[ProfileRun]:
    """Run ``playbook`` on ``host`` through ``kind`` (run id ``kind.run_id``) and assert the seam's contract;
    the profile runs, for the caller's own assertions."""
    assert isinstance(kind, ServerKind), "every member of the protocol is there"
    runs = Runner(host, playbook, run_dir, run_id=kind.run_id, python=python, kind=kind).run()
    planned = list(playbook.profiles) + (["baseline-aa"] if playbook.compare.calibration
                                         and kind.capabilities.relaunch else [])
    assert sorted(r.profile for r in runs) == sorted(planned), "one profile run per planned launch"
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    for r in runs:
        assert r.launched, (r.profile, r.cause, r.hint)
        assert r.stop and r.n_failed == 0, (r.profile, r.stop, r.n_failed)
        assert sum(1 for s in samples if s["profile"] == r.profile and s.get("error") is None) == r.n_requests
        assert (run_dir / "logs" / f"{r.profile}.log").stat().st_size > 0, "the server's log is kept"
    assert kind.find_leftover() is None, "nothing of ours is left running"
    rec, state = kind.status()
    assert state in ("none", "not running"), (rec, state)
    return runs
