"""The ``slurm`` kind: each server is a SLURM job submitted from a login node (or a step of the allocation the tool
runs in, in the nightly's array task).

The host's transport reaches the login node (SSH, or local on the login node itself); its workdir is on the
filesystem the compute nodes share. A launch ``sbatch``es a job whose only step is the server (the batch script
``exec``s ``srun``, the step's first image ``exec``s the server: no shell in between, so the step's SIGTERM is
SGLang's), records the job id with what makes it ours (name, comment, user) in ``<workdir>/slurm-job.json``, and
follows the job's output file by polling the queue and the file in one round trip (``logs="poll"``). A job
still PENDING after ``server.pending_s`` seconds is a launch failure with the scheduler's reason. A stop checks
the job is ours (:func:`mtp_remote.remote.slurm.check_ours`: never another user's, never a recycled id), sends
SIGTERM to the step, waits the drain, SIGKILL, ``scancel``s the job and waits until it has left the queue — the
scheduler has its GPUs back then. Commands and parsers: :mod:`mtp_remote.remote.slurm`.

Where the login node is not the compute node, the server binds ``server.server_host`` and the driver's tunnel
goes through the login node to the job's node (``docs/slurm.md``).
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..config.inventory import HostConfig
from ..errors import LaunchError, StopError
from ..remote import connect as transport
from ..remote import logfile
from ..remote import slurm as sl
from ..remote.commands import BIND_HOST, mask_argv
from .base import Capabilities, Crashed, WaitOutcome
from .process import ProcessServer
from .readiness import Watch

log = logging.getLogger(__name__)

#: A SLURM job: the job id (+ name, comment, user) is its identity, ``scancel --signal=TERM`` its drain; the GPUs
#: are the scheduler's to hand back (the stop waits until the job has left the queue; the memory itself is not
#: read: nvidia-smi on the login node sees another machine); the log is polled from the shared output file.
SLURM = Capabilities(kind="slurm", identity="job", drain=True, gpu_release="none", logs="poll", relaunch=True,
                     launch=True, lock=True, host_view=False)
RECORD = "slurm-job.json"
#: Set by a task of the nightly's job array for its own process (:mod:`mtp_remote.fleet.array_task`): the
#: allocation it runs in, whose steps its servers are, as "JOB_ID SPEC" (its job id, and ``A_I``: how squeue and
#: scancel name a task of an array) — read by :func:`allocation_of`.
ALLOCATION_ENV = "MTP_REMOTE_SLURM_ALLOCATION"


def allocation_of(value: str) -> tuple[int, str] | None:
    """(job id, job spec) from :data:`ALLOCATION_ENV`'s value; None when unset or not that shape."""
    parts = value.split()
    if len(parts) == 2 and parts[0].isdigit() and sl.JOB_SPEC.fullmatch(parts[1]):
        return int(parts[0]), parts[1]
    return None
#: Seconds between two looks at a job (squeue + its output file, one round trip).
POLL_S = 0.25


@dataclass
class SlurmStopResult:
    """Outcome of one stop of a SLURM server. ``found``: "running" | "gone" | "not-ours" | "none";
    ``end`` how the job ended (:func:`mtp_remote.remote.slurm.read_end`), ``drain_s`` seconds from SIGTERM until
    the step was gone, ``killed`` whether SIGKILL was needed, ``gpu_release_s`` seconds until the job left the
    queue (its GPUs back with the scheduler)."""

    job: str
    found: str
    step: int | None = None
    log_path: str | None = None
    end: str = ""
    reason: str = ""
    drain_s: float = 0.0
    killed: bool = False
    gpu_release_s: float = 0.0
    unlocked: bool = False

    @property
    def label(self) -> str:
        return f"job {self.job}" if self.step is None else f"step {self.job}.{self.step}"

    @property
    def ident(self) -> str:
        return self.job if self.step is None else f"{self.job}.{self.step}"

    def describe(self) -> str:
        if self.found == "none":
            return "no server job recorded"
        if self.found == "not-ours":
            return f"{self.label}: not signalled: {self.reason}"
        if self.found == "gone":
            return f"{self.label} had already ended" + (f" ({self.end})" if self.end else "")
        kill = ", then SIGKILL" if self.killed else ""
        return (f"stopped {self.label}: SIGTERM, drained in {self.drain_s:.1f} s{kill}; {self.end}; out of the "
                f"queue {self.gpu_release_s:.1f} s later")


class SlurmServer(ProcessServer):
    """The servers of one run on one ``server: {kind: slurm}`` host (:class:`~.base.ServerKind`). The workdir,
    its lock and the log reads are the process kind's (:class:`~.process.ProcessServer`: the login node is a
    host like any other); launch, the readiness wait, the poll, the tunnel and the stop are the scheduler's.

    ``allocation``: (job id, job spec) of the allocation the tool runs in (the nightly's array task): servers are
    then steps of it (``srun --jobid J --overlap``), and a stop ends the step, never the allocation."""

    capabilities = SLURM

    def __init__(self, c, host: HostConfig, *, python: str, workdir: str, run_id: str,
                 on_progress: Callable[[str], None] | None = None, allocation: tuple[int, str] | None = None):
        super().__init__(c, host, python=python, workdir=workdir, run_id=run_id, on_progress=on_progress)
        self.settings = host.server
        self.conf = self.settings.conf
        self.allocation = allocation
        self.current: sl.SlurmJob | None = None

    # -- the record ----------------------------------------------------------------------------------------

    @property
    def record_path(self) -> str:
        return f"{self.workdir}/{RECORD}"

    def _write_record(self, rec: sl.SlurmJob) -> bool:
        return sl.put_file(self.c, self.record_path, rec.to_json() + "\n")

    def _read_record(self) -> sl.SlurmJob | None:
        r = self.c.run(f"cat {shlex.quote(self.record_path)} 2>/dev/null", hide=True, warn=True, in_stream=False)
        return sl.SlurmJob.from_json(r.stdout) if r.ok and r.stdout.strip() else None

    def _drop_record(self) -> None:
        self.c.run(f"rm -f {shlex.quote(self.record_path)}", hide=True, warn=True, in_stream=False)

    # -- launch ---------------------------------------------------------------------------------------------

    def _server_argv(self, argv: list[str]) -> list[str]:
        """SGLang's argv with ``--host`` set to ``server.server_host`` (the tool's own is 127.0.0.1)."""
        out = list(argv)
        for i, a in enumerate(out[:-1]):
            if a == "--host" and out[i + 1] == BIND_HOST:
                out[i + 1] = self.settings.server_host
        return out

    def launch(self, profile: str, argv: list[str], env: dict[str, str]) -> sl.SlurmJob:
        """Submit the server of ``profile`` (or start it as a step of our allocation) and record it. Raises
        LaunchError with sbatch's message when the scheduler refuses the job (no such partition, more GPUs than a
        node has), or when the record cannot be written (the job just submitted is then cancelled)."""
        argv = self._server_argv(argv)
        rec = sl.SlurmJob(job_id=0, name=sl.job_name(self.host.name, profile), comment=sl.job_comment(self.run_id, profile),
                          user="", profile=profile, run_id=self.run_id, port=self.host.port,
                          log_path=self.log_path(profile), env_path=f"{self.workdir}/.slurm-env.{self.run_id}.{profile}",
                          argv_masked=mask_argv(argv), submitted=time.time())
        module = self.host.engine_module
        if self.allocation is not None:
            self._launch_step(rec, module, argv, env)
        else:
            self._submit(rec, module, argv, env)
        if not self._write_record(rec):
            sl.stop_job(self.c, rec, self.conf, drain_s=0)
            raise LaunchError(f"{profile}: could not write {self.record_path}; {rec.label} was cancelled so none is "
                              f"left untracked", cause="record_write_failed")
        self.current = rec
        self.on_progress(f"{profile}: submitted {rec.label} ({rec.name}), output {rec.log_path}")
        return rec

    def _submit(self, rec: sl.SlurmJob, module: str, argv: list[str], env: dict[str, str]) -> None:
        try:
            script = sl.plan_batch_script(name=rec.name, comment=rec.comment, log_path=rec.log_path,
                                          workdir=self.workdir, settings=self.settings, python=self.python,
                                          module=module, argv=argv, env_path=rec.env_path)
        except ValueError as e:
            raise LaunchError(f"{rec.profile}: {e}", cause="launch_command_failed") from None
        log.info("sbatch on %s: %s", self.host.name, " ".join(shlex.quote(a) for a in rec.argv_masked))
        rep = sl.submit(self.c, workdir=self.workdir, env_path=rec.env_path, conf=self.conf, script=script, env=env)
        if rep.result != "ok":
            raise LaunchError(f"{rec.profile}: the scheduler refused the job ({rep.result}): "
                              f"{rep.message or 'no message'}", cause="slurm_refused", evidence=rep.message)
        rec.job_id, rec.user = rep.job_id, rep.user

    def _launch_step(self, rec: sl.SlurmJob, module: str, argv: list[str], env: dict[str, str]) -> None:
        job_id, spec = self.allocation
        rep = sl.launch_step(self.c, workdir=self.workdir, env_path=rec.env_path, conf=self.conf, job_id=job_id,
                             spec=spec, step_name=rec.name, log_path=rec.log_path, python=self.python,
                             module=module, argv=argv, env=env)
        if rep.result != "ok":
            raise LaunchError(f"{rec.profile}: the server step did not start ({rep.result})",
                              cause="process_exited" if rep.result == "srun-exited" else "slurm_refused",
                              evidence="\n".join(rep.log_tail))
        rec.job_id, rec.spec, rec.step = job_id, spec, rep.step
        rec.user = self._whoami()

    def _whoami(self) -> str:
        return self.c.run("id -un", hide=True, warn=True, in_stream=False).stdout.strip()

    def find_leftover(self) -> sl.SlurmJob | None:
        """This run's server job on this port if it is still in the queue and ours; else None."""
        rec = self._read_record()
        if rec is None or rec.run_id != self.run_id or rec.port != self.host.port:
            return None
        q = sl.get_queue_state(self.c, rec.job_spec, self.conf)
        if q is None or q.state not in sl.ACTIVE:
            return None
        if rec.step is None and sl.check_ours(rec, sl.get_job_info(self.c, rec.job_spec, self.conf)) is not None:
            return None
        self.current = rec
        return rec

    # -- following ------------------------------------------------------------------------------------------

    def follow(self, rec: sl.SlurmJob) -> None:
        """None: a job's output is polled (squeue and the file, one round trip per look)."""

    def _look(self, rec: sl.SlurmJob, offset: int) -> tuple[sl.QueueState | None, logfile.Polled]:
        cmd = sl.poll_command(rec.job_spec, self.conf, logfile.chunk_command(rec.log_path, offset))
        q, encoded = sl.split_poll(self.c.run(cmd, hide=True, warn=True, in_stream=False).stdout)
        alive = self._alive(rec, q)
        return q, logfile.decode_polled(alive, encoded)

    def _alive(self, rec: sl.SlurmJob, q: sl.QueueState | None) -> bool:
        if q is None or q.state not in sl.ACTIVE:
            return False
        if rec.step is None:
            return True
        r = self.c.run(sl.steps_command(rec.job_spec, self.conf), hide=True, warn=True, in_stream=False)
        return sl.step_listed(r.stdout, rec.job_spec, rec.step)

    def poll(self, rec: sl.SlurmJob, offset: int) -> logfile.Polled:
        """(the job runs, its output from byte ``offset``, the bytes that text holds): one round trip."""
        return self._look(rec, offset)[1]

    def wait_ready(self, rec: sl.SlurmJob, *, timeout_s: float, health: Callable[[], bool] | None = None,
                   stream=None) -> WaitOutcome:
        """Poll the job until Ready (the ready line in its output, then ``health()``), Crashed (the job ended, a
        fatal line, or PENDING beyond ``server.pending_s`` with the scheduler's reason) or TimedOut
        (``timeout_s`` seconds after the job started running: time in the queue has its own bound)."""
        t0 = time.monotonic()
        watch: Watch | None = None
        offset, said = 0, ""
        while True:
            q, polled = self._look(rec, offset)
            if q is not None and q.state in ("PENDING", "CONFIGURING", "REQUEUED", "SUSPENDED"):
                v = sl.judge_pending(q, time.monotonic() - t0, self.settings.pending_s)
                if q.reason != said:
                    said = q.reason
                    self.on_progress(f"{rec.profile}: {rec.label} {q.state.lower()} ({q.reason or 'no reason given'})")
                if v.over:
                    return Crashed(profile=rec.profile, elapsed_s=time.monotonic() - t0, cause="slurm_pending",
                                   hint=f"{v.describe}: raise server.pending_s, or choose another partition or "
                                        f"fewer GPUs", log_tail=[])
                time.sleep(POLL_S)
                continue
            if watch is None:
                watch = Watch(self, rec, timeout_s, health)
                if q is not None:
                    rec.node = q.node
                    self.on_progress(f"{rec.profile}: {rec.label} running on {q.node}")
            offset += polled.nbytes
            outcome = watch.step(polled.text, alive=polled.alive)
            if outcome is not None:
                if not polled.alive and outcome.cause == "process_exited":
                    end = sl.read_end(sl.get_job_info(self.c, rec.job_spec, self.conf), stopping=False)
                    outcome.hint = f"{end.describe}; read the log tail"
                return outcome
            time.sleep(POLL_S)

    @contextmanager
    def reach(self) -> Iterator[transport.Tunnel]:
        """The server's port: on the login node's 127.0.0.1 when the server binds loopback (the login node is the
        compute node), else the job's node through the login node (its name resolved there)."""
        target = None
        if self.settings.server_host not in (BIND_HOST, "localhost"):
            target = lambda: (self.current.node if self.current and self.current.node else BIND_HOST)  # noqa: E731
        with transport.open_tunnel(self.c, self.host, target=target) as tun:
            yield tun

    # -- stop -----------------------------------------------------------------------------------------------

    def stop(self, *, term_s: float = 60.0, gpu_release_s: float = 120.0, drain_s: float | None = None,
             unlock: bool = False, drain_name: str = "timeouts.drain_s") -> SlurmStopResult:
        """Stop the server job recorded here, if it is ours: SIGTERM to its step, up to ``min(term_s, drain_s)``
        seconds for the drain, SIGKILL, ``scancel`` of the job, up to ``gpu_release_s`` seconds until it has left
        the queue. A job that is not ours (another name, user or run) is never signalled. Raises StopError when
        the job is still listed after that."""
        res = self._stop(term_s=term_s, gpu_release_s=gpu_release_s, drain_s=drain_s)
        if unlock and res.found != "not-ours":
            self.release_lock()
            res.unlocked = True
        if res.found != "none":
            self.on_progress(res.describe())
        return res

    def _stop(self, *, term_s: float, gpu_release_s: float, drain_s: float | None) -> SlurmStopResult:
        rec = self._read_record()
        if rec is None:
            return SlurmStopResult(job="", found="none")
        base = dict(job=rec.job_spec, step=rec.step, log_path=rec.log_path)
        info = sl.get_job_info(self.c, rec.job_spec, self.conf)
        why = (None if rec.step is not None and self.allocation == (rec.job_id, rec.job_spec)
               else "not the allocation we run in" if rec.step is not None else sl.check_ours(rec, info))
        if why is not None:
            return SlurmStopResult(found="not-ours", reason=why, **base)
        if info is None or info.state not in sl.ACTIVE:
            self._drop_record()
            return SlurmStopResult(found="gone", end=sl.read_end(info, stopping=False).describe, **base)
        drain = min(term_s, drain_s) if drain_s is not None else term_s
        rep = sl.stop_job(self.c, rec, self.conf, drain_s=drain, gone_s=gpu_release_s)
        if rep.result != "ok":
            raise StopError(f"{rec.label} is still in the queue {gpu_release_s:.0f} s after scancel "
                            f"({rep.result}); see `squeue -j {rec.job_spec}`")
        self._drop_record()
        end = sl.read_end(rep.info, stopping=True).describe if rec.step is None else "its step ended"
        return SlurmStopResult(found="running", end=end, drain_s=rep.drain_s, killed=rep.kill,
                               gpu_release_s=rep.gone_s, **base)

    def status(self) -> tuple[sl.SlurmJob | None, str]:
        """(the job recorded here, its state): "none" (nothing recorded), the job's queue state in lower case
        ("running", "pending", ...: it is ours), "not ours" (its id names another job now), "not running"
        (it has left the queue). Read-only: two round trips at most."""
        rec = self._read_record()
        if rec is None:
            return None, "none"
        q = sl.get_queue_state(self.c, rec.job_spec, self.conf)
        if q is None or q.state not in sl.ACTIVE:
            return rec, "not running"
        if rec.step is None and sl.check_ours(rec, sl.get_job_info(self.c, rec.job_spec, self.conf)) is not None:
            return rec, "not ours"
        rec.node = q.node
        return rec, q.state.lower()

    def read_log(self, log_path: str, max_bytes: int = 50 << 20) -> str:
        return logfile.read_log(self.c, log_path, max_bytes)

