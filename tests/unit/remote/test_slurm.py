"""The SLURM command layer: parsers against outputs recorded on Slurm 22.05 (tests/unit/remote/slurm/*.json:
fact, output, expected), the batch script, and the judgements (ours or not, how a job ended, pending too long)."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict
from pathlib import Path

import pytest
from invoke import MockContext, Result
from pydantic import ValidationError

from mtp_remote.config.slurm import SlurmServing
from mtp_remote.remote import hostscripts, slurm, slurm_array

CASES = sorted((Path(__file__).parent / "slurm").glob("*.json"))
PARSERS = {"submit": slurm.parse_submit, "squeue": slurm.parse_squeue, "show_job": slurm.parse_show_job,
           "stop": slurm.parse_stop, "array_squeue": slurm_array.parse_array_squeue}


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_slurm_parser_gives_the_recorded_answer(path):
    case = json.loads(path.read_text())
    got = PARSERS[case["fact"]](case["output"])
    if case["fact"] == "array_squeue":
        got = {str(k): asdict(v) for k, v in got.items()}
        assert got == case["expected"]
        return
    assert (None if got is None else asdict(got)) == case["expected"]


def _rec(**kw) -> slurm.SlurmJob:
    base = dict(job_id=11, name="mtp-remote.sim-slurm.a", comment="mtp-remote:run=r1:profile=a", user="root",
                profile="a", run_id="r1", port=30031, log_path="/w/a.log", env_path="/w/.env-a")
    return slurm.SlurmJob(**{**base, **kw})


def _info(**kw) -> slurm.JobInfo:
    base = dict(job_id=11, name="mtp-remote.sim-slurm.a", user="root", state="RUNNING", exit_code=0,
                exit_signal=0, node="mtp-node1", comment="mtp-remote:run=r1:profile=a")
    return slurm.JobInfo(**{**base, **kw})


def test_batch_script_runs_the_server_as_the_only_step_with_no_shell_left():
    st = SlurmServing(partition="gpu", account="ml", gres="gpu:2", time_limit="1:00:00",
                      sbatch_lines=["#SBATCH --qos=high", "--constraint=h100"])
    text = slurm.plan_batch_script(name="mtp-remote.h.baseline", comment="mtp-remote:run=r1:profile=baseline",
                                   log_path="/w/logs/r1/baseline.log", workdir="/w", settings=st,
                                   python="/opt/py/bin/python", module="sglang.launch_server",
                                   argv=["--model-path", "/m", "--api-key", "s e;cret"], env_path="/w/.env-x")
    lines = text.splitlines()
    assert lines[0] == "#!/bin/sh"
    assert [ln for ln in lines if ln.startswith("#SBATCH")] == [
        "#SBATCH --job-name=mtp-remote.h.baseline", "#SBATCH --comment=mtp-remote:run=r1:profile=baseline",
        "#SBATCH --output=/w/logs/r1/baseline.log", "#SBATCH --chdir=/w", "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1", "#SBATCH --partition=gpu", "#SBATCH --account=ml", "#SBATCH --gres=gpu:2",
        "#SBATCH --time=1:00:00", "#SBATCH --qos=high", "#SBATCH --constraint=h100"]
    exec_line = text.split("\nexec ", 1)[1]
    words = shlex.split(exec_line)
    assert words[:4] == ["srun", "--ntasks=1", "/opt/py/bin/python", "-c"]
    assert words[4] == slurm.ENV_LOADER
    assert words[5:] == ["/w/.env-x", "/opt/py/bin/python", "-m", "sglang.launch_server", "--model-path", "/m",
                         "--api-key", "s e;cret"]


def test_batch_script_refuses_a_path_that_an_sbatch_line_would_split():
    with pytest.raises(ValueError, match="log path"):
        slurm.plan_batch_script(name="n", comment="c", log_path="/w/my logs/a.log", workdir="/w",
                                settings=SlurmServing(), python="p", module="m", argv=[], env_path="/w/e")


def test_submit_sends_one_command_with_the_environment_on_stdin_only():
    cmd = hostscripts.script_command("slurm_launch.sh", ["/w", "/w/.env", ""])
    c = MockContext(run={cmd: Result("user ops\nsbatch-begin\nsbatch-end\njob 42\nresult ok\n")})
    rep = slurm.submit(c, workdir="/w", env_path="/w/.env", conf=None, script="#!/bin/sh\nexec srun true\n",
                       env={"HF_TOKEN": "t0ps3cret"})
    assert (rep.result, rep.job_id, rep.user) == ("ok", 42, "ops")
    assert "t0ps3cret" not in cmd  # MockContext raised for any other command: this one ran, and only it


def test_a_job_is_ours_only_with_our_id_name_user_and_comment():
    rec = _rec()
    assert slurm.check_ours(rec, _info()) is None
    assert slurm.check_ours(rec, None) is None  # gone: nothing to signal
    assert "not a job of ours" in slurm.check_ours(rec, _info(name="train-llama"))
    assert "never another user's job" in slurm.check_ours(rec, _info(user="alice"))
    assert "another run's job" in slurm.check_ours(rec, _info(comment="mtp-remote:run=r0:profile=a"))
    assert slurm.check_ours(rec, _info(comment="", source="sacct")) is None  # sacct keeps no comment


def test_a_clean_stops_failed_137_reads_as_the_stop_it_was():
    end = slurm.read_end(_info(state="FAILED", exit_code=137), stopping=True)
    assert end.kind == "stopped"
    assert "FAILED (ExitCode 137:0)" in end.describe
    assert slurm.read_end(_info(state="FAILED", exit_code=1), stopping=False).kind == "crashed"
    assert slurm.read_end(_info(state="CANCELLED", exit_signal=15), stopping=False).kind == "cancelled"
    assert slurm.read_end(_info(state="TIMEOUT"), stopping=True).kind == "time-limit"
    assert slurm.read_end(_info(state="RUNNING"), stopping=True).kind == "running"


def test_pending_beyond_the_bound_is_a_failure_with_the_schedulers_reason():
    q = slurm.QueueState(job_id=13, state="PENDING", reason="Resources", node="")
    assert not slurm.judge_pending(q, 4, 300).over
    v = slurm.judge_pending(q, 301, 300)
    assert v.over
    assert v.describe == "job 13 pending for 301 s (scheduler's reason: Resources)"


@pytest.mark.parametrize("bad, field", [
    (dict(partition="gpu;rm -rf /"), "partition"),
    (dict(time_limit="1h"), "time_limit"),
    (dict(sbatch_lines=["--output=/tmp/x"]), "sbatch_lines"),
    (dict(sbatch_lines=["-o/tmp/x"]), "sbatch_lines"),
    (dict(sbatch_lines=["echo hi"]), "sbatch_lines"),
    (dict(pending_s=0), "pending_s"),
])
def test_slurm_settings_refuse_bad_values_naming_the_field(bad, field):
    with pytest.raises(ValidationError) as e:
        SlurmServing(**bad)
    assert e.value.errors()[0]["loc"][0] == field


def test_commands_name_the_cluster_and_quote_it():
    assert slurm.squeue_command(7, "/etc/my slurm.conf") == (
        "SLURM_CONF='/etc/my slurm.conf' squeue -h -j 7 -o '%A|%T|%r|%N' 2>/dev/null")
    assert slurm.squeue_command(7, None) == "squeue -h -j 7 -o '%A|%T|%r|%N' 2>/dev/null"


def test_a_task_of_an_array_is_named_by_its_array_form_never_by_its_own_id():
    # an array's job id names every task of it to squeue and scancel: a task's step is A_I.S
    steps = "8_1.0\n8_1.batch\n"
    assert slurm.step_listed(steps, "8_1", 0)
    assert not slurm.step_listed("8_0.0\n8_0.batch\n", "8_1", 0)
    assert slurm.steps_command("8_1", None) == "squeue -h -s -j 8_1 -o %i 2>/dev/null"
    with pytest.raises(ValueError):
        slurm.squeue_command("8_1; rm -rf /", None)
