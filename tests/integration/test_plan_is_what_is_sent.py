"""The run's opening line says what the runner sends, on every shipped host of ``inventory.yaml`` with its own
playbook: the requests per arm (the A/A arm included) are counted from the playbook here, independently of
``experiment/plan.py``.

Simulated hosts run for real and their ``samples.jsonl`` is counted. Real-engine hosts are not launched: the
requests the test expects are stored before the runner starts (the opening line's progress hook writes them),
so a runner that planned what the test expects finds every one stored and launches nothing, saying per arm
"all N samples already stored"; a runner that planned another arm or more requests would launch — the hook
refuses that line and the test fails before any server starts.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml

from mtp_remote.config.playbook import Playbook, load_playbook
from mtp_remote.experiment.diagnose import diagnose
from mtp_remote.experiment.runner import Hooks
from mtp_remote.experiment.sampling import load_samples
from tests.conftest import ROOT
from tests.support.ports import free_port

SHIPPED = yaml.safe_load((ROOT / "inventory.yaml").read_text())
OPENING = re.compile(r"^run \S+: .* (\d+) requests planned over (\d+) profiles")


def expected_requests(pb: Playbook) -> Counter:
    """Requests per arm as the playbook defines them: per profile, every prompt at every temperature,
    ``greedy_samples`` times at 0 and ``samples`` times above; the A/A arm (``<baseline>-aa``) repeats the
    baseline's when ``compare.calibration`` is on."""
    per_arm = len(pb.prompts) * sum(pb.greedy_samples if t == 0 else pb.samples for t in pb.temperatures)
    arms = list(pb.profiles) + ([f"{pb.baseline}-aa"] if pb.compare.calibration else [])
    return Counter({arm: per_arm for arm in arms})


def shipped_copy(root: Path, name: str) -> tuple[Path, Path]:
    """``inventory.yaml`` with host ``name`` alone, on a free port and a workdir under ``root``, and the playbook
    that host runs (its own ``playbook:``, else the default), copied beside it."""
    host = dict(SHIPPED["hosts"][name], port=free_port(), workdir=str(root / "work"))
    playbook = host.pop("playbook", "playbooks/diagnose-mtp.yaml")
    (root / "playbooks").mkdir(exist_ok=True)
    shutil.copy(ROOT / playbook, root / playbook)
    (root / "inventory.yaml").write_text(yaml.safe_dump({"default_host": name, "hosts": {name: host}}))
    return root / "inventory.yaml", root / playbook


def _sent(run_dir: Path) -> Counter:
    return Counter(s["profile"] for s in load_samples(run_dir / "samples.jsonl"))


def _stored_sample(pb: Playbook, profile: str, t: float, prompt: str, i: int) -> dict:
    """A samples.jsonl record of a healthy answer (what a real engine would have stored)."""
    return {"profile": profile, "speculative": pb.profiles.get(profile, pb.profiles[pb.baseline]).speculative,
            "temperature": float(t), "prompt_id": prompt, "sample_index": i, "seed": pb.seed + i, "api": pb.api,
            "text": "The user asks a short question.\n</think>\n\nThe answer is short.", "finish_reason": "stop",
            "prompt_tokens": 16, "completion_tokens": 14, "latency_s": 0.5, "error": None,
            "think_opened_by_prompt": True}


def _store_expected(pb: Playbook, path: Path, expected: Counter) -> None:
    with path.open("w") as f:
        for arm in expected:
            for t in pb.temperatures:
                for i in range(pb.greedy_samples if t == 0 else pb.samples):
                    for p in pb.prompts:
                        f.write(json.dumps(_stored_sample(pb, arm, t, p.id, i)) + "\n")


def _kind(h: dict) -> str:
    return (h.get("server") or {}).get("kind", "process")


SIM = [n for n, h in SHIPPED["hosts"].items() if h.get("engine") == "sim" and _kind(h) == "process"]
REAL = [n for n, h in SHIPPED["hosts"].items() if h.get("engine") != "sim" and _kind(h) == "process"]
#: Hosts served in a container (``server.kind`` exec or container): their work directory lives in the container,
#: so this test's copy of the host (a workdir under tmp) cannot run there. Not covered here yet.
CONTAINED = [n for n, h in SHIPPED["hosts"].items() if _kind(h) != "process"]


def test_every_shipped_host_is_covered():
    assert len(SIM) >= 2 and len(REAL) >= 4 and set(SIM) | set(REAL) | set(CONTAINED) == set(SHIPPED["hosts"])


@pytest.mark.parametrize("name", SIM)
def test_a_simulated_host_is_sent_what_its_opening_line_plans(tmp_path: Path, name: str):
    inventory, playbook = shipped_copy(tmp_path, name)
    said: list[str] = []
    res = diagnose(inventory=inventory, playbook=playbook, runs_dir=tmp_path / "runs",
                   hooks=Hooks(on_progress=said.append))
    expected = expected_requests(load_playbook(playbook))
    n, arms = map(int, next(m for line in said if (m := OPENING.match(line))).groups())
    assert (n, arms) == (sum(expected.values()), len(expected))  # the line says the playbook's requests
    assert _sent(res.run_dir) == expected  # and the runner sent exactly those
    assert sum(expected.values()) == 75  # 5 prompts x (1 greedy + 4 at T = 0.7) x baseline, its A/A arm, mtp


@pytest.mark.parametrize("name", REAL)
def test_a_real_engine_host_would_be_sent_what_its_opening_line_plans(tmp_path: Path, name: str):
    inventory, playbook = shipped_copy(tmp_path, name)
    pb = load_playbook(playbook)
    expected = expected_requests(pb)
    runs, said = tmp_path / "runs", []

    def on_progress(line: str) -> None:
        said.append(line)
        if OPENING.match(line):  # run.json is written; the runner starts next: store what the test expects
            (run_dir,) = [d for d in runs.iterdir() if d.is_dir()]
            _store_expected(pb, run_dir / "samples.jsonl", expected)
        assert ": launching" not in line, f"the runner planned more than the test expects: {line}"

    res = diagnose(inventory=inventory, playbook=playbook, runs_dir=runs, hooks=Hooks(on_progress=on_progress))
    n, arms = map(int, next(m for line in said if (m := OPENING.match(line))).groups())
    assert (n, arms) == (sum(expected.values()), len(expected))
    skipped = dict(re.match(r"(\S+): all (\d+) samples already stored; not launched", line).groups()
                   for line in said if "already stored; not launched" in line)
    assert {arm: int(k) for arm, k in skipped.items()} == expected  # every arm the runner has, at its count
    assert {p.profile: p.n_requests for p in res.summary.profiles} == expected
    if pb.compare.calibration:  # the A/A arm is among the arms the opening line counts
        assert f"{pb.baseline}-aa" in expected and arms == len(pb.profiles) + 1
