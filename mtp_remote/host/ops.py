"""Operator operations behind the small tasks: preflight, status, stop, launch, logs, smoke.

Each takes a transport ``c`` and typed config and returns data (``Check`` lists, ``StatusReport``, …); the
entry points render them. They change the host only where their name says so (``stop``, ``launch``), and
then only through the host's kind of server (:func:`~mtp_remote.serving.kinds.open_server`: our process group,
or our SLURM job), never by name.
"""

from __future__ import annotations

import contextlib
import getpass
import math
import shlex
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

from ..analysis.degeneracy import analyze_text
from ..analysis.samples import analysed_text
from ..client import ServerClient
from ..config.inventory import HostConfig
from ..config.playbook import Playbook
from ..errors import ConfigError, LaunchError, MtpRemoteError, RemoteError, TransportLost
from ..serving.kinds import open_server
from ..serving.base import ServerKind, StopReport
from ..interrupts import run_async
from ..remote import connect as transport
from ..remote import facts, hostscripts, process, snapshot
from ..remote.commands import api_key_of, mask_log_secrets, server_argv, server_env
from ..remote.foreign import ForeignProcess, find_foreign, force_targets, unseen_gpu_memory

@dataclass
class StatusReport:
    host: str
    server: dict | None
    server_state: str  # "running" | "not running" | "not ours" | "none"
    port_in_use: bool
    gpus: list[dict] = field(default_factory=list)
    foreign: list[ForeignProcess] = field(default_factory=list)
    gpu_unseen: list[dict] = field(default_factory=list)  # [{"index", "mib"}]: held by processes we cannot see

    def to_dict(self) -> dict:
        d = asdict(self)
        d["foreign"] = [f.to_dict() for f in self.foreign]
        return d


@dataclass
class StopCommandResult:
    """What ``stop`` did on one host (:func:`stop`): our server's stop (``ours``: the server kind's
    :class:`~mtp_remote.serving.base.StopReport`), the foreign processes listed, the PIDs ``--force`` may signal
    (``targets``: they hold this host's GPU memory or its port), those it signalled (``forced``) and those that
    needed SIGKILL (``killed``), and the seconds the GPU memory took to be released (None when nothing waited
    for it)."""

    ours: StopReport
    foreign: list[ForeignProcess] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)
    forced: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    gpu_release_s: float | None = None

    @property
    def ours_text(self) -> str:
        """Our server's stop in words."""
        return self.ours.describe()

    @property
    def left_alone(self) -> int:
        """Foreign processes on this host's GPUs or port that were not signalled."""
        return len(self.targets) - len(self.forced)

    def to_dict(self) -> dict:
        """The JSON object: ``ours`` (its fields) and ``ours_text``, ``foreign`` (their fields), ``targets``,
        ``forced``, ``killed``, ``gpu_release_s``."""
        return {"ours": asdict(self.ours), "ours_text": self.ours_text, "foreign": [f.to_dict() for f in self.foreign],
                "targets": self.targets, "forced": self.forced, "killed": self.killed,
                "gpu_release_s": self.gpu_release_s}


def run_quiet(c, cmd: str):
    """``cmd`` on the host, its output captured, a non-zero exit returned (not raised), no stdin."""
    return c.run(cmd, hide=True, warn=True, in_stream=False)


def py_version_command(python: str, package: str | None) -> str:
    """The command printing ``python``'s version, or ``package``'s installed version for that python."""
    if package is None:
        code = "import sys; print(sys.version.split()[0])"
    else:
        code = f"import importlib.metadata as m; print(m.version({package!r}))"
    return f"{shlex.quote(python)} -c {shlex.quote(code)}"


def lock_owner() -> str:
    """Who holds the host lock when an operator's command takes it: ``user@machine``."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


@contextlib.contextmanager
def locked_server(c, host: HostConfig, python: str, run_id: str = "ops",
                  on_progress: Callable[[str], None] | None = None) -> Iterator[ServerKind]:
    """The host's kind of server (:func:`~mtp_remote.serving.kinds.open_server`), prepared and holding the host
    lock for the block (one ``workdir.sh`` round trip does both); the lock is released after it. Raises
    LockError naming the run that holds the host."""
    lc = open_server(c, host, python=python, run_id=run_id, on_progress=on_progress)
    with held_lock(lc):
        yield lc


def host_workdir(c, host: HostConfig) -> hostscripts.WorkdirReport:
    """Where we work on the host, found without creating anything (``workdir.sh read``: ``~`` resolved, our
    ``uid-UID`` subdirectory of a shared workdir); ``result`` is "missing" when nothing is there yet. Raises
    RemoteError when it is there but is not a directory of ours that only we can write."""
    rep = hostscripts.read_workdir(c, host.workdir)
    if rep.result not in ("ok", "missing"):
        raise RemoteError(f"workdir {rep.path or host.workdir} on {host.name} cannot be trusted "
                          f"({rep.detail or rep.result}); nothing was read from it", host=host.name)
    return rep


def remote_workdir(c, host: HostConfig) -> str:
    """The directory we work in on the host (:func:`host_workdir`'s path; it may not exist yet)."""
    return host_workdir(c, host).path


@contextlib.contextmanager
def held_lock(lc: ServerKind):
    """Hold the host lock while an operation changes the host (a diagnose run may be using it): ``lc.prepare``
    with a lock owner finds the workdir and takes the lock in one step."""
    lc.prepare(lock_owner=lock_owner())
    try:
        yield
    finally:
        lc.release_lock()


@contextlib.contextmanager
def smoke_lock(c, host: HostConfig, python: str):
    """The host lock for the length of a ``smoke``: a request sent while a diagnose samples our server would
    join that experiment (its speeds) and, in flight when the run stops the server, hold the stop in SGLang's
    endless drain for ``timeouts.drain_s``. Raises LockError naming the run that holds the host."""
    with locked_server(c, host, python, run_id="smoke"):
        yield


def foreign_processes(c, host: HostConfig, python: str, workdir: str, our_pgid: int | None,
                      our_children: list[list[int]] | None = None) -> list[ForeignProcess]:
    """SGLang processes (by parsed argv), GPU users and the owner of our port that are not in our process
    group nor among our recorded children."""
    smi = facts.nvidia_smi(host, python, workdir)
    apps = facts.apps_on_gpus(facts.get_gpu_apps(c, smi), facts.get_gpus(c, smi), host.gpus)
    return find_foreign(facts.get_processes(c), apps, our_pgid=our_pgid,
                        port_owners=facts.get_port_owners(c, host.port), our_children=our_children)


def host_sections(host: HostConfig, python: str, workdir: str) -> dict[str, str]:
    """The fact commands ``status`` and ``preflight`` share (one snapshot section each; ``workdir`` as the
    snapshot sees it, :func:`~mtp_remote.remote.snapshot.home_relative`)."""
    smi = facts.nvidia_smi(host, python, workdir)
    return {"record": process.read_record_command(workdir),
            "proc": snapshot.record_process_command(workdir),
            "tcp": facts.listening_ports_command(),
            "gpus": facts.gpus_command(smi),
            "apps": facts.gpu_apps_command(smi),
            "procs": facts.processes_command(),
            "owners": facts.port_owner_command(host.port)}


@dataclass
class HostFacts:
    """The parsed shared sections of a snapshot (:func:`host_sections`): our record and its process, the
    listening TCP ports, GPUs, GPU apps, processes and the port's owners."""

    record: process.ServerRecord | None
    proc: facts.ProcessInfo | None
    tcp_ports: set  # TCP ports in LISTEN state
    gpus: list
    apps: list
    procs: list
    owners: set
    gpus_hung: bool = False  # nvidia-smi did not answer within its bound (facts.SMI_TIMEOUT_S)

    @classmethod
    def parse(cls, snap: dict[str, snapshot.Section]) -> HostFacts:
        def out(name: str, ok_only: bool = False) -> str:
            sec = snap.get(name)
            return "" if sec is None or (ok_only and sec.exited != 0) else sec.stdout

        return cls(record=process.parse_record(out("record")), proc=facts.parse_process_info(out("proc")),
                   tcp_ports=facts.parse_listening_ports(out("tcp")), gpus=facts.parse_gpus(out("gpus", True)),
                   apps=facts.parse_gpu_apps(out("apps", True)), procs=facts.parse_processes(out("procs")),
                   owners=facts.parse_port_owners(out("owners")),
                   gpus_hung=getattr(snap.get("gpus"), "exited", 0) in facts.HUNG_EXITS)

    def foreign(self, host: HostConfig, our_pgid: int | None,
                our_children: list[list[int]] | None = None) -> list[ForeignProcess]:
        """:func:`foreign_processes` on these facts."""
        apps = facts.apps_on_gpus(self.apps, self.gpus, host.gpus)
        return find_foreign(self.procs, apps, our_pgid=our_pgid, port_owners=self.owners, our_children=our_children)

    def unseen(self, host: HostConfig) -> list[dict]:
        """Memory on the host's GPUs that no process visible here holds (:func:`unseen_gpu_memory`)."""
        return unseen_gpu_memory(self.gpus, self.apps, {p.pid for p in self.procs}, host.gpus)


def status(c, host: HostConfig, python: str) -> StatusReport:
    """Our server as the host's kind of server records it (:meth:`~mtp_remote.serving.base.ServerKind.status`:
    a process, a container, a SLURM job) and its state; where the host we reach is where the server runs
    (``capabilities.host_view``), also the port, GPUs and foreign SGLang processes (a SLURM login node's are not
    the job's). Read-only."""
    kind = open_server(c, host, python=python, run_id="ops")
    kind.workdir = remote_workdir(c, host)
    rec, state = kind.status()
    server = asdict(rec) if rec is not None else None
    if not kind.capabilities.host_view:
        return StatusReport(host=host.name, server=server, server_state=state, port_in_use=False)
    hf = HostFacts.parse(snapshot.run_snapshot(c, host_sections(host, python,
                                                               snapshot.home_relative(host.workdir))))
    ours = state == "running"
    return StatusReport(host=host.name, server=server, server_state=state,
                        port_in_use=host.port in hf.tcp_ports, gpus=[asdict(g) for g in hf.gpus],
                        foreign=hf.foreign(host, getattr(rec, "pgid", None) if ours else None,
                                           getattr(rec, "children", None)),
                        gpu_unseen=hf.unseen(host))


#: Seconds ``stop`` gives a SIGTERM before SIGKILL by default: a run's ``timeouts.drain_s`` (30). Longer only
#: waits: SGLang's drain with a request in flight never ends (its scheduler died with the SIGTERM).
STOP_TERM_S = 30.0


def stop_again(host: HostConfig, inventory=None) -> str:
    """The stop to run by hand, as the operator's command named the inventory (``inventory``: the ``-i`` it was
    given, else None): `` `mtp-remote stop -H H -i INV` (or `fab -H H stop --inventory INV`)``."""
    h = shlex.quote(host.name)
    inv = shlex.quote(str(inventory)) if inventory else None
    return (f"`mtp-remote stop -H {h}{f' -i {inv}' if inv else ''}` "
            f"(or `fab -H {h} stop{f' --inventory {inv}' if inv else ''}`)")


def stop(c, host: HostConfig, python: str, *, force: bool = False, term_s: float = STOP_TERM_S,
         gpu_release_s: float = 120.0, on_progress: Callable[[str], None] | None = None,
         inventory=None) -> StopCommandResult:
    """Stop our server; with ``force`` also the foreign processes that hold this host's GPU memory or its
    port (:func:`force_targets`), each by PID after listing them. Other SGLang-like processes are listed and
    left alone. ``term_s``: seconds after SIGTERM before SIGKILL (``--term-timeout``; the kill reason names it).
    ``inventory``: the ``-i`` the command was given (a printed stop command names it)."""
    where = host_workdir(c, host)
    lc = open_server(c, host, python=python, run_id="ops", on_progress=on_progress)
    lc.workdir = workdir = where.path
    if where.result == "missing":  # nothing of ours can run there, and a stop creates nothing
        res = process.StopResult(pid=0, found="none")
    else:
        res = _stop_riding_out(c, host, lc, term_s=term_s, gpu_release_s=gpu_release_s, inventory=inventory)
    if not lc.capabilities.host_view:  # a SLURM login node's processes are not the job's: nothing to list or force
        return StopCommandResult(res, gpu_release_s=res.gpu_release_s)
    foreign = foreign_processes(c, host, python, workdir, None)
    targets = force_targets(foreign, host.port)
    out = StopCommandResult(res, foreign, targets=[f.pid for f in targets])
    if force and targets:
        if on_progress:
            for f in targets:
                on_progress(f"--force: signalling {f.describe()}")
        out.killed = process.signal_pids(c, [(f.pid, f.start_ticks) for f in targets], term_s=min(term_s, 30.0))
        out.forced = list(out.targets)
        out.gpu_release_s, _ = process.wait_gpu_release(c, facts.nvidia_smi(host, python, workdir), set(out.forced),
                                                        gpu_release_s, on_progress)
    return out


def _stop_riding_out(c, host: HostConfig, lc: ServerKind, *, term_s: float,
                     gpu_release_s: float, inventory=None) -> process.StopResult:
    """``lc.stop`` under the host lock; a stop cut by a dropped SSH connection runs once more on the re-opened
    connection (it reads the record again). When the host cannot be reached, the TransportLost says that the
    record is kept and to run ``stop`` again."""
    for attempt in (1, 2):
        try:
            with held_lock(lc):
                return lc.stop(term_s=term_s, drain_s=term_s, drain_name="--term-timeout",
                               gpu_release_s=gpu_release_s)
        except TransportLost as e:
            if attempt == 2 or transport.is_lost(c):
                raise e.in_run(f"; the stop did not finish: the server record is kept on {host.name} (nothing was "
                               f"dropped), so run the stop again once the host can be reached: "
                               f"{stop_again(host, inventory)}") from e
    raise AssertionError("unreachable")


def launch(c, host: HostConfig, playbook: Playbook, profile: str, python: str, *, run_id: str,
           on_progress: Callable[[str], None] | None = None, inventory=None):
    """Stop our previous server, launch ``profile`` and wait until its log says ready; leave it running.
    Returns the wait outcome (Ready / Crashed / TimedOut); a crashed server is stopped again. ``inventory``: the
    ``-i`` the command was given (the stop it prints when a stop fails names it)."""
    if profile not in playbook.profiles:
        raise MtpRemoteError(f"unknown profile {profile!r}; choose one of: {', '.join(playbook.profile_order())}")
    if profile in playbook.attached:  # someone else serves it: never launched by us
        raise MtpRemoteError(f"profile {profile!r} is an attached endpoint ({playbook.attached[profile].where}): "
                             f"it is never launched by mtp-remote; choose a launched one")
    with locked_server(c, host, python, run_id=run_id, on_progress=on_progress) as lc:
        lc.stop(term_s=playbook.timeouts.term_s, drain_s=playbook.timeouts.drain_s,
                gpu_release_s=playbook.timeouts.gpu_release_s)
        rec = None
        try:
            rec = lc.launch(profile, server_argv(host, playbook, profile),
                            server_env(host, playbook, profile, lc.workdir))
            outcome = lc.wait_ready(rec, timeout_s=playbook.timeouts.ready_s)
        except LaunchError:  # nothing left running: launch.sh stops a server it could not record
            raise
        except BaseException as e:  # Ctrl-C / SIGTERM / a lost connection while launching or waiting (the stop
            # reads the host's record: a server started by a launch cut before it returned is stopped too)
            _stop_after_interrupt(lc, host, playbook, rec, e, on_progress, profile=profile, inventory=inventory)
            raise
        if not outcome.ok:
            lc.stop(term_s=playbook.timeouts.term_s, drain_s=playbook.timeouts.drain_s,
                    gpu_release_s=playbook.timeouts.gpu_release_s)
    return outcome


def _stop_after_interrupt(lc: ServerKind, host: HostConfig, playbook: Playbook, rec, exc: BaseException,
                          on_progress: Callable[[str], None] | None, *, profile: str, inventory=None) -> None:
    """Stop the server ``launch`` started when launching or waiting for it was interrupted (``rec`` is None
    when the launch step had not returned: the host's record names the server); if that fails too, say that it
    may be left running and how to stop it."""
    say = on_progress or (lambda msg: None)
    why = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}"
    which = rec.label if rec is not None else "if it started"
    say(f"{why} while {'waiting for' if rec is not None else 'launching'} {profile}"
        f"{' to be ready' if rec is not None else ''}: stopping the server we started ({which})")
    try:
        lc.stop(term_s=min(playbook.timeouts.term_s, 30.0), gpu_release_s=playbook.timeouts.gpu_release_s)
    except BaseException:
        say(f"the server {which} may be LEFT RUNNING on {host.name}; stop it with {stop_again(host, inventory)}")
        raise


def current_log(c, host: HostConfig) -> tuple[str, int | None]:
    """(log path, PID) of our running server; else (newest log in the workdir, None). Raises
    MtpRemoteError when there is no log at all."""
    workdir = remote_workdir(c, host)
    kind = open_server(c, host, python="python3", run_id="ops")
    kind.workdir = workdir
    rec, state = kind.status()
    if rec is not None and kind.capabilities.identity == "container" and state == "running":
        raise MtpRemoteError(f"{rec.label} is running on {host.name}: {rec.runtime} keeps its log until the stop "
                             f"saves it to {rec.log_path}; follow it on the host with `{rec.runtime} logs -f "
                             f"{rec.container_id}`")
    if rec is not None and rec.log_path:  # a PID to follow only where the server is a process we see
        pid = getattr(rec, "pid", None) if kind.capabilities.identity == "pid" and state == "running" else None
        return rec.log_path, pid
    r = run_quiet(c, f"ls -1t {shlex.quote(workdir)}/logs/*/*.log 2>/dev/null | head -n 1")
    path = r.stdout.strip()
    if not path:
        raise MtpRemoteError(f"no server log on {host.name} under {workdir}/logs")
    return path, None


def server_alive(c, pid: int | None) -> bool:
    info = facts.get_process_info(c, pid) if pid else None
    return info is not None and info.alive


def follow_log(c, path: str, *, lines: int = 50, poll_s: float = 0.5,
               until: Callable[[], bool] | None = None) -> Iterator[str]:
    """Yield the last ``lines`` lines of ``path``, then new text as it is written (polled from a byte offset)
    until ``until()`` is true (or forever; stop with Ctrl-C)."""
    r = run_quiet(c, f"tail -n {int(lines)} {shlex.quote(path)}; echo; stat -c %s {shlex.quote(path)}")
    body, _, size = r.stdout.rstrip("\n").rpartition("\n")
    yield mask_log_secrets(body)
    offset = int(size) if size.strip().isdigit() else 0
    while until is None or not until():
        time.sleep(poll_s)
        new = run_quiet(c, f"tail -c +{offset + 1} {shlex.quote(path)} | head -c 1048576").stdout
        if new:
            offset += len(new.encode())
            yield mask_log_secrets(new)


def running_api_key(c, host: HostConfig, playbook: Playbook) -> str | None:
    """The API key of the profile our server runs (from server.json's profile and the playbook's flags)."""
    rec = process.read_record(c, remote_workdir(c, host))
    if rec is not None and rec.profile in playbook.profiles:
        return api_key_of(server_argv(host, playbook, rec.profile))
    return api_key_of(playbook.base_flags)


def smoke(base_url: str, playbook: Playbook, *, prompt: str | None = None, temperature: float = 0.7,
          max_tokens: int | None = None, api_key: str | None = None,
          launch_hint: str = "`mtp-remote launch --profile NAME` (or `fab launch --profile NAME`)") -> dict:
    """One request to a running server, its degeneracy metrics and a quick verdict ("ok" or "loops").
    ``temperature`` must be finite and >= 0. ``launch_hint``: the command the error names when no server of ours
    is healthy (the entry point's, with the host and inventory it was given)."""
    if not math.isfinite(temperature) or temperature < 0:
        raise ConfigError(f"temperature must be a finite number >= 0, not {temperature}", field="--temperature")

    text = prompt or playbook.prompts[0].user_text
    mt = max_tokens or playbook.max_tokens

    async def go():
        async with ServerClient(base_url, timeout_s=playbook.timeouts.request_s, api_key=api_key) as sc:
            if await sc.health() != 200:
                raise MtpRemoteError(f"no healthy server of ours is running; start one with {launch_hint}")
            if playbook.api == "generate":
                return await sc.generate(playbook.prompt_template.replace("{prompt}", text),
                                         temperature=temperature, max_new_tokens=mt, seed=playbook.seed)
            return await sc.chat(text, temperature=temperature, max_tokens=mt, seed=playbook.seed)

    comp = run_async(go())
    if comp.error:
        raise MtpRemoteError(f"smoke request failed: {comp.error}")
    m = analyze_text(analysed_text(comp.text, playbook.think_opened_by_prompt), comp.output_ids)
    accept = comp.completion_tokens / comp.spec_verify_ct if comp.spec_verify_ct else None
    return {"prompt": text, "temperature": temperature, "verdict": "loops" if m.is_loop else "ok",
            "finish_reason": comp.finish_reason, "completion_tokens": comp.completion_tokens,
            "latency_s": round(comp.latency_s, 3), "accept_length": round(accept, 3) if accept else None, "metrics": m.to_dict(),
            "text": comp.text, "text_tail": comp.text[-400:]}

