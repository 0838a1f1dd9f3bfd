"""SLURM as facts and plans: the commands that submit, watch and stop a server job, and pure parsers of their output.

A server of a ``server: {kind: slurm}`` host is a batch job whose only step is the server itself::

    #!/bin/sh
    #SBATCH --job-name=mtp-remote.HOST.PROFILE  --comment=mtp-remote:run=RUN:profile=PROFILE  --output=LOG ...
    exec srun --ntasks=1 PY -c LOADER ENV_FILE PY -m sglang.launch_server ARGV...

No wrapper shell stays between the step and the server (the batch shell ``exec``s srun, the loader ``exec``s the
server in place), so ``scancel --signal=TERM J.0`` reaches SGLang's own SIGTERM handler and its drain. The record
is the job id (:class:`SlurmJob`); the job is known to be ours by its id *and* its name, comment and user
(:func:`check_ours`), so a stop never signals another user's job or one a recycled id now names.

Every command runs on the login node through ``c`` (an Invoke ``Context`` or a Fabric ``Connection``), with
``SLURM_CONF`` set when the host names a cluster (``server.conf``). Parsers are tested on recorded outputs of
Slurm 22.05 (``tests/unit/remote/slurm/*.json``); the scheduler itself in ``tests/slurm`` (a real one-node cluster).

States as ``squeue %T`` / ``scontrol JobState`` name them: PENDING, CONFIGURING, RUNNING, COMPLETING, COMPLETED,
FAILED, CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, BOOT_FAIL, DEADLINE, SUSPENDED, REQUEUED.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from ..config.slurm import SlurmServing
from . import hostscripts
from .script_output import ShowJob, SlurmStopOutput, StepOutput, SubmitOutput, count

#: Every job of ours is named ``mtp-remote.<host>.<profile>`` and commented ``mtp-remote:run=<id>:profile=<p>``.
JOB_PREFIX = "mtp-remote"
#: States in which a job holds (or waits for) its allocation.
ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
                    "SIGNALING", "STAGE_OUT", "REQUEUE_HOLD", "REQUEUE_FED"})
#: The environment loader, the job step's first image: JSON in (then removed), ``os.environ`` out, then
#: ``execv`` of the server in place (same PID: the step's signals are the server's). The same loader as
#: launch.sh's, with names checked again on the host.
ENV_LOADER = """import json, os, re, sys
path = sys.argv[1]
with open(path) as f:
    env = json.load(f)
os.unlink(path)
for name, value in env.items():
    if not re.fullmatch("[A-Za-z_][A-Za-z0-9_]*", name) or not isinstance(value, str) or "\\0" in value:
        sys.exit("mtp-remote: refused environment variable %r" % name)
    os.environ[name] = value
os.execv(sys.argv[2], sys.argv[2:])"""
#: What a batch-script line may hold of a value we write into it (paths and names): no whitespace, quotes or
#: newlines, which sbatch's own ``#SBATCH`` parser would split or keep.
_SCRIPT_VALUE = re.compile(r"[A-Za-z0-9_./:=+@%,~-]+")


#: A job as the commands name it: ``J`` (a job id), or ``A_I`` (task I of array A: an array's job id names the
#: whole array to ``squeue``/``scancel``, so a task is named by its array form, never by its own id).
JOB_SPEC = re.compile(r"\d+(_\d+)?")


def job_spec(job: int | str) -> str:
    """``job`` as a job spec (:data:`JOB_SPEC`); raises ValueError for anything else (it reaches a shell)."""
    spec = str(job)
    if not JOB_SPEC.fullmatch(spec):
        raise ValueError(f"{spec!r} is not a SLURM job id (J or A_I)")
    return spec


def job_name(host: str, profile: str) -> str:
    """``mtp-remote.<host>.<profile>``: host and profile are inventory/playbook names (no spaces)."""
    return f"{JOB_PREFIX}.{host}.{profile}"


def job_comment(run_id: str, profile: str) -> str:
    """``mtp-remote:run=<run id>:profile=<profile>``: which run submitted the job (checked before any stop)."""
    return f"{JOB_PREFIX}:run={run_id}:profile={profile}"


@dataclass
class SlurmJob:
    """The record of one server job (``<workdir>/slurm-job.json``): the job id and what makes it ours (name,
    comment, the submitting user), where its output goes (``log_path``: the step's stdout and stderr), the
    environment file it reads at start, and the server's port and masked argv. ``node`` is filled once the job
    runs (the compute node, ``squeue %N``); ``submitted`` is epoch seconds. ``step`` is set for a server that is a
    step of an allocation we run in (the nightly's array task, :func:`launch_step`), None for a job of its own;
    ``spec`` then names that allocation as the commands must (``A_I``: :data:`JOB_SPEC`)."""

    job_id: int
    name: str
    comment: str
    user: str
    profile: str
    run_id: str
    port: int
    log_path: str
    env_path: str
    argv_masked: list[str] = field(default_factory=list)
    submitted: float = 0.0
    node: str = ""
    step: int | None = None
    spec: str = ""

    @property
    def job_spec(self) -> str:
        """How the commands name the job: ``spec`` (``A_I`` for a task of an array) or the job id."""
        return self.spec or str(self.job_id)

    @property
    def label(self) -> str:
        return f"job {self.job_spec}" if self.step is None else f"step {self.job_spec}.{self.step}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> SlurmJob | None:
        """The record, or None when ``text`` is not one (a torn or foreign file is never trusted)."""
        try:
            data = json.loads(text)
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except (ValueError, TypeError, KeyError):
            return None


# ---- commands ------------------------------------------------------------------------------------------------

def _pairs(output: str) -> tuple[dict[str, str], list[str]]:
    """``key value`` lines → (the last value per key, all lines stripped)."""
    lines = [line.rstrip("\r") for line in output.splitlines()]
    kv = {}
    for line in lines:
        key, _, value = line.partition(" ")
        kv[key] = value
    return kv, lines


def with_conf(conf: str | None, argv: Sequence[str]) -> str:
    """``[SLURM_CONF=<conf>] argv...``, every word quoted."""
    words = " ".join(shlex.quote(str(a)) for a in argv)
    return f"SLURM_CONF={shlex.quote(conf)} {words}" if conf else words


def _script_value(what: str, value: str) -> str:
    if not _SCRIPT_VALUE.fullmatch(value):
        raise ValueError(f"{what} {value!r} cannot go into a batch script (spaces, quotes or newlines)")
    return value


def sbatch_options(*, name: str, comment: str, output: str, workdir: str, settings: SlurmServing,
                    extra_lines: Sequence[str] = ()) -> list[str]:
    """The ``#SBATCH`` options of a job of ours: identity, output, one node and task, the inventory's settings."""
    opts = [f"--job-name={_script_value('job name', name)}", f"--comment={_script_value('comment', comment)}",
            f"--output={_script_value('log path', output)}", f"--chdir={_script_value('workdir', workdir)}",
            "--nodes=1", "--ntasks=1"]
    for flag, value in (("--partition", settings.partition), ("--account", settings.account),
                        ("--gres", settings.gres), ("--time", settings.time_limit)):
        if value:
            opts.append(f"{flag}={value}")
    if settings.cpus_per_task:
        opts.append(f"--cpus-per-task={settings.cpus_per_task}")
    return [*opts, *extra_lines, *settings.sbatch_lines]


def batch_script(opts: Sequence[str], comment: str, argv: Sequence[str]) -> str:
    lines = ["#!/bin/sh", *(f"#SBATCH {o}" for o in opts), f"# {comment}",
             "exec " + " ".join(shlex.quote(str(w)) for w in argv)]
    return "\n".join(lines) + "\n"


def plan_batch_script(*, name: str, comment: str, log_path: str, workdir: str, settings: SlurmServing,
                      python: str, module: str, argv: Sequence[str], env_path: str,
                      extra_lines: Sequence[str] = ()) -> str:
    """The batch script of one server job (pure). Its one step is the server, with no shell left in between:
    ``exec srun --ntasks=1 <python> -c ENV_LOADER <env_path> <python> -m <module> <argv...>``.

    ``extra_lines``: further ``#SBATCH`` options (before the inventory's ``sbatch_lines``). Raises ValueError
    for a name or path that a ``#SBATCH`` line cannot hold (whitespace, quotes)."""
    opts = sbatch_options(name=name, comment=comment, output=log_path, workdir=workdir, settings=settings,
                           extra_lines=extra_lines)
    step = ["srun", "--ntasks=1", python, "-c", ENV_LOADER, env_path, python, "-m", module, *argv]
    return batch_script(opts, "the server is the job's only step; exec: no shell stays between the scheduler and it",
                   step)


@dataclass(frozen=True)
class SubmitReport:
    """What ``slurm_launch.sh`` said: ``result`` ok | no-workdir | not-private | cannot-write-workdir |
    sbatch-failed | no-result; ``job_id`` (0 unless ok), ``user`` who submitted, ``message`` sbatch's stderr
    (e.g. ``Batch job submission failed: Requested node configuration is not available``)."""

    result: str
    job_id: int = 0
    user: str = ""
    message: str = ""


def parse_submit(output: str) -> SubmitReport:
    """``slurm_launch.sh``'s output → SubmitReport."""
    kv, lines = _pairs(output)
    message = ""
    if "sbatch-begin" in lines and "sbatch-end" in lines:
        a, b = lines.index("sbatch-begin"), lines.index("sbatch-end")
        message = "\n".join(line for line in lines[a + 1:b] if line.strip())
    out = SubmitOutput.model_validate(kv)
    return SubmitReport(result=out.result, job_id=count(out.job) or 0, user=out.user, message=message)


def submit(c, *, workdir: str, env_path: str, conf: str | None, script: str, env: Mapping[str, str]) -> SubmitReport:
    """Hand ``env`` over in ``env_path`` (0600; "" for none) and ``sbatch`` ``script`` on the login node: one round
    trip."""
    stdin = hostscripts.env_file_text(env) + script
    res = hostscripts.run_script(c, "slurm_launch.sh", [workdir, env_path, conf or ""], stdin=stdin)
    return parse_submit(res.stdout)


# ---- facts: where a job is -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class QueueState:
    """One job as ``squeue -h -j J -o '%A|%T|%r|%N'`` lists it (``%A``: the job id, also for a task of an array,
    which ``%i`` names ``ARRAY_INDEX``): its state, the scheduler's reason (``Resources``,
    ``Priority``, ``ReqNodeNotAvail, ...``; ``None`` while it runs) and its node ('' while pending)."""

    job_id: int
    state: str
    reason: str
    node: str

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


def squeue_command(job: int | str, conf: str | None) -> str:
    """The job's queue line; nothing once the job has left the queue (finished, or forgotten)."""
    return with_conf(conf, ["squeue", "-h", "-j", job_spec(job), "-o", "%A|%T|%r|%N"]) + " 2>/dev/null"


def parse_squeue(output: str) -> QueueState | None:
    """The first job line of ``squeue_command``'s output, or None when the job is not in the queue."""
    for line in output.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4 and parts[0].isdigit():
            return QueueState(job_id=int(parts[0]), state=parts[1], reason=parts[2], node=parts[3])
    return None


@dataclass(frozen=True)
class JobInfo:
    """A job as the controller (``scontrol show job -o``) or the accounting (``sacct -P``) knows it.
    ``exit_code``/``exit_signal`` from ``ExitCode=C:S``; ``source`` "scontrol" | "sacct"; ``comment`` and
    ``reason`` are "" from sacct (it keeps neither by default)."""

    job_id: int
    name: str
    user: str
    state: str
    exit_code: int
    exit_signal: int
    node: str
    comment: str = ""
    reason: str = ""
    source: str = "scontrol"


#: ``Key=value`` pairs of ``scontrol -o``: a value runs to the next `` Key=`` (values may hold spaces).
_PAIR = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9/:_]*)=(.*?)(?=\s+[A-Za-z][A-Za-z0-9/:_]*=|\s*$)")


def show_job_command(job: int | str, conf: str | None) -> str:
    """The job's controller record, or (once the controller forgot it: ``MinJobAge``) its accounting line."""
    j = job_spec(job)
    return (with_conf(conf, ["scontrol", "show", "job", "-o", j]) + " 2>/dev/null || "
            + with_conf(conf, ["sacct", "-j", j, "-X", "-n", "-P", "-o",
                               "JobID,JobName,User,State,ExitCode,NodeList"]) + " 2>/dev/null")


def _exit(value: str) -> tuple[int, int]:
    code, _, sig = value.partition(":")
    return (int(code) if code.isdigit() else 0, int(sig) if sig.isdigit() else 0)


def parse_show_job(output: str) -> JobInfo | None:
    """``show_job_command``'s output → JobInfo (the first record), or None when neither source knows the job."""
    for line in output.splitlines():
        line = line.strip()
        if line.startswith("JobId="):
            job = ShowJob.model_validate(dict(_PAIR.findall(line)))
            code, sig = _exit(job.exit_code)
            return JobInfo(job_id=int(job.job_id), name=job.name, user=job.user.split("(")[0], state=job.state,
                           exit_code=code, exit_signal=sig, node="" if job.node == "(null)" else job.node,
                           comment="" if job.comment == "(null)" else job.comment, reason=job.reason)
        parts = line.split("|")
        if len(parts) == 6 and parts[0].split("_")[0].isdigit():
            code, sig = _exit(parts[4])
            return JobInfo(job_id=int(parts[0].split("_")[0]), name=parts[1], user=parts[2],
                           state=parts[3].split()[0] if parts[3] else "", exit_code=code, exit_signal=sig,
                           node="" if parts[5] in ("None assigned", "(null)") else parts[5], source="sacct")
    return None


def get_queue_state(c, job: int | str, conf: str | None) -> QueueState | None:
    return parse_squeue(c.run(squeue_command(job, conf), hide=True, warn=True, in_stream=False).stdout)


def get_job_info(c, job: int | str, conf: str | None) -> JobInfo | None:
    return parse_show_job(c.run(show_job_command(job, conf), hide=True, warn=True, in_stream=False).stdout)


# ---- judgements (pure) ---------------------------------------------------------------------------------------

def check_ours(rec: SlurmJob, info: JobInfo | None) -> str | None:
    """None when ``info`` is the job ``rec`` recorded (same id, name, user, and comment where the source keeps
    one); else why it is not ours — the stop then signals nothing."""
    if info is None:
        return None  # gone: nothing to signal, nothing to refuse
    if info.job_id != rec.job_id:
        return f"job {info.job_id} is not job {rec.job_id}"
    if info.name != rec.name:
        return f"job {rec.job_id} is named {info.name!r}, not {rec.name!r}: not a job of ours"
    if rec.user and info.user != rec.user:
        return f"job {rec.job_id} belongs to {info.user!r}, not {rec.user!r}: never another user's job"
    if info.comment and info.comment != rec.comment:
        return f"job {rec.job_id} carries the comment {info.comment!r}, not {rec.comment!r}: another run's job"
    return None


@dataclass(frozen=True)
class JobEnd:
    """How a job ended, read against whether we stopped it: ``kind`` "stopped" (our stop, whatever state it
    left: a server that exits on SIGTERM by SIGKILLing itself, as SGLang does, leaves FAILED with ExitCode
    137), "crashed" (it ended by itself), "cancelled" (someone else cancelled it), "time-limit", "node-failed",
    "out-of-memory", "preempted", "running" (not ended); ``describe`` one line with the scheduler's words."""

    kind: str
    describe: str


def read_end(info: JobInfo | None, *, stopping: bool) -> JobEnd:
    """Pure: the end of a job from its controller/accounting record, read as the stop it was when ``stopping``."""
    if info is None:
        return JobEnd("stopped" if stopping else "crashed", "the scheduler no longer knows the job")
    state, code = info.state, f"ExitCode {info.exit_code}:{info.exit_signal}"
    said = f"job {info.job_id} {state} ({code})"
    if state in ACTIVE:
        return JobEnd("running", said)
    by_state = {"TIMEOUT": "time-limit", "NODE_FAIL": "node-failed", "OUT_OF_MEMORY": "out-of-memory",
                "PREEMPTED": "preempted", "BOOT_FAIL": "node-failed", "DEADLINE": "time-limit"}
    if state in by_state:
        return JobEnd(by_state[state], said)
    if stopping:
        return JobEnd("stopped", f"{said}: the stop we sent")
    if state.startswith("CANCELLED"):
        return JobEnd("cancelled", f"{said}: cancelled, not by this run")
    return JobEnd("crashed", f"{said}: the server ended by itself")


@dataclass(frozen=True)
class PendingVerdict:
    """A pending job judged against the bound: ``over`` once it waited ``pending_s`` seconds; ``describe`` names
    the scheduler's reason."""

    over: bool
    describe: str


def judge_pending(state: QueueState, waited_s: float, pending_s: float) -> PendingVerdict:
    """Pure: a job still PENDING after ``waited_s`` seconds, against the bound ``pending_s`` (seconds)."""
    said = f"job {state.job_id} pending for {waited_s:.0f} s (scheduler's reason: {state.reason or 'none given'})"
    return PendingVerdict(over=waited_s >= pending_s, describe=said)


# ---- stop ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SlurmStopReport:
    """What ``slurm_stop.sh`` did: ``term``/``kill``/``cancel`` whether each was sent, ``drain_s`` seconds from
    SIGTERM until the step was gone (or the bound), ``gone_s`` seconds until the job left the queue, ``info``
    the job's end record, ``result`` ok | still-listed | no-result."""

    result: str
    term: bool
    kill: bool
    cancel: bool
    drain_s: float
    gone_s: float
    info: JobInfo | None


def parse_stop(output: str) -> SlurmStopReport:
    """``slurm_stop.sh``'s output → SlurmStopReport."""
    kv, lines = _pairs(output)
    out = SlurmStopOutput.model_validate(kv)
    cs = lambda text: (count(text) or 0) / 100  # noqa: E731
    return SlurmStopReport(result=out.result, term="term" in lines, kill="kill" in lines,
                           cancel="cancel" in lines, drain_s=cs(out.drained_cs), gone_s=cs(out.gone_cs),
                           info=parse_show_job(out.end or out.sacct))


def stop_job(c, rec: SlurmJob, conf: str | None, *, drain_s: float, gone_s: float = 30.0) -> SlurmStopReport:
    """SIGTERM to ``rec``'s server step, up to ``drain_s`` seconds for the drain, SIGKILL, then ``scancel`` of the
    job and up to ``gone_s`` seconds until it leaves the queue (a step of an allocation we run in, ``rec.step``
    set: the step alone, the job is left). One round trip; the caller checked it is ours first."""
    step, whole = (rec.step, 0) if rec.step is not None else (0, 1)
    args = [conf or "", job_spec(rec.job_spec), int(drain_s * 100), int(gone_s * 100), rec.env_path, step, whole]
    res = hostscripts.run_script(c, "slurm_stop.sh", args)
    return parse_stop(res.stdout)


def put_file(c, path: str, text: str) -> bool:
    """Write ``text`` to ``path`` on the host (0600, through a temporary file and a rename); False on failure."""
    p = shlex.quote(path)
    r = c.run(f"umask 077; rm -f {p}.tmp.$$; (set -C; cat > {p}.tmp.$$) && mv -f {p}.tmp.$$ {p}", hide=True,
              warn=True, in_stream=hostscripts.WholeStdin(text))
    return r.ok


# ---- the log -------------------------------------------------------------------------------------------------

def poll_command(job: int | str, conf: str | None, log_command: str) -> str:
    """One look at a job: its queue line, ``--log--``, then ``log_command``'s output (the output file's new
    bytes, :func:`mtp_remote.remote.logfile.poll_command`'s encoding)."""
    return f"{squeue_command(job, conf)}; echo --log--; {log_command}"


def steps_command(job: int | str, conf: str | None) -> str:
    """The steps of ``job`` in the queue, one id a line (``J.S``; ``A_I.S`` for a task of an array)."""
    return with_conf(conf, ["squeue", "-h", "-s", "-j", job_spec(job), "-o", "%i"]) + " 2>/dev/null"


def step_listed(output: str, job: int | str, step: int) -> bool:
    """Whether ``steps_command``'s output for ``job`` lists its step ``step``."""
    return f"{job_spec(job)}.{int(step)}" in output.split()


def split_poll(output: str) -> tuple[QueueState | None, str]:
    """``poll_command``'s output → (the queue state or None, the log part after ``--log--``)."""
    head, _, log = output.partition("--log--\n")
    return parse_squeue(head), log


# ---- a server as a step of the allocation we run in -----------------------------------------------------------

@dataclass(frozen=True)
class StepReport:
    """What ``slurm_step.sh`` said: ``result`` ok | no-workdir | not-private | cannot-write-workdir | srun-exited |
    not-listed | no-result; ``step`` the step id (None unless ok); ``log_tail`` the log's last lines after
    srun-exited."""

    result: str
    step: int | None = None
    log_tail: list[str] = field(default_factory=list)


def parse_step(output: str) -> StepReport:
    """``slurm_step.sh``'s output → StepReport."""
    kv, lines = _pairs(output)
    tail: list[str] = []
    if "log-tail-begin" in lines and "log-tail-end" in lines:
        tail = [ln for ln in lines[lines.index("log-tail-begin") + 1:lines.index("log-tail-end")] if ln]
    out = StepOutput.model_validate(kv)
    return StepReport(result=out.result, step=count(out.step), log_tail=tail)


def launch_step(c, *, workdir: str, env_path: str, conf: str | None, job_id: int, spec: str, step_name: str,
                log_path: str, python: str, module: str, argv: Sequence[str], env: Mapping[str, str],
                wait_s: float = 30.0) -> StepReport:
    """Start the server as a step of allocation ``job_id`` (``srun --jobid J --overlap``, detached, no shell
    between the step and the server) and find its step id among the steps of ``spec`` (the allocation as
    squeue names it: ``A_I`` for a task of an array): one round trip, at most ``wait_s`` seconds."""
    args = [workdir, env_path, conf or "", int(job_id), job_spec(spec), step_name, log_path, int(wait_s * 100),
            ENV_LOADER, python, module, *argv]
    res = hostscripts.run_script(c, "slurm_step.sh", args, stdin=hostscripts.env_file_text(env))
    return parse_step(res.stdout)
