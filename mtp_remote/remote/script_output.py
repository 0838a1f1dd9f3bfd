"""What the host scripts print, as models: each script answers in ``key value`` lines (``result ok``,
``pid 4242``, ``holder-sha 9f…``), and each parser reads them through a model of that script's keys (a dashed key
by its alias) instead of by name. Values stay the text the script printed (a number is parsed where it is read,
so a garbled one reads as absent, as before); keys a model does not declare are ignored."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ScriptOutput(BaseModel):
    """The keys every script may print: ``result`` (absent: ``no-result``, the script said nothing)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    result: str = "no-result"


def count(text: str) -> int | None:
    """A non-negative count as printed, None when it is not one."""
    return int(text) if text.isdigit() else None


class WorkdirOutput(ScriptOutput):
    """workdir.sh: the directory (``workdir``), the lock file, its holder line and that line's sha256, the
    lock's age in seconds (host clock; may be negative)."""

    workdir: str = ""
    lock: str = ""
    holder: str = ""
    holder_sha: str = Field("", alias="holder-sha")
    lock_age: str = Field("", alias="lock-age")


class LaunchOutput(ScriptOutput):
    """launch.sh: the PID and the identity line (``pid pgid start_ticks boot_id cmdline_sha256``)."""

    pid: str = ""
    ident: str = ""


class StopOutput(ScriptOutput):
    """stop.sh: what it found and did (PIDs, members, orphans, strangers; GPU MiB held and above the level;
    times in centiseconds)."""

    result: str = "error stop script gave no result"
    found: str = "none"
    pid: str = ""
    pgid: str = ""
    reason: str = ""
    refused: str = ""
    members: str = ""
    orphans: str = ""
    strangers: str = ""
    gpu_mib: str = ""
    gpu_level_mib: str = ""
    gpu_release_by: str = "pid"
    exit_cs: str = ""
    gpu_release_cs: str = ""


class SignalOutput(ScriptOutput):
    """signal.sh: the PIDs that survived SIGKILL (None: the script did not get that far)."""

    result: str | None = None
    survivors: str | None = None


class SubmitOutput(ScriptOutput):
    """slurm_launch.sh: the job id and the user it runs as."""

    job: str = ""
    user: str = ""


class SlurmStopOutput(ScriptOutput):
    """slurm_stop.sh: the job's last record (``end``, else ``sacct``'s), the drain and gone times (cs)."""

    end: str = ""
    sacct: str = ""
    drained_cs: str = ""
    gone_cs: str = ""


class StepOutput(ScriptOutput):
    """slurm_step.sh: the step id."""

    step: str = ""


class ShowJob(BaseModel):
    """One ``scontrol show job -o`` record (``Key=Value`` words)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    job_id: str = Field(alias="JobId")
    name: str = Field("", alias="JobName")
    user: str = Field("", alias="UserId")
    state: str = Field("", alias="JobState")
    exit_code: str = Field("0:0", alias="ExitCode")
    node: str = Field("", alias="NodeList")
    comment: str = Field("", alias="Comment")
    reason: str = Field("", alias="Reason")
