"""Throwaway virtual environments holding one pinned SGLang release, enough to build its launch parser.

``gen_flags.py`` uses them to dump SGLang's flag tables, and ``tests/sglang_parser/`` to prove
:func:`mtp_remote.lint.lint.check_with_real_parser` against a real SGLang. A venv gets ``sglang==X`` without its
dependencies plus only what ``sglang.srt.server_args`` imports (the CPU build of torch, triton, numpy, ...):
building the parser needs no GPU. Venvs live under a cache directory (``<repo>/.cache/`` by default, which
ignores itself) and are reused once an import check has passed, so the second use costs ~2 s.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from mtp_remote.errors import MtpRemoteError

log = logging.getLogger(__name__)

#: What ``sglang.srt.server_args`` of 0.5.23 imports, found by importing it in an empty venv. torch is pinned
#: to the CPU build on local disk (``/opt/wheels``) so pip never fetches the CUDA build.
IMPORT_REQUIREMENTS: tuple[str, ...] = (
    "torch==2.13.0", "triton", "numpy", "orjson", "psutil", "pybase64", "requests",
    "packaging", "pillow", "starlette", "msgspec", "pydantic", "pyzmq", "tqdm", "IPython", "aiohttp",
)
#: Older releases import more (0.5.9: safetensors, openai, partial_json_parser, huggingface_hub,
#: transformers, dill, sentencepiece): each ``No module named X`` installs X's distribution, named here when
#: it differs from the module; transformers comes at the version the SGLang release pins.
MODULE_DISTRIBUTIONS: dict[str, str] = {
    "PIL": "pillow", "zmq": "pyzmq", "yaml": "pyyaml", "cv2": "opencv-python-headless", "google": "protobuf",
    "sklearn": "scikit-learn",
}
_MAX_IMPORT_ROUNDS = 20
_MISSING = re.compile(r"No module named '([A-Za-z0-9_]+)")

#: Modules that some releases (0.5.9-0.5.13) import at module level but the parser never uses. torchvision's
#: PyPI wheels are linked against the CUDA build of torch and fail to load beside the CPU build, so the
#: venv gets an import-only stand-in (any attribute is an inert placeholder) instead.
IMPORT_STUBS: tuple[str, ...] = (
    "torchvision", "torchvision.io", "torchvision.transforms", "torchvision.transforms.functional",
    "torchvision.transforms.v2", "torchvision.transforms.v2.functional",
)

_STUB_SOURCE = '''"""Import-only stand-in written by mtp_remote.lint.sglang_env: the parser never calls it."""


class _Inert:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return self

    def __getattr__(self, name):
        return self


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Inert()
'''

_PINNED_TRANSFORMERS = (
    "from importlib.metadata import requires; "
    "print(next((r.split(';')[0] for r in requires('sglang') or [] if r.startswith('transformers')), ''))"
)

#: pip output that means the package registry could not be reached (so callers may skip, not fail).
UNREACHABLE_MARKERS = ("NewConnectionError", "Max retries exceeded", "Temporary failure in name resolution",
                       "Network is unreachable", "Connection refused", "No matching distribution found for sglang")

_READY_MARK = ".mtp-ready"


def default_cache_dir() -> Path:
    """``$MTP_REMOTE_CACHE_DIR`` or ``<repo>/.cache`` (repo = the checkout holding this package), created
    with a ``.gitignore`` of ``*`` so git never sees the venvs."""
    cache = Path(os.environ.get("MTP_REMOTE_CACHE_DIR") or Path(__file__).resolve().parents[2] / ".cache")
    cache.mkdir(parents=True, exist_ok=True)
    ignore = cache / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    return cache


def venv_python(venv: Path) -> Path:
    """The interpreter of a venv (POSIX layout)."""
    return venv / "bin" / "python"


def ensure_sglang_venv(version: str, *, cache_dir: Path | None = None, extra: tuple[str, ...] = (),
                       timeout_s: float = 1200.0) -> Path:
    """Return the python of a venv holding ``sglang==version`` and its import requirements.

    Reuses ``<cache_dir>/sglang-<version>`` when it passed the import check before (marker file); builds it
    otherwise: ``python -m venv``, ``pip install --no-deps sglang==version``, ``pip install`` of
    :data:`IMPORT_REQUIREMENTS` + ``extra``, the :data:`IMPORT_STUBS`, then ``import sglang.srt.server_args``
    until it works, installing each module it names as missing (older releases need more). Raises
    :class:`~mtp_remote.errors.MtpRemoteError` with pip's output tail when a step fails
    (:func:`registry_unreachable` tells whether that was the network).
    """
    cache_dir = cache_dir or default_cache_dir()
    venv = cache_dir / f"sglang-{version}"
    python = venv_python(venv)
    if (venv / _READY_MARK).exists() and python.exists():
        return python
    if venv.exists():
        shutil.rmtree(venv)
    started = time.monotonic()
    _run([sys.executable, "-m", "venv", str(venv)], "create venv", timeout_s)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "--no-deps", f"sglang=={version}"], f"install sglang=={version}", timeout_s)
    _run([*pip, *IMPORT_REQUIREMENTS, *extra], "install sglang's import requirements", timeout_s)
    _write_stubs(python, timeout_s)
    _install_missing_imports(python, pip, timeout_s)
    (venv / _READY_MARK).write_text(f"sglang=={version}\n")
    log.info("built %s in %.1f s", venv, time.monotonic() - started)
    return python


def released_sources(version: str, prefixes: tuple[str, ...] = ("sglang/srt/server_args.py",
                                                               "sglang/srt/arg_groups/"),
                     *, cache_dir: Path | None = None, timeout_s: float = 600.0) -> dict[str, str]:
    """The text of the files of the released ``sglang==version`` wheel whose path starts with one of
    ``prefixes``: ``{path in the wheel: text}``. The wheel is fetched once (``pip download --no-deps``) into
    ``<cache_dir>/wheels/`` and read in place: no install, no imports. Used to check the release-keyed lint
    rules against the sources that implement them. Raises MtpRemoteError when pip fails (see
    :func:`registry_unreachable`) or the wheel has none of the files."""
    wheels = (cache_dir or default_cache_dir()) / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    if not found:
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
              f"sglang=={version}", "-d", str(wheels)], f"download sglang=={version}", timeout_s)
        found = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    if not found:
        raise MtpRemoteError(f"pip left no wheel of sglang=={version} in {wheels}")
    with zipfile.ZipFile(found[0]) as whl:
        out = {n: whl.read(n).decode("utf-8", errors="replace") for n in whl.namelist()
               if n.startswith(prefixes) and n.endswith(".py")}
    if not out:
        raise MtpRemoteError(f"sglang=={version}: the wheel has no {', '.join(prefixes)}")
    return out


def registry_unreachable(error: MtpRemoteError) -> bool:
    """True when a failed :func:`ensure_sglang_venv` step failed for lack of the package registry."""
    text = f"{error.message}\n{error.evidence or ''}"
    return any(marker in text for marker in UNREACHABLE_MARKERS)


def _install_missing_imports(python: Path, pip: list[str], timeout_s: float) -> None:
    """Import ``sglang.srt.server_args`` until it works, installing each module it reports missing."""
    tried: set[str] = set()
    for _ in range(_MAX_IMPORT_ROUNDS):
        proc = subprocess.run([str(python), "-c", "import sglang.srt.server_args"], capture_output=True,
                              text=True, timeout=timeout_s, check=False)
        if proc.returncode == 0:
            return
        m = _MISSING.search(proc.stderr)
        if not m or m.group(1) in tried:
            raise MtpRemoteError("import sglang.srt.server_args failed", evidence=proc.stderr[-3000:])
        module = m.group(1)
        tried.add(module)
        dist = MODULE_DISTRIBUTIONS.get(module, module)
        if module == "transformers":
            dist = _run([str(python), "-c", _PINNED_TRANSFORMERS], "read sglang's pins", timeout_s).strip() or dist
        log.info("sglang.srt.server_args needs %s: installing %s", module, dist)
        _run([*pip, dist], f"install {dist}", timeout_s)
    raise MtpRemoteError(f"import sglang.srt.server_args still fails after {_MAX_IMPORT_ROUNDS} installs")


def _write_stubs(python: Path, timeout_s: float) -> None:
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     "find site-packages", timeout_s).strip())
    for module in IMPORT_STUBS:
        pkg = site.joinpath(*module.split("."))
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text(_STUB_SOURCE)


def _run(argv: list[str], what: str, timeout_s: float) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise MtpRemoteError(f"{what}: timed out after {timeout_s:.0f} s", evidence=" ".join(argv)) from exc
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise MtpRemoteError(f"{what}: exit code {proc.returncode}", evidence=f"{' '.join(argv)}\n{tail}")
    return proc.stdout
