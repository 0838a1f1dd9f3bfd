"""The real-engine cache's build (``make real-setup``, ``tests/support/real_sglang.py``) as a sequence of named,
stamped steps, run here with small steps of their own in a temporary cache (``MTP_REMOTE_REAL_CACHE``): each
step runs once, a second build builds nothing, a failure names its step and the log that holds the output and a
rerun resumes there, and a progress line comes while a step runs."""

from __future__ import annotations

import json
import sys
import time

import pytest

from tests.support import real_sglang as rs


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MTP_REMOTE_REAL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _steps(calls: list[str], *, fail: bool = False) -> tuple[rs.Step, ...]:
    def first(b: rs.Build) -> dict:
        calls.append("first")
        return {"n": 1}

    def second(b: rs.Build) -> dict:
        calls.append("second")
        code = 3 if fail else 0
        out = b.run([sys.executable, "-c", f"import sys; print('pip says hello'); sys.exit({code})"], "pip install x")
        return {"out": out.strip()}

    return (rs.Step("first step", "pip", first, f"{rs.NAME}/steps/first.json"),
            rs.Step("second step", "the model build", second, f"{rs.NAME}/steps/second.json"))


def test_each_step_runs_once_and_a_second_build_builds_nothing(cache):
    calls, said = [], []
    done = rs.build(steps=_steps(calls), say=said.append)
    assert done["built"] == ["first step", "second step"] and calls == ["first", "second"]
    assert json.loads((cache / rs.NAME / "steps" / "second.json").read_text())["out"] == "pip says hello"
    ready = json.loads((cache / rs.NAME / "READY.json").read_text())
    assert set(ready["steps"]) == {"first step", "second step"}
    assert any(line.startswith("[1/2] first step") for line in said), said
    assert rs.build(steps=_steps(calls), say=said.append)["built"] == [] and calls == ["first", "second"]
    assert rs.missing_steps(steps=_steps([])) == []


def test_a_failed_step_is_named_with_its_log_and_a_rerun_resumes_there(cache):
    calls = []
    with pytest.raises(rs.BuildError) as err:
        rs.build(steps=_steps(calls, fail=True), say=lambda m: None)
    e = err.value
    assert e.step.name == "second step" and "'second step' (the model build) failed" in e.message
    assert "pip install x: exit code 3" in e.message and "pip says hello" in e.evidence
    assert e.log == cache / f"{rs.NAME}.build.log" and "pip says hello" in e.log.read_text()
    assert [s.name for s in rs.missing_steps(steps=_steps([]))] == ["second step"]
    assert not (cache / rs.NAME / "READY.json").exists()
    calls.clear()
    assert rs.build(steps=_steps(calls), say=lambda m: None)["built"] == ["second step"] and calls == ["second"]


def test_the_make_target_exits_non_zero_naming_the_step_and_the_log(cache, monkeypatch, capsys):
    monkeypatch.setattr(rs, "STEPS", _steps([], fail=True))
    assert rs.main([]) == 2
    err = capsys.readouterr().err
    assert "real-setup FAILED in step 'second step' (the model build)" in err
    assert f"the whole output is in {cache / rs.NAME}.build.log" in err
    monkeypatch.setattr(rs, "STEPS", _steps([]))
    assert rs.main([]) == 0
    assert rs.main([]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"real-setup: {cache / rs.NAME} is built (every step stamped): nothing to build")


def test_a_progress_line_names_the_running_step_while_it_runs(cache, monkeypatch):
    monkeypatch.setattr(rs, "PROGRESS_S", 0.2)
    said = []
    def slow_step(b: rs.Build) -> dict:
        b.run([sys.executable, "-c", "import time; time.sleep(1.5)"], "pip install slow")
        return {}

    slow = rs.Step("slow step", "pip", slow_step, f"{rs.NAME}/steps/slow.json")
    t0 = time.monotonic()
    rs.build(steps=(slow,), say=said.append)
    beats = [line for line in said if line.startswith("... slow step: pip install slow (step 0m0")]
    assert len(beats) >= 3, said  # one every 0.2 s over 1.5 s
    assert time.monotonic() - t0 >= 1.5


def test_without_its_stamps_the_tests_fail_naming_the_steps_and_the_command(cache):
    with pytest.raises(rs.NotBuilt) as err:
        rs.engine()
    assert f"the real-engine cache {cache} lacks {len(rs.STEPS)} build step(s)" in err.value.message
    assert "pip: runtime dependencies (CPU torch)" in err.value.message and "make real-setup" in err.value.message


def test_a_cache_built_before_step_stamps_counts_its_steps_as_done(cache):
    (cache / rs.NAME).mkdir(parents=True)
    (cache / rs.NAME / "READY.json").write_text(json.dumps({"sglang_version": "0.5.9", "install_s": 100.0}))
    # that builder had no lint-venv step, no state faults and no trained model: those are still to build
    assert [s.name for s in rs.missing_steps()] == [s.name for s in rs.STEPS[7:]]
    assert rs.STEPS[-1] is rs.LINT_STEP and "trained hybrid" in rs.STEPS[-2].name
