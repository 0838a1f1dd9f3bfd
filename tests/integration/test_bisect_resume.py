"""bisect is resumable like diagnose and mitigate: interrupted (Ctrl-C through the checkpoint hook) after two
finished tests, it keeps them; resumed, it launches neither those flag sets nor the baseline again, a test
interrupted while in flight is run again under its own name (its stored samples, if any, continue), and the
bisect ends with the same minimal change and command. The sim as a real process (local transport)."""

from __future__ import annotations

import json
import re

import pytest

from mtp_remote.errors import ConfigError, Interrupted
from mtp_remote.experiment.runner import Hooks
from mtp_remote.search.bisect import bisect
from tests.integration.test_mitigate import MTP, write_field

pytestmark = pytest.mark.sim
BAD = MTP + " --disable-radix-cache --cuda-graph-max-bs 8"


class Recorder:
    """Progress hooks that remember which profiles were launched and which tests finished, and ask for an
    interrupt (as Ctrl-C does) once ``stop_after`` tests have finished."""

    def __init__(self, stop_after: int | None = None, stop_on_launch: str | None = None):
        self.stop_after, self.stop_on_launch = stop_after, stop_on_launch
        self.launched, self.finished, self.requested, self.messages = [], [], False, []

    def on_progress(self, msg: str) -> None:
        self.messages.append(msg)
        if m := re.match(r"^(\S+): launching ", msg):
            self.launched.append(m.group(1))
            self.requested = self.requested or m.group(1) == self.stop_on_launch
        if m := re.match(r"^bisect (t\d+): (fail|pass|unresolved) ", msg):
            self.finished.append(m.group(1))
            self.requested = self.stop_after is not None and len(self.finished) >= self.stop_after

    def checkpoint(self) -> None:
        if self.requested:
            raise KeyboardInterrupt

    def hooks(self) -> Hooks:
        return Hooks(on_progress=self.on_progress, interrupted=lambda: self.requested, checkpoint=self.checkpoint)


def test_an_interrupted_bisect_resumes_without_relaunching_finished_tests(tmp_path):
    write_field(tmp_path, host="sim")
    args = {"inventory": str(tmp_path / "inventory.yaml"), "playbook": str(tmp_path / "pb.yaml"),
            "runs_dir": tmp_path / "runs"}

    first = Recorder(stop_after=2)
    with pytest.raises(Interrupted) as e:
        bisect(**args, bad=BAD, repeats=2, hooks=first.hooks())
    (run_dir,) = [p.parent for p in (tmp_path / "runs").glob("*/bisect.json")]
    assert f"continue with: mtp-remote bisect --resume {run_dir.name} " in str(e.value)
    stored = json.loads((run_dir / "bisect.json").read_text())
    assert first.finished == ["t1", "t2"] and [t["name"] for t in stored["tests"]] == ["t1", "t2"]
    assert first.launched == ["baseline", "t1", "t2"] and stored["pending"] is None
    assert stored["tests"][0]["outcome"] == "fail"  # the whole bad line corrupts
    opening = first.messages[0]  # the run opens with its one line, as diagnose's does
    assert opening.startswith(f"bisect run {run_dir.name}: host sim [local], engine sim (simulated); playbook ")
    assert "flag difference(s) from baseline (good)" in opening and "faults injected: state_leak" in opening

    # resumed, then interrupted again while the next test's server starts: that test is left pending
    second = Recorder(stop_on_launch="t3")
    with pytest.raises(Interrupted):
        bisect(**args, resume=run_dir.name, hooks=second.hooks())
    assert second.launched == ["t3"] and second.finished == []
    assert second.messages[0].startswith(f"bisect run {run_dir.name} (resumed): ") and "2 test(s) stored, not launched again" in second.messages[0]
    pending = json.loads((run_dir / "bisect.json").read_text())["pending"]
    t3_before = _keys(run_dir, "t3")
    assert pending["name"] == "t3"

    third = Recorder()
    res = bisect(**args, resume=run_dir.name, hooks=third.hooks())
    doc = res.document
    assert res.run_id == run_dir.name and res.exit_code == 0
    done_before = {tuple(t["flags"]) for t in stored["tests"]}
    new_tests = doc["tests"][len(stored["tests"]):]
    assert doc["tests"][:2] == stored["tests"], "the stored results are kept as they were"
    assert new_tests and not {tuple(t["flags"]) for t in new_tests} & done_before
    assert new_tests[0]["name"] == "t3" and new_tests[0]["flags"] == pending["flags"]
    assert third.launched == [t["name"] for t in new_tests], "neither the baseline nor t1, t2 relaunched"
    t3_keys = _keys(run_dir, "t3")
    assert len(t3_keys) == len(set(t3_keys)) and set(t3_before) <= set(t3_keys), "t3's samples continued"
    assert doc["minimal"] == ["--speculative-algorithm NEXTN"]
    port = doc["command"].rsplit(" ", 1)[1]
    assert doc["command"].endswith(f"--speculative-algorithm NEXTN --host 127.0.0.1 --port {port}")

    with pytest.raises(ConfigError, match="no resumable bisect run"):
        bisect(**args, resume="20990101-000000-0000")


def _keys(run_dir, profile: str) -> list[tuple]:
    """(prompt, sample index) of every stored sample of ``profile``, repeats included."""
    rows = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines() if x.strip()]
    return [(r["prompt_id"], r["sample_index"]) for r in rows if r["profile"] == profile and r.get("error") is None]
