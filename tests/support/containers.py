"""A local container runtime for the tests and the shipped container hosts (`make container-up/-down`).

No image registry is reachable from the test machines, so the image is built here: a minimal root filesystem
(directories, merged-/usr symlinks, ``/etc/passwd``) imported with ``podman import`` (or ``docker import``);
at run time the host's ``/usr``, this python's installation and this clone are bind-mounted read-only at the
same paths, so python, the tool and the simulated engine run inside the container unchanged. Containers use
the host network (the server's port on 127.0.0.1, as on the host).

Measured on the test machine (podman 4.3.1, runc, overlay, cgroup v1 hybrid, 2 shared cores): import 0.23 s,
``run -d`` 0.22 s, ``exec`` 0.19 s, ``rm -f`` 0.19 s.

Some machines need podman settings its defaults lack (a cgroup v1/v2 *hybrid* host: crun refuses it, runc
works; no CAP_SYS_RESOURCE: podman's default rlimits for root cannot be set). :func:`configure` probes a run
and, only when it fails for one of those reasons, writes ``/etc/containers/containers.conf.d/50-mtp-remote.conf``
(root only) and probes again. Standard library only: ``make system-deps`` runs it with the system python.

    python -m tests.support.containers configure|up|down|status
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

#: The image `make container-up` builds and the long-lived container it starts (inventory host sim-container).
IMAGE = "localhost/mtp-remote-sim:latest"
CONTAINER = "mtp-remote-sim"
#: The label every container we start carries (value: what started it); `down` removes only those.
LABEL = "mtp-remote"
DROP_IN = Path("/etc/containers/containers.conf.d/50-mtp-remote.conf")
_DROP_IN_TEXT = """\
# written by mtp-remote's `make system-deps` (tests/support/containers.py): podman's defaults failed here.
# runc: crun refuses a cgroup v1/v2 hybrid host; the rlimits: root without CAP_SYS_RESOURCE cannot raise them.
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]
[engine]
runtime = "runc"
"""
#: PID 1 of the long-lived container: sleeps, and exits at once on SIGTERM (a plain `sleep infinity` as PID 1
#: ignores it: `stop` would then wait its 10 s for the SIGKILL).
IDLE = 'trap "exit 0" TERM INT; while :; do sleep 1 & wait $!; done'
REPO = Path(__file__).resolve().parents[2]


def runtime() -> str | None:
    """``$MTP_REMOTE_CONTAINER_RUNTIME``, else podman, else docker when its daemon answers (a docker client
    without a running engine is common on CI machines: ``docker info`` fails there), else None."""
    want = os.environ.get("MTP_REMOTE_CONTAINER_RUNTIME")
    if want:
        return want if shutil.which(want) else None
    if shutil.which("podman"):
        return "podman"
    if shutil.which("docker") and _run(["docker", "info"], check=False, timeout=20).returncode == 0:
        return "docker"
    return None


def _run(argv: list[str], *, check: bool = True, timeout: float = 120, stdin: bytes | None = None):
    r = subprocess.run(argv, capture_output=True, timeout=timeout, input=stdin)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed ({r.returncode}): "
                           f"{(r.stderr or r.stdout).decode(errors='replace').strip()[-600:]}")
    return r


def rootfs_tar() -> bytes:
    """A minimal root filesystem (about 20 KB): the directories a process expects, ``/bin``, ``/sbin``,
    ``/lib``, ``/lib64`` as symlinks into ``/usr`` (bind-mounted at run time), root in ``/etc/passwd``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add_dir(name: str, mode: int = 0o755) -> None:
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode = tarfile.DIRTYPE, mode
            tar.addfile(ti)

        for d in ("usr", "etc", "proc", "sys", "dev", "run", "var", "work", "opt", "home"):
            add_dir(d)
        add_dir("root", 0o700)
        add_dir("tmp", 0o1777)
        add_dir("var/tmp", 0o1777)
        for link in ("bin", "sbin", "lib", "lib64"):
            ti = tarfile.TarInfo(link)
            ti.type, ti.linkname = tarfile.SYMTYPE, f"usr/{link}"
            tar.addfile(ti)
        for name, text in (("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"), ("etc/group", "root:x:0:\n")):
            data = text.encode()
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o644
            tar.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def mounts(*, alternatives: bool = True) -> list[str]:
    """``-v`` arguments: ``/usr``, ``/etc/alternatives`` (Debian's ``awk``, ``which``, ... are symlinks
    through it: without it the container lacks awk, as the field's did), this python's installation (when
    outside ``/usr``) and this clone, each read-only at its own path."""
    paths = ["/usr"]
    extra = [Path("/etc/alternatives")] if alternatives and Path("/etc/alternatives").is_dir() else []
    for p in (*extra, Path(sys.base_prefix).resolve(), REPO):
        if not str(p).startswith("/usr/") and str(p) not in paths:
            paths.append(str(p))
    out: list[str] = []
    for p in paths:
        out += ["-v", f"{p}:{p}:ro"]
    return out


def build_image(rt: str, tag: str = IMAGE) -> float:
    """Import :func:`rootfs_tar` as ``tag``; returns the seconds it took."""
    t0 = time.monotonic()
    _run([rt, "import", "-", tag], stdin=rootfs_tar())
    return time.monotonic() - t0


def run_argv(rt: str, name: str, image: str = IMAGE, *, label: str = "make-container-up",
             alternatives: bool = True) -> list[str]:
    """The ``run -d`` command of a long-lived container: host network, our label, the mounts, :data:`IDLE`."""
    return [rt, "run", "-d", "--name", name, "--network", "host", "--label", f"{LABEL}={label}",
            *mounts(alternatives=alternatives), image, "sh", "-c", IDLE]


def start(rt: str, name: str = CONTAINER, image: str = IMAGE, *, label: str = "make-container-up",
          alternatives: bool = True) -> float:
    """Start the long-lived container ``name`` (removing an old one of ours first); returns seconds taken.
    ``alternatives=False``: without ``/etc/alternatives`` (no ``awk``: the field's container)."""
    remove(rt, name)
    t0 = time.monotonic()
    _run(run_argv(rt, name, image, label=label, alternatives=alternatives))
    return time.monotonic() - t0


def remove(rt: str, name: str) -> None:
    """Remove container ``name`` when it carries our label (anything else of that name is left alone)."""
    r = _run([rt, "inspect", "--format", "{{index .Config.Labels \"" + LABEL + "\"}}", name], check=False)
    if r.returncode == 0 and r.stdout.decode().strip():
        _run([rt, "rm", "-f", "-t", "0", name] if rt == "podman" else [rt, "rm", "-f", name], check=False)


def ours(rt: str) -> list[str]:
    """Names of every container (running or not) carrying our label."""
    r = _run([rt, "ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.Names}}"], check=False)
    return [n for n in r.stdout.decode().split() if n]


def probe(rt: str) -> str:
    """'' when a container of :data:`IMAGE` runs here (``run --rm ... true``), else the runtime's error."""
    r = _run([rt, "run", "--rm", "--network", "host", *mounts(), IMAGE, "true"], check=False)
    return "" if r.returncode == 0 else (r.stderr or r.stdout).decode(errors="replace").strip()


def configure(rt: str) -> str:
    """Make ``rt`` able to run our containers here; returns what was done (one line). Builds the image if
    missing, probes; on podman's two known failures writes :data:`DROP_IN` (root) and probes again."""
    if _run([rt, "image", "exists", IMAGE] if rt == "podman" else [rt, "image", "inspect", IMAGE],
            check=False).returncode != 0:
        build_image(rt)
    err = probe(rt)
    if not err:
        return f"{rt}: runs containers here"
    known = ("hybrid mode not supported" in err or "setrlimit" in err or "error setting rlimit" in err)
    if rt != "podman" or not known or os.geteuid() != 0 or DROP_IN.exists():
        raise RuntimeError(f"{rt} cannot run a container here: {err[-400:]}")
    DROP_IN.parent.mkdir(parents=True, exist_ok=True)
    DROP_IN.write_text(_DROP_IN_TEXT)
    err = probe(rt)
    if err:
        raise RuntimeError(f"{rt} cannot run a container here, even with {DROP_IN}: {err[-400:]}")
    return f"{rt}: runs containers here with {DROP_IN} (runc, lower rlimits)"


def main(argv: list[str]) -> int:
    rt = runtime()
    cmd = argv[0] if argv else "status"
    if rt is None:
        print("no container runtime (podman or docker): `make system-deps` installs podman as root")
        return 0 if cmd in ("down", "status") else 1
    try:
        if cmd == "configure":
            print(configure(rt))
        elif cmd == "up":
            configure(rt)
            t_img = build_image(rt)
            t_run = start(rt)
            t0 = time.monotonic()
            _run([rt, "exec", "-i", CONTAINER, "sh", "-c", "true"])
            print(f"{rt}: image {IMAGE} imported in {t_img:.2f} s; container {CONTAINER} started in {t_run:.2f} s "
                  f"(exec {time.monotonic() - t0:.2f} s). Try `fab -H sim-container diagnose` and "
                  f"`fab -H sim-image diagnose`; `make container-down` removes both.")
        elif cmd == "down":
            for name in ours(rt):
                remove(rt, name)
            _run([rt, "rmi", "-f", IMAGE], check=False)
            print(f"{rt}: removed our containers and the image {IMAGE}")
        else:
            print(f"{rt}: our containers: {', '.join(ours(rt)) or 'none'}")
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"containers: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
