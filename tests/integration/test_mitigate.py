"""After the verdict, on the sim as a real process (local transport): mitigate ranks the cure first with its
speed and skips the no-op, resumes without relaunching, bisect finds exactly the trigger, and bug-report
writes a masked issue body from the runs."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.experiment import diagnose as api
from mtp_remote.experiment.runner import Hooks
from mtp_remote.search.bisect import bisect
from mtp_remote.search.mitigate import mitigate
from tests.conftest import ROOT, free_port
from tests.integration.test_scenarios import FAST_START

pytestmark = pytest.mark.sim
HOST = "gpu-secret-7"
MTP = ("--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
       "--speculative-num-draft-tokens 4")


def write_field(tmp, host: str = HOST, time_scale: float = 0.01) -> None:
    """``tmp/inventory.yaml`` with one sim host (local, state_leak, ``time_scale``, a fast start) and ``tmp/pb.yaml``,
    the field playbook cut to 4 prompts x 3 samples at T=0.7."""
    inv = {"default_host": host, "hosts": {host: {
        "transport": "local", "engine": "sim", "workdir": str(tmp / "wd"), "port": free_port(),
        "python": sys.executable,
        "env": {"SGLANG_SIM_TIME_SCALE": str(time_scale), "SGLANG_SIM_STARTUP_SCALE": FAST_START,
                "SGLANG_SIM_FAULTS": "state_leak"}}}}
    (tmp / "inventory.yaml").write_text(yaml.safe_dump(inv))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=3, max_tokens=1024, temperatures=[0.7], prompts=pb["prompts"][:4],
              compare={**pb["compare"], "calibration": False})  # T > 0 only: no greedy for an A/A arm to floor
    (tmp / "pb.yaml").write_text(yaml.safe_dump(pb))


@pytest.fixture(scope="module")
def field(tmp_path_factory):
    """A faulty sim host, a small field playbook and one diagnose run of it: (inventory, playbook, runs, run)."""
    tmp = tmp_path_factory.mktemp("mitigate")
    # time scale 0.05 (a decode step of 1.5 ms): at 0.01 a step (0.3 ms) is as short as the sim's own Python work
    # per step, and on two loaded cores (CI, stop 24) the measured speeds ranked the baseline above the cure
    write_field(tmp, time_scale=0.05)
    runs = tmp / "runs"
    res = api.diagnose(inventory=str(tmp / "inventory.yaml"), playbook=str(tmp / "pb.yaml"), runs_dir=runs)
    assert res.summary["verdicts"][0]["kind"] == "spec-corrupts-output"
    return str(tmp / "inventory.yaml"), str(tmp / "pb.yaml"), runs, res.run_id


def test_mitigate_ranks_the_cure_first_with_its_speed_and_skips_the_no_op(field):
    inv, pb, runs, diag = field
    res = mitigate(inventory=inv, playbook=pb, runs_dir=runs, from_run=diag,
                   only=["no-overlap", "no-radix", "no-cuda-graph"])
    rows = {r["name"]: r for r in res.document["rows"]}
    first, base = rows["no-overlap"], rows["baseline"]
    # 12 samples per arm, no loop: the cure, but loop-free is not shown over the 2 candidates judged (issue 31:
    # 0/12 vs 0/12 bounds the excess only under ~20 %), so it is the pick with "no loops seen"
    assert first["status"] == "no-loops-seen" and first["loops"] == 0 and first["accept_length"] > 2.5
    assert first["family"] == 2 and first["bound_p_adjusted"] >= 0.05
    assert "no loop seen in 12 samples, but loop-free not shown over the 2 candidate(s)" in \
        res.document["recommendation"] or res.document["recommendation"].startswith("Recommendation: **run without")
    # ranked by the speeds as measured. The sim's model makes the cure faster (tests/sim/test_sim_mitigation.py:
    # > 1.2x, 1.8x measured at time scale 0.1), but on two cores at load 15 (CI, stop 25) the sim's own Python work
    # per step outweighed its modelled time and the cure measured slower: then the baseline is #1, as it must be
    faster = first["speed_vs_baseline"] > 1.0
    assert (first["rank"], base["rank"]) == ((1, 2) if faster else (2, 1)), (first, base)
    assert res.document["rows"][0]["name"] == ("no-overlap" if faster else "baseline")
    assert rows["no-radix"]["status"] == "skipped" and "0.5.9" in rows["no-radix"]["evidence"]
    assert rows["no-cuda-graph"]["status"] == "corrupts"
    assert rows["mtp"]["status"] == "reference" and rows["mtp"]["verdict"] == "spec-corrupts-output"
    assert res.exit_code == 0 and res.document["best"] == "no-overlap"
    # the baseline and the corrupting profile came from the diagnose run: neither was launched again
    assert res.document["reused"].startswith("24 samples of baseline and mtp")
    assert sorted(p.name for p in (res.run_dir / "logs").iterdir()) == ["no-cuda-graph.log", "no-overlap.log"]
    md = (res.run_dir / "mitigation.md").read_text()
    assert f"| {first['rank']} | no-overlap |" in md
    # speeds come with 95 % intervals (Welch on ln tokens/s of the non-looping samples), in the table and the JSON
    lo, hi = first["speed_ci"]
    assert lo < first["speed_vs_baseline"] < hi and hi / lo < 1.5, first
    assert first["log_speed"]["n"] == 12 and first["base_log_speed"]["n"] == 12 and first["flag_changes"] == 1
    assert f"{first['speed_vs_baseline']:.2f}x [{lo:.2f}–{hi:.2f}]" in md
    # the cure is recommended when it beats the baseline beyond doubt; otherwise running without speculation is
    rec = res.document["recommendation"]
    assert rec.startswith("Best: **no-overlap** (" if lo > 1.0 else "Recommendation: **run without speculation**"), rec
    assert rec in md and "no-overlap" in rec
    n = len((res.run_dir / "samples.jsonl").read_text().splitlines())
    said = []
    again = mitigate(inventory=inv, playbook=pb, runs_dir=runs, resume=res.run_id, hooks=Hooks(on_progress=said.append))
    assert len((res.run_dir / "samples.jsonl").read_text().splitlines()) == n, "resume launched nothing"
    assert said[0].startswith(f"mitigate run {res.run_id} (resumed): host {HOST} [local], engine sim (simulated)")
    assert "over the baseline, mtp as deployed and 2 candidate(s) (1 skipped)" in said[0]
    base = next(r for r in res.document["rows"] if r["name"] == "baseline")
    assert base["status"] == "baseline" and base["rank"] is not None and base["speed_vs_baseline"] == 1.0
    assert again.document["best"] == "no-overlap"


def test_bisect_finds_exactly_the_triggering_flag_among_noise(field):
    inv, pb, runs, diag = field
    bad = MTP + " --disable-radix-cache --cuda-graph-max-bs 8 --mamba-scheduler-strategy no_buffer"
    res = bisect(inventory=inv, playbook=pb, runs_dir=runs, bad=bad, from_run=diag, repeats=2)
    assert res.document["minimal"] == ["--speculative-algorithm NEXTN"]
    assert res.document["command"].endswith("--speculative-algorithm NEXTN --host 127.0.0.1 --port "
                                            + res.document["command"].rsplit(" ", 1)[1])
    assert res.document["baseline_reused"] == 12 and len(res.document["tests"]) <= 4


def test_bisect_from_the_cure_back_to_the_bug_names_the_removed_cure(field):
    inv, pb, runs, _ = field
    res = bisect(inventory=inv, playbook=pb, runs_dir=runs, good=MTP + " --disable-overlap-schedule", bad="mtp",
                 repeats=2)
    assert res.document["minimal"] == ["without --disable-overlap-schedule"]
    bad_test, good_test = res.document["tests"]  # 8 samples of the good line: loop-free, maybe not provably so
    assert bad_test["outcome"] == "fail" and good_test["outcome"] in ("pass", "unresolved")
    assert good_test["verdict"] != "spec-corrupts-output"


def test_bug_report_has_environment_command_evidence_excerpt_and_mitigations_with_the_host_masked(field):
    _inv, _pb, runs, diag = field
    r = CliRunner().invoke(main, ["bug-report", diag, "--runs-dir", str(runs)])
    assert r.exit_code == 0, r.output
    text = (runs / diag / "bug-report.md").read_text()
    for part in ("### Environment", "- SGLang: 0.5.9", "- driver: 550.54.15", "### Minimal reproducing command",
                 "the trigger is `--speculative-algorithm NEXTN`", "| mtp | 0.7 |", "### Excerpt of a looping output",
                 "### Mitigations tried"):
        assert part in text, part
    assert re.search(r"\| [12] \| no-overlap \|", text), text  # its rank: by the measured speeds (test above)
    # the excerpt is a piece of one of the run's looping mtp outputs (which sentence loops varies by sample)
    block = text.split("### Excerpt of a looping output", 1)[1].split("```")[1].strip()
    head, excerpt = block.split("\n", 1)  # "[prompt, T, seed, ...; loop of N tokens x R ...]" then the text
    excerpt = excerpt.strip("…")
    assert head.startswith("[") and "loop of" in head, head
    looping = [json.loads(x) for x in (runs / diag / "samples.jsonl").read_text().splitlines()]
    looping = [s["text"] for s in looping if s["profile"] == "mtp" and (s.get("metrics") or {}).get("loop")]
    assert len(excerpt) > 40 and any(excerpt[:40] in t for t in looping), excerpt
    assert HOST not in text and str(runs.parent) not in json.dumps(text)


def test_the_new_commands_are_listed_by_both_entry_points():
    import subprocess

    r = CliRunner().invoke(main, ["--help"])
    assert all(cmd in r.output for cmd in ("mitigate", "bisect", "bug-report"))
    fab = subprocess.run([sys.executable, "-m", "fabric", "-l"], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    assert all(f"  {t} " in fab.stdout for t in ("mitigate", "bisect", "fleet")), fab.stdout + fab.stderr


def _faulty_and_healthy(tmp_path) -> None:
    """``tmp_path/inventory.yaml``: sim-a with state_leak, sim-b healthy (group ``pair``), and ``pb.yaml``, the field
    playbook cut to 4 prompts x 3 samples at T = 0.7."""
    hosts = {}
    for name, faults in (("sim-a", "state_leak"), ("sim-b", None)):
        env = {"SGLANG_SIM_TIME_SCALE": "0.01", **({"SGLANG_SIM_FAULTS": faults} if faults else {})}
        hosts[name] = {"transport": "local", "engine": "sim", "workdir": str(tmp_path / name), "port": free_port(),
                       "python": sys.executable, "env": env}
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump({"default_host": "sim-a", "hosts": hosts,
                                                             "groups": {"pair": ["sim-a", "sim-b"]}}))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=3, max_tokens=768, temperatures=[0.7], prompts=pb["prompts"][:4],
              compare={**pb["compare"], "calibration": False})  # T > 0 only: no greedy for an A/A arm to floor
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))


def test_mitigate_on_a_group_runs_every_host_and_names_the_one_whose_best_differs(tmp_path):
    _faulty_and_healthy(tmp_path)
    r = CliRunner().invoke(main, ["mitigate", "-i", str(tmp_path / "inventory.yaml"), "-H", "pair", "-p",
                                  str(tmp_path / "pb.yaml"), "--runs-dir", str(tmp_path / "runs"),
                                  "--candidate", "no-cuda-graph"])
    fleet = json.loads(next((tmp_path / "runs").glob("fleet-*/fleet.json")).read_text())
    best = {h["host"]: h["verdicts"]["best"] for h in fleet["hosts"]}
    # the faulty host: --disable-cuda-graph does not cure state_leak; the healthy one: it is loop-free there
    assert best == {"sim-a": "none", "sim-b": "no-cuda-graph"}, r.output
    assert fleet["exit_code"] == 1 and r.exit_code == 1
    assert [d["hosts"] for d in fleet["disagreements"]] in ([["sim-a"]], [["sim-b"]])


def test_spread_shares_the_candidates_out_over_same_release_hosts_and_merges_one_table(tmp_path):
    from mtp_remote.fleet.fleet import spread_mitigate

    hosts = {name: {"transport": "local", "engine": "sim", "workdir": str(tmp_path / name), "port": free_port(),
                    "python": sys.executable,
                    "env": {"SGLANG_SIM_TIME_SCALE": "0.01", "SGLANG_SIM_FAULTS": "state_leak"}}
             for name in ("sim-a", "sim-b")}
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump({"default_host": "sim-a", "hosts": hosts}))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=3, max_tokens=768, temperatures=[0.7], prompts=pb["prompts"][:4],
              compare={**pb["compare"], "calibration": False})  # T > 0 only: no greedy for an A/A arm to floor
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))
    doc = spread_mitigate(["sim-a", "sim-b"], inventory=str(tmp_path / "inventory.yaml"),
                          playbook=str(tmp_path / "pb.yaml"), runs_dir=tmp_path / "runs",
                          only=["no-overlap", "no-cuda-graph", "no-radix"])
    where = {r["name"]: r["host"] for r in doc["rows"] if r["status"] != "reference"}
    assert where == {"no-overlap": "sim-a", "no-cuda-graph": "sim-b", "no-radix": "sim-a",
                     "baseline": "sim-a"}  # one baseline row: the first host's
    # every host runs the as-deployed profile: a cure counts only where the bug reproduces (both hosts here)
    assert sorted(r["host"] for r in doc["rows"] if r["status"] == "reference") == ["sim-a", "sim-b"]
    # the cure and the baseline are ranked by their measured speeds (either may be #1 on loaded cores: see above)
    assert {r["name"] for r in doc["rows"][:2]} == {"no-overlap", "baseline"}, doc["rows"]
    assert doc["best"] == "no-overlap" and doc["left_out"] == {}
    statuses = {r["name"]: r["status"] for r in doc["rows"]}
    assert statuses == {"no-overlap": "no-loops-seen", "no-cuda-graph": "corrupts", "no-radix": "skipped",
                        "mtp": "reference", "baseline": "baseline"}


def test_spread_marks_the_cures_of_a_host_where_the_bug_does_not_reproduce_as_not_comparable(tmp_path):
    # issue 31: `attn-triton @sim-healthy` was ranked =#1 although it corrupts on the faulty host: a candidate
    # measured where the as-deployed profile is healthy says nothing about curing the bug
    from mtp_remote.fleet.fleet import spread_mitigate

    _faulty_and_healthy(tmp_path)
    doc = spread_mitigate(["sim-a", "sim-b"], inventory=str(tmp_path / "inventory.yaml"),
                          playbook=str(tmp_path / "pb.yaml"), runs_dir=tmp_path / "runs",
                          only=["no-overlap", "no-cuda-graph"])
    rows = {(r["name"], r["host"]): r for r in doc["rows"]}
    assert rows[("mtp", "sim-a")]["verdict"] == "spec-corrupts-output"
    assert rows[("mtp", "sim-b")]["verdict"] != "spec-corrupts-output"
    other = rows[("no-cuda-graph", "sim-b")]
    assert other["status"] == "not-comparable" and other["rank"] is None
    assert "does not reproduce the bug on sim-b" in other["evidence"]
    assert doc["best"] == "no-overlap" and rows[("no-overlap", "sim-a")]["rank"] in (1, 2)  # the baseline may be #1


def test_two_cures_of_the_same_modelled_speed_are_ranked_with_a_tie_exactly_when_the_samples_cannot_tell(field):
    """The playbook adds a cure that is no-overlap plus a flag the sim does not price (the same modelled
    speed). Whether 12 samples per arm separate the two depends on the launch (on a loaded machine the same
    configuration measured 0.54x-1.47x of itself across relaunches, docs/metrics.md), so the test checks that
    the table says what its own interval says: tied (and the one-flag change picked, the tie said) exactly
    when the Welch interval of the runner-up over #1 contains 1."""
    from mtp_remote.search.mitigate import CandidateResult
    from mtp_remote.search.ranking import versus_top

    inv, pb, runs, diag = field
    data = yaml.safe_load(Path(pb).read_text())
    data["mitigations"] = [{"name": "no-overlap-bs8", "flags": "--disable-overlap-schedule --cuda-graph-max-bs 8"}]
    pb2 = str(Path(pb).with_name("pb-two-cures.yaml"))
    Path(pb2).write_text(yaml.safe_dump(data))
    res = mitigate(inventory=inv, playbook=pb2, runs_dir=runs, from_run=diag, only=["no-overlap", "no-overlap-bs8"])
    rows = {r["name"]: r for r in res.document["rows"]}
    assert rows["no-overlap"]["status"] == rows["no-overlap-bs8"]["status"] == "no-loops-seen"
    assert (rows["no-overlap"]["flag_changes"], rows["no-overlap-bs8"]["flag_changes"]) == (1, 2)

    def as_row(r: dict) -> CandidateResult:
        return CandidateResult(**{**r, "flags": tuple(r["flags"])})

    # every ranked row below #1 is tied with #1 exactly when its interval over #1 contains 1 (whatever #1 is: on
    # loaded cores the baseline can measure fastest, see the test above)
    ranked = [r for r in res.document["rows"] if r["rank"] is not None]
    assert [r["rank"] for r in ranked] == [1, 2, 3], ranked
    for r in ranked[1:]:
        c = versus_top(as_row(r), as_row(ranked[0]))
        assert r["tied_with"] == (ranked[0]["name"] if c.low <= 1.0 <= c.high else None), (r, c)
    first, second = ranked[:2]
    if "baseline" in (first["name"], second["name"]):
        return  # the two cures' own tie is what follows; the ranking above is what held here
    as_pair = [as_row(r) for r in (second, first)]
    c = versus_top(*as_pair)
    md = (res.run_dir / "mitigation.md").read_text()
    if c.low <= 1.0 <= c.high:
        assert second["tied_with"] == first["name"] and res.document["best"] == "no-overlap"
        assert "their speeds are not distinguishable with 12 non-looping samples each; no-overlap has the " \
               "smaller change (1 flag(s))" in res.document["recommendation"]
        assert "| 2 =#1 | " in md and "tied with #1 (not distinguishable at these samples)" in md
    else:
        assert second["tied_with"] is None and res.document["best"] == first["name"]
        assert res.document["recommendation"].startswith(f"Best: **{first['name']}** (")
        assert "=#1" not in md


def test_spread_says_which_candidates_a_failed_host_did_not_try_and_exits_2(tmp_path):
    """Issue 33 minor: a host of the spread that failed dropped its share of the candidates silently (exit 0)."""
    from mtp_remote.fleet.fleet import spread_mitigate

    hosts = {name: {"transport": "local", "engine": "sim", "workdir": str(tmp_path / name), "port": free_port(),
                    "python": sys.executable,
                    "env": {"SGLANG_SIM_TIME_SCALE": "0.01", "SGLANG_SIM_FAULTS": "state_leak"}}
             for name in ("sim-a", "sim-b")}
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump({"default_host": "sim-a", "hosts": hosts}))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=3, max_tokens=768, temperatures=[0.7], prompts=pb["prompts"][:4])
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))
    (tmp_path / "sim-b").mkdir()
    (tmp_path / "sim-b" / "logs").write_text("a file where sim-b's logs directory goes: its run cannot start\n")
    doc = spread_mitigate(["sim-a", "sim-b"], inventory=str(tmp_path / "inventory.yaml"),
                          playbook=str(tmp_path / "pb.yaml"), runs_dir=tmp_path / "runs",
                          only=["no-overlap", "no-cuda-graph"])
    assert doc["untried"] == {"sim-b": ["no-cuda-graph"]}
    assert "its candidates were not tried: no-cuda-graph" in doc["left_out"]["sim-b"]
    assert doc["exit_code"] == 2
