"""``preflight``: read-only checks of a host before a run (python, SGLang, torch, GPUs, model, workdir, disk, port,
foreign processes) and the lint of every profile's launch line, with the host's own SGLang parser when it has
one. Each check is a :class:`Check` (ok, warn or fail); a failed one makes ``preflight`` exit 2."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass

from ..config.inventory import HostConfig
from ..config.playbook import Playbook
from ..errors import MtpRemoteError
from ..lint.cmdline import image_release
from ..lint.flag_table import version_key
from ..lint.lint import lint_command, result_from_answer
from ..lint.probe import parse_probe_output, probe_command, probe_source
from ..remote import facts, hostscripts, snapshot
from ..remote.commands import server_argv
from ..remote.envfacts import sim_version_command
from ..remote.foreign import describe_unseen
from .ops import HostFacts, host_sections, py_version_command, run_quiet

MIN_FREE_DISK_MIB = 2048


@dataclass
class Check:
    """One preflight finding: ``status`` is ok, warn or fail."""

    name: str
    status: str
    detail: str

    def to_dict(self) -> dict:
        return asdict(self)


def preflight(c, host: HostConfig, playbook: Playbook | None, python: str) -> list[Check]:
    """Read-only checks of a host before a run: python, SGLang and torch versions, GPUs, model, disk, port,
    foreign SGLang processes, and the lint of each profile's launch command. One round trip reads every fact
    (a snapshot); a sim host answers its SGLang version with one more."""
    checks = [Check("ssh", "ok", f"{host.transport} transport to {host.address or 'localhost'} works")]
    workdir = snapshot.home_relative(host.workdir)
    snap = snapshot.run_snapshot(c, _sections(host, python, workdir))  # every read-only fact below: one round trip

    def sec(name: str) -> snapshot.Section:
        return snap.get(name) or snapshot.Section("", 1)

    hf = HostFacts.parse(snap)
    sglang_version = _engine_checks(c, host, python, sec, checks)
    checks.append(gpu_check(hf, host, playbook))
    architectures = _model_check(host, sec("model"), checks)
    checks += _workdir_checks(host, workdir, sec("workdir"))
    busy_port = host.port in hf.tcp_ports
    checks.append(Check("port", "fail" if busy_port else "ok",
                        f"port {host.port} is {'already in use' if busy_port else 'free'}"))
    rec = hf.record
    foreign = hf.foreign(host, rec.pgid if rec else None, rec.children if rec else None)
    checks.append(Check("foreign-processes", "warn" if foreign else "ok",
                        "\n".join(f.describe() for f in foreign) if foreign else "no SGLang process we did not start"))
    if playbook is not None:
        checks.extend(_lint_checks(c, host, playbook, python, sglang_version, architectures))
    return checks


def gpu_check(hf: HostFacts, host: HostConfig, playbook: Playbook | None) -> Check:
    """The GPUs nvidia-smi lists (warn: memory in use, or GPUs the host's processes cannot see); a fail when it
    lists none or hangs -- except on a host without GPUs by design (:func:`cpu_by_design`), where none is
    what is expected."""
    gpus = hf.gpus
    if gpus:
        detail = "; ".join(f"GPU{g.index} {g.name}: {g.memory_used_mib}/{g.memory_total_mib} MiB used" for g in gpus)
        busy = [g for g in gpus if g.memory_used_mib > 0.05 * g.memory_total_mib]
        unseen = describe_unseen(hf.unseen(host))
        return Check("gpus", "warn" if busy or unseen else "ok",
                     detail + ("; memory already in use" if busy else "") + "".join(f"; {u}" for u in unseen))
    design = cpu_by_design(host, playbook)
    if design is not None:
        return Check("gpus", "ok", f"no GPU expected: {design}")
    if hf.gpus_hung:
        return Check("gpus", "fail", f"nvidia-smi did not answer within {facts.SMI_TIMEOUT_S:g} s (a wedged "
                                     f"driver?); GPUs not checked")
    return Check("gpus", "fail", "nvidia-smi returned no GPUs")


def cpu_by_design(host: HostConfig, playbook: Playbook | None) -> str | None:
    """Why this host runs without GPUs by design (the inventory's ``gpus: []``, the playbook's ``--device cpu``,
    or ``SGLANG_USE_CPU_ENGINE=1`` in the host's env), or None when it is meant to have them."""
    if host.gpus == []:
        return "the inventory gives this host no GPUs (gpus: [])"
    flags = list(playbook.base_flags) if playbook is not None else []
    for i, f in enumerate(flags):
        if (f == "--device" and flags[i + 1:i + 2] == ["cpu"]) or f == "--device=cpu":
            return f"the playbook {playbook.name} launches with --device cpu"
    if host.env.get("SGLANG_USE_CPU_ENGINE") == "1":
        return "SGLANG_USE_CPU_ENGINE=1 in the host's env (SGLang's CPU engine)"
    return None


def workdir_shown(host_workdir: str, there: str) -> str:
    """Where the snapshot found the workdir (or its first existing parent), as the operator wrote it: a path
    relative to ``$HOME`` shown as ``~/...`` when the inventory's workdir starts with ``~`` (``./.mtp-remote``
    -> ``~/.mtp-remote``: only a leading ``./`` is dropped, never the dot of a hidden directory)."""
    if there.startswith("/") or not host_workdir.startswith("~"):
        return there
    rel = there[2:] if there.startswith("./") else there
    return "~" if rel in ("", ".") else "~/" + rel


def _sections(host: HostConfig, python: str, workdir: str) -> dict[str, str]:
    """The snapshot's commands: python, SGLang and torch versions and the model's config (a real engine), the
    workdir's write test and free space, and the facts ``status`` reads too."""
    sections = {"python": py_version_command(python, None) + " 2>&1"}
    if not host.is_sim:
        sections.update(sglang=py_version_command(python, "sglang"), torch=py_version_command(python, "torch"),
                        model=f"cat {shlex.quote(host.model_path + '/config.json')}")
    sections["workdir"] = snapshot.workdir_probe_command(workdir)
    sections.update(host_sections(host, python, workdir))
    return sections


def _engine_checks(c, host: HostConfig, python: str, sec, checks: list[Check]) -> str | None:
    """The python, SGLang and torch checks (appended to ``checks``); returns the host's SGLang version (the
    sim's imitated one), or None when unknown."""
    r = sec("python")
    checks.append(Check("python", "ok" if r.exited == 0 else "fail",
                        f"{python} {r.stdout.strip()}" if r.exited == 0 else f"{python} not runnable: {r.stdout.strip()[:200]}"))
    sglang_version = None
    if host.is_sim:
        r = run_quiet(c, sim_version_command(host, python))
        sglang_version = r.stdout.strip() if r.exited == 0 and r.stdout.strip() else None
        checks.append(Check("sglang", "ok", f"simulated engine (mtp_remote.sim), imitating SGLang "
                                            f"{sglang_version or '(unknown)'}"))
    else:
        for pkg in ("sglang", "torch"):
            r = sec(pkg)
            if pkg == "sglang" and r.exited == 0:
                sglang_version = r.stdout.strip()
            checks.append(Check(pkg, "ok" if r.exited == 0 else "fail",
                                r.stdout.strip() if r.exited == 0 else f"{pkg} is not installed for {python}"))
    return sglang_version


def _model_check(host: HostConfig, r: snapshot.Section, checks: list[Check]) -> tuple[str, ...]:
    """The model check (its ``config.json`` read; a sim's model is not); returns its architectures."""
    if host.is_sim:
        checks.append(Check("model", "ok", f"{host.model_path} (simulated: not read)"))
        return ()
    if r.exited != 0:
        checks.append(Check("model", "fail", f"{host.model_path}/config.json not found"))
        return ()
    try:
        arch = json.loads(r.stdout).get("architectures")
    except ValueError:
        checks.append(Check("model", "warn", f"{host.model_path}/config.json is not valid JSON"))
        return ()
    checks.append(Check("model", "ok", f"{host.model_path}: architectures {arch}"))
    return tuple(arch or ())


def _workdir_checks(host: HostConfig, workdir: str, r: snapshot.Section) -> list[Check]:
    """Whether the workdir (or where the first run creates it) is writable, and the free space there."""
    there, _, rest = r.stdout.partition("\n")
    writable = rest.startswith("writable")
    exists = there == workdir
    shown = workdir_shown(host.workdir, there)
    free = snapshot.parse_df(r.stdout)
    return [Check("workdir", "ok" if writable else "fail",
                  (f"{host.workdir} is writable" if exists else
                   f"{host.workdir} does not exist yet; the first run creates it in {shown}, which is writable")
                  if writable else
                  f"{host.workdir if exists else shown} is not writable (read-only or missing): the server "
                  f"record, logs and lock live there; set a writable `workdir` for this host"),
            Check("disk", "ok" if free and free >= MIN_FREE_DISK_MIB else "warn",
                  f"{free} MiB free in the workdir's filesystem" if free is not None else "df failed")]


def remote_real_parser(c, python: str, argvs: list[list[str]], architectures: tuple[str, ...]):
    """Check argvs with the SGLang installed on the host (its own argparse parser, through ``c.run``);
    None when that python has no importable SGLang."""
    r = c.run(probe_command(python, "parse-many", argvs), hide=True, warn=True,
              in_stream=hostscripts.WholeStdin(probe_source()))  # whole, not Invoke's byte per 10 ms
    try:
        answer = parse_probe_output(r.stdout)
    except MtpRemoteError:
        return None
    if "results" not in answer:
        return None
    version = answer.get("sglang_version")
    return [result_from_answer(one, argv, version, architectures) for one, argv in zip(answer["results"], argvs)]


def _lint_checks(c, host: HostConfig, playbook: Playbook, python: str, sglang_version: str | None,
                 architectures: tuple[str, ...]) -> list[Check]:
    """Lint every profile's launch command: with the host's own SGLang parser when it has one (its verdict
    wins), else with the flag table of the host's SGLang version (newest when unknown)."""
    names = playbook.profile_order()
    argvs = [server_argv(host, playbook, n) for n in names]
    if host.server.kind == "container":
        return _lint_images(host, playbook, names, argvs, architectures)
    results = None if host.is_sim or sglang_version is None else remote_real_parser(c, python, argvs, architectures)
    source = "host's SGLang parser"
    if results is None:
        results = [lint_command(host.launch_words() + " " + " ".join(shlex.quote(a) for a in argv),
                                sglang_version=sglang_version, architectures=architectures) for argv in argvs]
        used = results[0].sglang_version if results else None
        source = (f"SGLang {used} flag table, the host's release" if sglang_version and used and
                  version_key(used)[:3] == version_key(sglang_version)[:3] else
                  f"SGLang {used} flag table, for the host's {sglang_version}" if sglang_version else
                  f"SGLang {used} flag table, the newest: the host's release is unknown")
    return [check for name, res in zip(names, results) for check in _lint_result(name, res, source)]


def _lint_result(name: str, res, source: str) -> list[Check]:
    """A profile's lint as checks: its notes (e.g. a no-op on 0.5.9), then its findings or "no findings", each
    saying which flag table or parser judged (``source``)."""
    findings = res.to_dict()["findings"]
    out = [Check(f"lint:{name}", "ok", f"note: {note}") for note in res.notes]
    if findings:
        out.append(Check(f"lint:{name}", "warn", f"({source}) " + "; ".join(
            f"{f['code']}{(' ' + f['flag']) if f.get('flag') else ''}: {f.get('message', '')}" for f in findings)))
    else:
        out.append(Check(f"lint:{name}", "ok", f"no findings ({source})"))
    return out


def _lint_images(host: HostConfig, playbook: Playbook, names: list[str], argvs: list[list[str]],
                 architectures: tuple[str, ...]) -> list[Check]:
    """A container per profile: lint each profile against the SGLang release its image's tag names
    (:func:`~mtp_remote.lint.cmdline.image_release`; the newest flag table when the tag names none)."""
    out = []
    for name, argv in zip(names, argvs):
        image = playbook.profiles[name].image or host.server.image
        release = image_release(image)
        res = lint_command(host.launch_words() + " " + " ".join(shlex.quote(a) for a in argv),
                           sglang_version=release, architectures=architectures)
        source = (f"SGLang {res.sglang_version} flag table, for image {image}" if release else
                  f"SGLang {res.sglang_version} flag table, the newest: image {image} names no release")
        out += _lint_result(name, res, source)
    return out
