"""A real one-node SLURM cluster on 127.0.0.1 (Debian's slurm-wlm: munged, slurmctld, slurmd), for the SLURM tests
and for ``make slurm-up`` / ``make slurm-down``.

Everything lives in one directory (a pytest temp dir, or ``/tmp/mtp-remote-slurm`` for ``make slurm-up``):
``etc/slurm.conf`` and ``etc/gres.conf``, its own munge key and socket (``AuthInfo=socket=...``: the machine's
``/run/munge`` is never used), state and spool directories, the daemons' logs, two fake GPU device files
(``Gres=gpu:2``, ``AutoDetect=off``) and ``daemons.json`` (each daemon's PID, start time and command line).
The daemons listen on 127.0.0.1 only (``CommunicationParameters=NoInAddrAny,NoCtldInAddrAny``: without it both
listen on every address) on ports from :mod:`tests.support.ports`. Processes are tracked by
``proctrack/linuxproc`` (no cgroups in a container) with ``task/none``. Commands reach the cluster through
``SLURM_CONF`` (:attr:`SlurmCluster.env`).

Stopping signals each daemon by PID, and only when its start time and command line are the ones recorded when
it was started (never ``pkill``/``killall``): SIGTERM, then SIGKILL after a bound.

Needs root (slurmd runs jobs as their users) and the packages ``slurmctld slurmd munge slurm-client``
(``make system-deps`` installs them). ``python -m tests.support.slurm up|down|status [--dir DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from tests.support.ports import free_port

#: ``make slurm-up``'s directory: the inventory's ``sim-slurm`` reads ``etc/slurm.conf`` from here.
DEFAULT_DIR = Path("/tmp/mtp-remote-slurm")
CLUSTER, NODE, PARTITION = "mtp", "mtp-node1", "debug"
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scancel", "scontrol", "sinfo")
#: Seconds the daemons get to reach an idle node (a cold start on a loaded 2-core machine takes 2-5 s).
UP_S = 60.0
#: Seconds a daemon gets between SIGTERM and SIGKILL.
STOP_S = 10.0


class SlurmSetupError(RuntimeError):
    """The cluster could not be started (the message names the daemon and its log tail)."""


def missing_binaries() -> list[str]:
    """The SLURM/munge programs not found on PATH or in /usr/sbin (empty: the cluster can start)."""
    return [b for b in BINARIES if not (shutil.which(b) or os.path.exists(f"/usr/sbin/{b}"))]


def _binary(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass
class SlurmCluster:
    """A running cluster: its directory, config file, node, partition and ports."""

    dir: Path
    ctld_port: int
    slurmd_port: int
    node: str = NODE
    partition: str = PARTITION
    gpus: int = 2
    daemons: dict = field(default_factory=dict)  # name -> {"pid", "start", "cmdline"}

    @property
    def conf(self) -> Path:
        return self.dir / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment the SLURM commands need to reach this cluster (added to ``os.environ``)."""
        return {"SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess:
        """Run a SLURM command against this cluster; text output."""
        return subprocess.run(list(argv), env={**os.environ, **self.env}, capture_output=True, text=True,
                              check=check, timeout=timeout)


# ---- configuration ------------------------------------------------------------------------------------------

def write_config(d: Path, ctld_port: int, slurmd_port: int, *, cpus: int | None = None) -> Path:
    """Write the cluster's files under ``d`` (created): slurm.conf, gres.conf, the munge key, the fake GPU device
    files and the state/spool/log directories. Returns the slurm.conf path."""
    d = Path(d)
    for sub in ("etc", "munge", "state", "spool", "log", "dev", "run"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(d / "munge", 0o700)
    key = d / "munge" / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    for i in range(2):  # character devices (slurmd refuses regular files), both /dev/null's numbers: harmless
        dev = d / "dev" / f"gpu{i}"
        if not dev.exists():
            os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    cpus = cpus or os.cpu_count() or 1
    lines = [
        f"ClusterName={CLUSTER}",
        "SlurmctldHost=localhost(127.0.0.1)",
        "SlurmUser=root", "SlurmdUser=root",
        f"SlurmctldPort={ctld_port}", f"SlurmdPort={slurmd_port}",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={d / 'munge' / 'munge.socket'}",
        "CommunicationParameters=NoInAddrAny,NoCtldInAddrAny",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "GresTypes=gpu",
        "MpiDefault=none", "MailProg=/bin/true", "ReturnToService=2", "SwitchType=switch/none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        # a clean stop waits this long between the step's SIGTERM and its SIGKILL (a production admin sets it)
        "KillWait=30", "MinJobAge=600", "InactiveLimit=0", "Waittime=0",
        "SlurmctldTimeout=30", "SlurmdTimeout=60", "MessageTimeout=10",
        "SchedulerType=sched/backfill", "SchedulerParameters=sched_interval=1",
        f"StateSaveLocation={d / 'state'}", f"SlurmdSpoolDir={d / 'spool'}",
        f"SlurmctldPidFile={d / 'run' / 'slurmctld.pid'}", f"SlurmdPidFile={d / 'run' / 'slurmd.pid'}",
        f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={d / 'log' / 'slurmd.log'}",
        "SlurmctldDebug=info", "SlurmdDebug=info",
        f"NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={socket.gethostname()} CPUs={cpus} "
        f"RealMemory=1000 Gres=gpu:2 State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO",
        "",
    ]
    (d / "etc" / "slurm.conf").write_text("\n".join(lines))
    (d / "etc" / "gres.conf").write_text(
        f"AutoDetect=off\nNodeName={NODE} Name=gpu File={d / 'dev'}/gpu[0-1]\n")
    return d / "etc" / "slurm.conf"


# ---- processes ----------------------------------------------------------------------------------------------

def _start_time(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks since boot


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _is_ours(rec: dict) -> bool:
    """The process recorded in ``rec`` still runs and is the one we started (same start time and argv)."""
    pid, start = rec["pid"], rec["start"]
    return start is not None and _start_time(pid) == start and _cmdline(pid) == rec["cmdline"]


def _spawn(argv: list[str], log: Path, env: dict) -> dict:
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    for _ in range(100):  # the child execs: /proc shows the daemon's argv, not python's
        if _cmdline(proc.pid) == argv:
            break
        time.sleep(0.01)
    return {"pid": proc.pid, "start": _start_time(proc.pid), "cmdline": argv, "log": str(log)}


def _tail(path: str | Path, n: int = 15) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _daemons_file(d: Path) -> Path:
    return Path(d) / "daemons.json"


def _wait(what: str, ok: Callable[[], bool], deadline: float, daemons: dict,
          progress: Callable[[str], None]) -> None:
    last = 0.0
    while not ok():
        for name, rec in daemons.items():
            if not _is_ours(rec):
                raise SlurmSetupError(f"{name} exited while waiting for {what}; its log:\n{_tail(rec['log'])}")
        now = time.monotonic()
        if now > deadline:
            logs = "\n".join(f"--- {n}\n{_tail(r['log'])}" for n, r in daemons.items())
            raise SlurmSetupError(f"timed out waiting for {what}\n{logs}")
        if now - last > 5:
            progress(f"waiting for {what}")
            last = now
        time.sleep(0.2)


def _node_state(env: dict) -> str:
    r = subprocess.run([_binary("sinfo"), "-h", "-n", NODE, "-o", "%T"], env=env, capture_output=True, text=True,
                       timeout=15)
    return r.stdout.strip() if r.returncode == 0 else ""


def start(d: Path, *, ctld_port: int | None = None, slurmd_port: int | None = None, up_s: float = UP_S,
          progress: Callable[[str], None] = lambda s: None) -> SlurmCluster:
    """Write the config under ``d`` and start munged, slurmctld and slurmd; return once the node is idle.

    Raises SlurmSetupError (with the daemons' log tails) when a binary is missing, a daemon exits, or the node
    is not idle within ``up_s`` seconds; the daemons already started are stopped first.
    """
    missing = missing_binaries()
    if missing:
        raise SlurmSetupError(f"missing {', '.join(missing)}: apt-get install slurmctld slurmd munge slurm-client")
    if os.geteuid() != 0:
        raise SlurmSetupError("the test cluster runs as root (slurmd starts jobs as their users)")
    d = Path(d)
    if _daemons_file(d).exists():
        stop(d)
    ctld_port, slurmd_port = ctld_port or free_port(), slurmd_port or free_port()
    conf = write_config(d, ctld_port, slurmd_port)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    daemons: dict = {}
    deadline = time.monotonic() + up_s
    try:
        sock = d / "munge" / "munge.socket"
        daemons["munged"] = _spawn(
            [_binary("munged"), "-F", "--force", f"--socket={sock}", f"--key-file={d / 'munge' / 'munge.key'}",
             f"--pid-file={d / 'run' / 'munged.pid'}", f"--seed-file={d / 'munge' / 'munged.seed'}",
             f"--log-file={d / 'log' / 'munged.log'}"], d / "log" / "munged.out", env)
        _save(d, daemons)
        _wait("munged's socket", sock.exists, deadline, daemons, progress)
        daemons["slurmctld"] = _spawn([_binary("slurmctld"), "-D", "-i", "-f", str(conf)],
                                      d / "log" / "slurmctld.out", env)
        _save(d, daemons)
        daemons["slurmd"] = _spawn([_binary("slurmd"), "-D", "-N", NODE, "-f", str(conf)],
                                   d / "log" / "slurmd.out", env)
        _save(d, daemons)
        _wait(f"node {NODE} idle", lambda: _node_state(env) == "idle", deadline, daemons, progress)
    except BaseException:
        stop(d)
        raise
    return SlurmCluster(dir=d, ctld_port=ctld_port, slurmd_port=slurmd_port, daemons=daemons)


def _save(d: Path, daemons: dict) -> None:
    _daemons_file(d).write_text(json.dumps(daemons, indent=1))


def cancel_all(d: Path, *, wait_s: float = 15.0) -> int:
    """Cancel every job of the cluster in ``d`` (all of them are a test's: the cluster is ours) and wait up to
    ``wait_s`` seconds until ``squeue`` lists none. Returns how many jobs were listed."""
    env = {**os.environ, "SLURM_CONF": str(Path(d) / "etc" / "slurm.conf")}
    q = subprocess.run([_binary("squeue"), "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=15)
    jobs = q.stdout.split() if q.returncode == 0 else []
    if jobs:
        subprocess.run([_binary("scancel"), *{j.split("_")[0] for j in jobs}], env=env, capture_output=True,
                       timeout=15)
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            q = subprocess.run([_binary("squeue"), "-h", "-o", "%i"], env=env, capture_output=True, text=True,
                               timeout=15)
            if q.returncode != 0 or not q.stdout.strip():
                break
            time.sleep(0.2)
    return len(jobs)


def stepds(d: Path) -> list[dict]:
    """The ``slurmstepd`` processes of the cluster in ``d``: slurmd forks them with its environment, so theirs
    holds this cluster's ``SLURM_CONF`` (a slurmstepd of another cluster on the machine has another one)."""
    mark = f"SLURM_CONF={Path(d) / 'etc' / 'slurm.conf'}".encode()
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        argv = _cmdline(int(p.name)) or []
        if not argv or not argv[0].startswith("slurmstepd"):
            continue
        try:
            environ = (p / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if mark in environ:
            found.append({"pid": int(p.name), "start": _start_time(int(p.name)), "cmdline": argv})
    return found


def stop(d: Path, *, stop_s: float = STOP_S) -> list[str]:
    """Stop the cluster in ``d``: cancel its jobs, then stop the daemons recorded in ``d/daemons.json``
    (slurmd, slurmctld, then munged) and any ``slurmstepd`` of this cluster still there, each by PID and only
    when it is the process we started (or, for a slurmstepd, one holding this cluster's ``SLURM_CONF``).
    Returns one line per process saying what was done."""
    f = _daemons_file(d)
    if not f.exists():
        return []
    daemons = json.loads(f.read_text())
    said = []
    if all(n in daemons and _is_ours(daemons[n]) for n in ("munged", "slurmctld")):
        n = cancel_all(d)
        if n:
            said.append(f"cancelled {n} job(s)")
    for name in ("slurmd", "slurmctld", "munged"):
        rec = daemons.get(name)
        if rec is None:
            continue
        if not _is_ours(rec):
            said.append(f"{name} (PID {rec['pid']}): not running")
            continue
        said.append(f"{name} (PID {rec['pid']}): {_terminate(rec, stop_s)}")
    for rec in stepds(d):
        said.append(f"{rec['cmdline'][0]} (PID {rec['pid']}): {_terminate(rec, stop_s)}")
    f.unlink()
    return said


def _terminate(rec: dict, stop_s: float) -> str:
    """SIGTERM, then SIGKILL after ``stop_s`` seconds, to the process of ``rec`` while it is that process."""
    os.kill(rec["pid"], signal.SIGTERM)
    end = time.monotonic() + stop_s
    while _is_ours(rec) and time.monotonic() < end:
        _reap(rec["pid"])
        time.sleep(0.05)
    if _is_ours(rec):
        os.kill(rec["pid"], signal.SIGKILL)
        _reap(rec["pid"])
        return "stopped (SIGKILL)"
    return "stopped (SIGTERM)"


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def load(d: Path) -> SlurmCluster | None:
    """The cluster ``start`` left running in ``d`` (None when none is recorded or a daemon is gone)."""
    f = _daemons_file(d)
    if not f.exists():
        return None
    daemons = json.loads(f.read_text())
    if not all(_is_ours(r) for r in daemons.values()):
        return None
    conf = (Path(d) / "etc" / "slurm.conf").read_text()
    port = {k: int(v) for k, v in (ln.split("=", 1) for ln in conf.splitlines() if ln.endswith(tuple("0123456789"))
                                   and ln.split("=", 1)[0] in ("SlurmctldPort", "SlurmdPort"))}
    return SlurmCluster(dir=Path(d), ctld_port=port["SlurmctldPort"], slurmd_port=port["SlurmdPort"],
                        daemons=daemons)


@contextlib.contextmanager
def running_slurm(d: Path, **kw) -> Iterator[SlurmCluster]:
    """Start a cluster in ``d`` for the duration of the block; stop its daemons by PID at the end."""
    cluster = start(d, **kw)
    try:
        yield cluster
    finally:
        stop(d)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.support.slurm", description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"the cluster's directory (default {DEFAULT_DIR})")
    args = p.parse_args(argv)
    say = lambda s: print(f"slurm: {s}", file=sys.stderr, flush=True)  # noqa: E731
    if args.action == "up":
        if load(args.dir) is not None:
            say(f"already running in {args.dir}")
            return 0
        t0 = time.monotonic()
        try:
            cluster = start(args.dir, progress=say)
        except SlurmSetupError as e:
            say(f"could not start: {e}")
            return 1
        say(f"node {cluster.node} idle after {time.monotonic() - t0:.1f} s (slurmctld 127.0.0.1:{cluster.ctld_port},"
            f" slurmd 127.0.0.1:{cluster.slurmd_port}); export SLURM_CONF={cluster.conf}")
        return 0
    if args.action == "down":
        lines = stop(args.dir)
        for line in lines or ["nothing recorded in " + str(args.dir)]:
            say(line)
        return 0
    cluster = load(args.dir)
    say(f"running: SLURM_CONF={cluster.conf}" if cluster else f"not running in {args.dir}")
    return 0 if cluster else 1


if __name__ == "__main__":
    sys.exit(main())
