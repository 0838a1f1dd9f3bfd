"""The ``container`` kind: each profile's server is its own container from an image (``podman|docker run -d``).

The image is part of the profile (``image`` in the playbook, else the host's ``server.image``), so one run can
compare two SGLang releases or two images. A launch is one host-side step (``container.sh launch``): the port
checked, the GPUs' memory level recorded, the environment passed in a 0600 ``--env-file`` removed once the
container runs, ``run -d`` with our name (``mtp-<host>-<run>-<profile>``) and labels (``mtp-remote=<run id>``,
host, profile, port), the host network (the port on the host's 127.0.0.1, reached through the SSH tunnel as for
a process) and the host's GPUs when it has NVIDIA devices; the record is the container id
(``server.container`` in the workdir). The log is followed with ``logs -f``; a stop (``container.sh stop``)
stops only the recorded container and only while it carries our label: ``stop -t DRAIN`` (SIGTERM, SGLang's
drain, SIGKILL after DRAIN), the log saved, ``rm``, then the GPU wait (its host PIDs as listed before the stop,
and each GPU's level before the launch). The workdir and the host lock are the process kind's.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ..config.inventory import HostConfig
from ..errors import LaunchError, RemoteError, StopError
from ..remote import hostscripts, logfile, process
from ..remote.commands import mask_argv
from ..remote.containers import LABEL, container_name, gpu_args, sim_mounts
from ..remote.follow import LogStream
from .base import Capabilities, WaitOutcome
from .process import ProcessServer

log = logging.getLogger(__name__)

#: A container per server: identity by container id (and our label), ``stop -t`` drains, GPU release by memory
#: level beside the container's host PIDs, the log followed with ``logs -f``.
CONTAINER = Capabilities(kind="container", identity="container", drain=True, gpu_release="memory", logs="stream",
                         relaunch=True, launch=True, lock=True, host_view=True)
RECORD = "server.container"


@dataclass
class ContainerRecord:
    """A server we started as a container: its id (64 hex digits), name and image, and the run's fields."""

    container_id: str
    name: str
    image: str
    runtime: str
    profile: str
    port: int
    log_path: str
    run_id: str
    started_at: float  # epoch seconds, the driver's clock
    argv_masked: list[str] = field(default_factory=list)

    @property
    def ident(self) -> str:
        return self.container_id[:12]

    @property
    def label(self) -> str:
        return f"container {self.container_id[:12]} ({self.name}, {self.image})"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ContainerStop(process.StopResult):
    """A stop of a container: :class:`~mtp_remote.remote.process.StopResult` plus the container's id and exit
    code (0: the server exited by itself after its drain; 137: killed)."""

    container_id: str = ""
    exit_code: int | None = None

    @property
    def ident(self) -> str:
        return self.container_id[:12]

    @property
    def label(self) -> str:
        return f"container {self.container_id[:12]}"

    def _describe(self) -> str:
        if self.found in ("running", "gone") and self.container_id:
            held = max(self.gpu_mib_held, self.gpu_level_mib)
            how = (" (held by processes this host cannot see: waited until the GPUs were back to their level "
                   "before the launch)" if self.gpu_release_by == "level" else "")
            what = (f"stopped container {self.ident} with {'+'.join(self.signals) or 'no signal'} in "
                    f"{self.exit_s:.1f} s (exit {self.exit_code})" if self.found == "running" else
                    f"container {self.ident} had already exited")
            return f"{what}, removed; GPU memory ({held} MiB) released after {self.gpu_release_s:.1f} s{how}"
        return super()._describe()


def env_file_text(env: dict[str, str]) -> str:
    """The server's environment as a ``--env-file`` (``NAME=value`` lines). Raises ValueError for a value no env
    file can hold (a newline or NUL) and for a name that is not a shell name."""
    hostscripts.env_file_text(env)  # the same name/NUL checks as the process kind's
    for k, v in env.items():
        if "\n" in v or "\r" in v:
            raise ValueError(f"environment variable {k!r} holds a line break: a container's env file cannot pass it")
    return "".join(f"{k}={v}\n" for k, v in env.items())


class ContainerServer(ProcessServer):
    """The servers of one run on one host, each its own container (:class:`~.base.ServerKind`). ``images``:
    profile -> image for the profiles that name their own (the playbook's ``image``)."""

    capabilities = CONTAINER

    def __init__(self, c, host: HostConfig, *, python: str, workdir: str, run_id: str,
                 on_progress: Callable[[str], None] | None = None, images: dict[str, str] | None = None):
        super().__init__(c, host, python=python, workdir=workdir, run_id=run_id, on_progress=on_progress)
        self.spec = host.server
        self.images = dict(images or {})

    def image_of(self, profile: str) -> str:
        """The image ``profile`` runs from (its own, else the host's ``server.image``)."""
        return self.images.get(profile) or self.spec.image

    def _python_in_image(self) -> str:
        return self.python if self.host.is_sim else self.spec.python

    def run_argv(self, profile: str, argv: list[str]) -> list[str]:
        """``RUNTIME run -d`` with our name, labels, the host network, the run arguments and mounts (a sim host: the
        simulated engine from this machine, read-only), the image and the server's command line. Pure."""
        rt, host = self.spec.runtime, self.host
        py = self._python_in_image()
        labels = {LABEL: self.run_id, f"{LABEL}.host": host.name, f"{LABEL}.profile": profile,
                  f"{LABEL}.port": str(host.port)}
        out = [rt, "run", "-d", "--name", container_name(host.name, self.run_id, profile), "--network", "host"]
        for k, v in labels.items():
            out += ["--label", f"{k}={v}"]
        if host.is_sim and host.transport == "local":  # the sim from this machine; its GPU state in the workdir
            out += [*sim_mounts(), "-v", f"{self.workdir}:{self.workdir}"]
        return [*out, *self.spec.run_args, self.image_of(profile), py, *host.entry_words(py), *argv]

    # -- launch ---------------------------------------------------------------------------------------------

    def launch(self, profile: str, argv: list[str], env: dict[str, str]) -> ContainerRecord:
        """Start ``profile``'s container and record its id — one host-side step (``container.sh launch``). Raises
        LaunchError when the port is busy, the record cannot be written or the runtime refuses the run (its
        output as evidence)."""
        image = self.image_of(profile)
        log_path = self.log_path(profile)
        run = self.run_argv(profile, argv)
        smi = shlex.split(self.smi) if self.smi else []
        gpus = " ".join(str(i) for i in self.host.gpus) if self.host.gpus else "-"
        gargs = gpu_args(self.spec.runtime, self.host.gpus)
        try:
            stdin = env_file_text(env)
        except ValueError as e:
            raise LaunchError(f"{profile}: {e}", cause="bad_environment") from None
        args = ["launch", self.workdir, log_path, self.host.port, gpus, len(smi), *smi, len(gargs), *gargs, *run]
        log.info("launch on %s: %s", self.host.name, " ".join(shlex.quote(a) for a in mask_argv(run)))
        r = hostscripts.run_script(self.c, "container.sh", args, stdin=stdin)
        kv = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
        result = kv.get("result", "no-result")
        if result == "port-in-use":
            raise LaunchError(f"port {self.host.port} on {self.host.name} is already in use; a server we did not "
                              f"start may be running (see `mtp-remote status`)", cause="port_in_use")
        if result != "ok":
            lines = r.stdout.splitlines()
            out = lines[lines.index("output-begin") + 1:lines.index("output-end")] if "output-end" in lines else []
            raise LaunchError(f"{profile}: {self.spec.runtime} could not start a container of {image} "
                              f"({result})", cause="container_run_failed",
                              evidence="\n".join(out) or r.stderr[-2000:])
        rec = ContainerRecord(container_id=kv["cid"], name=container_name(self.host.name, self.run_id, profile),
                              image=image, runtime=self.spec.runtime, profile=profile, port=self.host.port,
                              log_path=log_path, run_id=self.run_id, started_at=time.time(),
                              argv_masked=mask_argv(argv))
        self.on_progress(f"{profile}: launched {rec.label}, log {log_path}")
        return rec

    def find_leftover(self) -> ContainerRecord | None:
        """Never adopted: a container of an earlier attempt is stopped (by its record) before the first launch."""
        return None

    # -- following --------------------------------------------------------------------------------------------

    def follow(self, rec: ContainerRecord) -> LogStream:
        """``logs -f`` of the container for its whole life (it ends when the container stops)."""
        script = shlex.quote('echo $$; exec "$0" logs -f "$1" 2>&1')
        cmd = f"sh -c {script} {shlex.quote(rec.runtime)} {shlex.quote(rec.container_id)}"
        return LogStream(self.c, rec.log_path, 0, workdir=self.workdir, start_ticks=0, command=cmd)

    def _ready(self, rec, outcome: WaitOutcome, *, stream) -> WaitOutcome:
        return outcome  # no children to record: the container holds them all

    def poll(self, rec: ContainerRecord, offset: int) -> logfile.Polled:
        """(container running, its log from byte ``offset``) in one round trip."""
        rt, cid = shlex.quote(rec.runtime), shlex.quote(rec.container_id)
        cmd = (f"{rt} inspect --format '{{{{.State.Running}}}}' {cid} 2>/dev/null; echo --log--; "
               f"{rt} logs {cid} 2>&1 | tail -c +{int(offset) + 1} | head -c {logfile.CHUNK} | {logfile.ENCODE}")
        out = self.c.run(cmd, hide=True, warn=True, in_stream=False).stdout
        head, _, encoded = out.partition("--log--\n")
        return logfile.decode_polled(head.strip() == "true", encoded)

    # -- status -----------------------------------------------------------------------------------------------

    def status(self) -> tuple[ContainerRecord | None, str]:
        """(the container recorded in the workdir, its state): "none", "running" (running and carrying our
        label), "not running" (stopped or removed) or "not ours" (no mtp-remote label). Read-only: one round
        trip. The record holds id, name, runtime and log path (``container.sh launch``); the rest of the
        returned record is what the container's labels say, or empty."""
        wd = shlex.quote(self.workdir)
        fmt = shlex.quote('{{.State.Running}} {{index .Config.Labels "%s"}} {{index .Config.Labels "%s.profile"}} '
                          '{{.Config.Image}}' % (LABEL, LABEL))
        script = (f'f={wd}/{RECORD}; [ -f "$f" ] || exit 0; cat "$f"; '
                  f'rt=$(sed -n "s/^runtime //p" "$f" | head -n 1); cid=$(sed -n "s/^id //p" "$f" | head -n 1); '
                  f'case $rt in podman|docker) ;; *) exit 0 ;; esac; case $cid in *[!0-9a-f]*|"") exit 0 ;; esac; '
                  f'printf "state "; "$rt" inspect --format {fmt} "$cid" 2>/dev/null || echo gone')
        out = self.c.run(script, hide=True, warn=True, in_stream=False).stdout
        kv = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        if not kv.get("id") or kv.get("runtime") not in ("podman", "docker"):
            return None, "none"
        running, run_id, profile, image = (kv.get("state", "gone").split(" ") + ["", "", ""])[:4]
        rec = ContainerRecord(container_id=kv["id"], name=kv.get("name", ""), image=image, runtime=kv["runtime"],
                              profile=profile if profile != "<no value>" else "", port=self.host.port,
                              log_path=kv.get("log", ""), run_id=run_id if run_id != "<no value>" else "",
                              started_at=0.0)
        if running == "gone":
            return rec, "not running"
        if not rec.run_id:
            return rec, "not ours"
        return rec, "running" if running == "true" else "not running"

    # -- stop -------------------------------------------------------------------------------------------------

    def stop(self, *, term_s: float = 60.0, gpu_release_s: float = 120.0, drain_s: float | None = None,
             unlock: bool = False, drain_name: str = "timeouts.drain_s") -> ContainerStop:
        """Stop the container recorded in the workdir, if it is ours (``container.sh stop``): ``stop -t
        min(term_s, drain_s)``, log saved, ``rm``, GPU wait. Raises StopError when the container cannot be
        removed or the GPU memory is not released (the record is kept)."""
        bound = min(term_s, drain_s) if drain_s is not None else term_s
        smi = shlex.split(self.smi) if self.smi else []
        r = hostscripts.run_script(self.c, "container.sh", ["stop", self.workdir, max(1, round(bound)),
                                                            int(gpu_release_s), self.run_id if unlock else "-", *smi],
                                   on_progress=self.on_progress)
        rep = hostscripts.parse_stop(r.stdout)
        kv = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
        code = kv.get("exit_code", "")
        res = ContainerStop(pid=0, found=rep.found if rep.found != "unreadable" else "none", signals=rep.signals,
                            exit_s=rep.exit_s, gpu_release_s=rep.gpu_release_s, gpu_mib_held=rep.gpu_mib_held,
                            gpu_level_mib=rep.gpu_level_mib, gpu_release_by=rep.gpu_release_by,
                            log_path=None, reason=rep.refused or rep.reason, unlocked=rep.unlocked,
                            container_id=kv.get("container", ""), exit_code=int(code) if code.isdigit() else None)
        if "KILL" in rep.signals:
            res.kill_reason = (f"the drain did not finish within {bound:.0f} s ({drain_name}); the runtime sent "
                               f"SIGKILL")
        if rep.error:
            raise StopError(rep.error, evidence="check with podman/docker ps and nvidia-smi; the record is kept, run "
                                                "stop again")
        if r.exited != 0 and not rep.found:
            raise RemoteError("container stop script failed", command="container.sh stop", exit_code=r.exited,
                              output=r.stderr)
        if res.found != "none":
            self.on_progress(res.describe())
        return res

