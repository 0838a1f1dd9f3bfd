"""Early-stopping bookkeeping of the runner (``sampling.Cells``): counts in memory, looks on whole rounds only."""

from __future__ import annotations

import json
from collections import deque

import yaml

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook
from mtp_remote.experiment.plan import plan_run
from mtp_remote.experiment.runner import Runner
from mtp_remote.experiment.sampling import send_order
from tests.conftest import ROOT


def _runner(tmp_path, samples: int = 4) -> tuple[Runner, object]:
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=samples, temperatures=[0.7], early_stop=True)
    pb["prompts"] = pb["prompts"][:4]
    playbook = Playbook(**pb)
    host = HostConfig(name="sim", transport="local", engine="sim")
    runner = Runner(host, playbook, tmp_path, run_id="r", python="python3")
    base = [{"profile": "baseline", "temperature": 0.7, "prompt_id": p.id, "sample_index": i, "error": None,
             "metrics": {"loop": False}} for i in range(samples) for p in playbook.prompts]
    runner.samples_path.write_text("".join(json.dumps(r) + "\n" for r in base))
    (lp,) = [x for x in plan_run(host, playbook, str(tmp_path)) if x.profile == "mtp"]
    return runner, lp


def _rec(req, loop: bool) -> dict:
    return {"profile": req.profile, "temperature": req.temperature, "prompt_id": req.prompt_id,
            "sample_index": req.sample_index, "error": None, "metrics": {"loop": loop}}


def test_a_look_waits_for_the_slow_request_of_its_round_and_counts_whole_rounds_only(tmp_path):
    runner, lp = _runner(tmp_path)
    todo = list(lp.requests)
    cells = runner._cells(lp, todo)
    queue = deque(sorted(todo, key=send_order))
    by_key = {(r.sample_index, r.prompt_id): r for r in todo}
    slow = by_key[(0, lp.requests[0].prompt_id)]  # a looping output runs to max_tokens and returns last
    for r in todo:
        if r.sample_index in (0, 1) and r is not slow:
            cells.completed(r, _rec(r, loop=False), queue, lambda msg: None)
    assert cells.decision[0.7] is None, "no look while round 0 is incomplete, however many later ones returned"
    cells.completed(slow, _rec(slow, loop=True), queue, lambda msg: None)
    d = cells.decision[0.7]
    assert d is not None and d["n"] == 8  # rounds 0 and 1 complete: 2 x 4 prompts, the slow loop included


def test_the_queue_goes_round_by_round_and_a_settled_cell_drops_its_queued_requests(tmp_path):
    runner, lp = _runner(tmp_path, samples=8)
    todo = list(lp.requests)
    queue = deque(sorted(todo, key=send_order))
    assert [r.sample_index for r in list(queue)[:8]] == [0] * 4 + [1] * 4
    cells = runner._cells(lp, todo)
    messages: list[str] = []
    dropped = 0
    while queue and not cells.settled(0.7):
        r = queue.popleft()
        dropped += cells.completed(r, _rec(r, loop=True), queue, messages.append)
    d = cells.decision[0.7]
    assert d["settled"] and d["outcome"] == "spec-loops-more", d
    assert dropped == len(todo) - d["n"] and not queue
    assert messages and "requests saved" in messages[-1]
