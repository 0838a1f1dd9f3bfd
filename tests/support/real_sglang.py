"""Test scaffolding: one cached venv with real SGLang 0.5.9 that runs on a CPU, and the tiny models for it.

``ensure_real_sglang()`` (also ``make real-setup`` = ``python -m tests.support.real_sglang``) builds, once per
machine, ``~/.cache/mtp-remote/sglang-0.5.9-cpu-v2/`` (``$MTP_REMOTE_REAL_CACHE`` moves the parent):

- ``venv/``: ``sglang==0.5.9`` and ``sgl-kernel==0.3.21`` without their dependency pins (those pull CUDA
  builds of torch), the CPU build of torch (``torch==2.13.0``, a file on this machine's disk), and the
  runtime dependencies that were enough to serve on a CPU (:data:`RUNTIME_REQUIREMENTS`);
- the shims of ``tests/support/real_sglang_shims/`` (see its README), written into that venv only: the
  sgl_kernel loader returns None instead of raising when no compiled library loads (its ``.so`` files, 1.5 GB,
  are deleted), an import-only torchvision stand-in, and CPU ports of the two CUDA tree ops that SGLang's
  STANDALONE/EAGLE speculative path calls; and, for the hybrid model, the patches and GDN stand-ins of
  ``tests/support/real_hybrid.py`` plus the injectable faults of ``real_sglang_shims/mtp_real_faults.py``
  (inert unless ``MTP_REMOTE_REAL_FAULTS`` is set in the server's environment);
- ``model/``: a tiny ``Qwen3ForCausalLM`` (2 layers, hidden 64, random weights from a fixed seed, bf16) with a
  tokenizer trained locally — no model hub;
- ``hybrid/``: a tiny ``Qwen3NextForCausalLM`` (3 Gated-DeltaNet + 1 full-attention layer, small MoE, one MTP
  layer for NEXTN; same tokenizer) and ``hybrid-accept/``, its variant whose every draft is accepted
  (``real_sglang_shims/build_tiny_hybrid.py``);
- ``READY.json``: the stamp, written last (versions, build times); a build without it is removed and redone.

An exclusive ``flock`` on ``sglang-0.5.9-cpu-v2.lock`` beside it keeps two processes (two test sessions, CI
and a developer) from building at once: the second waits, then finds the stamp. Bump :data:`LAYOUT` when what
is built changes; old layouts stay until deleted (``cpu-v1``, dense model only, is left to the clones that
still name it). Nothing in ``mtp_remote/`` imports this module: the ``real-cpu`` and ``real-hybrid*`` inventory
hosts only name the venv's python and a model directory.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from mtp_remote.errors import MtpRemoteError
from mtp_remote.lint.sglang_env import _STUB_SOURCE, IMPORT_STUBS, _run, registry_unreachable
from tests.support import real_hybrid

SGLANG_VERSION = "0.5.9"
SGL_KERNEL_VERSION = "0.3.21"
LAYOUT = "cpu-v2"
NAME = f"sglang-{SGLANG_VERSION}-{LAYOUT}"
SHIMS = Path(__file__).resolve().parent / "real_sglang_shims"

#: Runtime dependencies of SGLang 0.5.9 that were enough to serve (and speculate) on a CPU; torch is pinned to
#: the CPU build on this machine's disk so no package pulls the CUDA build; triton runs the speculative path's
#: kernels under TRITON_INTERPRET=1.
RUNTIME_REQUIREMENTS: tuple[str, ...] = (
    "torch==2.13.0", "triton", "aiohttp", "fastapi", "uvicorn", "uvloop", "orjson", "pyzmq>=25.1.2", "psutil",
    "setproctitle", "transformers==4.57.1", "numpy", "requests", "pydantic", "python-multipart", "msgspec",
    "pybase64", "prometheus-client>=0.20.0", "packaging", "tqdm", "einops", "interegular", "partial_json_parser",
    "sentencepiece", "tiktoken", "pillow", "scipy", "huggingface_hub", "llguidance>=0.7.11,<0.8.0",
    "xgrammar==0.1.27", "openai==2.6.1", "openai-harmony==0.0.4", "IPython", "anthropic", "blobfile==3.0.0",
    "gguf", "smg-grpc-proto>=0.3.3", "grpcio>=1.78.0", "grpcio-reflection", "grpcio-health-checking",
    "apache-tvm-ffi>=0.1.5,<0.2", "ninja", "build", "nvidia-ml-py", "compressed-tensors", "dill", "jsonschema",
    "tokenizers", "safetensors",
)
_LOADER_RAISE = "    raise ImportError(error_msg)"
_LOADER_CPU = ('    print("[sgl_kernel] CPU-only: no CUDA ops loaded", file=sys.stderr)  # mtp-remote test shim\n'
               "    return None")
_CHECK = ("import sglang, sglang.launch_server, sglang.srt.speculative.eagle_utils as e; "
          "assert e.sgl_build_tree_kernel_efficient.__module__ == 'mtp_cpu_tree_ops'; print(sglang.__version__)")


@dataclass(frozen=True)
class RealEngine:
    """Where the cached real-SGLang venv and its model are. Times in seconds (of the build that made them)."""

    root: str
    python: str
    model_path: str
    hybrid_model_path: str
    hybrid_accept_model_path: str
    sglang_version: str
    install_s: float
    model_s: float
    hybrid_model_s: float
    reused: bool


def cache_root() -> Path:
    """``$MTP_REMOTE_REAL_CACHE`` or ``~/.cache/mtp-remote`` (outside any clone, shared by all of them)."""
    return Path(os.environ.get("MTP_REMOTE_REAL_CACHE") or "~/.cache/mtp-remote").expanduser()


def ensure_real_sglang(*, rebuild: bool = False, timeout_s: float = 1800.0, log=print) -> RealEngine:
    """Return the cached engine, building it first when its stamp is missing (or ``rebuild``).

    Takes the lock for the build; waits up to ``timeout_s`` for another process's build. Raises
    :class:`~mtp_remote.errors.MtpRemoteError` with the failing command's output tail."""
    parent = cache_root()
    parent.mkdir(parents=True, exist_ok=True)
    root = parent / NAME
    with open(parent / f"{NAME}.lock", "w") as lock:
        _lock(lock, timeout_s, log)
        stamp = root / "READY.json"
        if stamp.exists() and not rebuild:
            return _engine(root, json.loads(stamp.read_text()), reused=True)
        if root.exists():
            log(f"removing the unfinished or old build {root}")
            shutil.rmtree(root)
        info = _build(root, timeout_s, log)
        stamp.write_text(json.dumps(info, indent=1) + "\n")
        return _engine(root, info, reused=False)


def _engine(root: Path, info: dict, *, reused: bool) -> RealEngine:
    return RealEngine(root=str(root), python=str(root / "venv" / "bin" / "python"),
                      model_path=str(root / "model"), hybrid_model_path=str(root / "hybrid"),
                      hybrid_accept_model_path=str(root / "hybrid-accept"), sglang_version=info["sglang_version"],
                      install_s=info["install_s"], model_s=info["model_s"],
                      hybrid_model_s=info["hybrid_model_s"], reused=reused)


def _lock(lock, timeout_s: float, log) -> None:
    deadline = time.monotonic() + timeout_s
    said = False
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if not said:
                log(f"another process is building {NAME}; waiting for it (up to {timeout_s:.0f} s)")
                said = True
            if time.monotonic() >= deadline:
                raise MtpRemoteError(f"{NAME} is still being built by another process after {timeout_s:.0f} s")
            time.sleep(1.0)


def _build(root: Path, timeout_s: float, log) -> dict:
    t0 = time.monotonic()
    venv = root / "venv"
    python = venv / "bin" / "python"
    log(f"building {root} (real SGLang {SGLANG_VERSION} for CPU; a few minutes, once per machine)")
    _run([sys.executable, "-m", "venv", str(venv)], "create venv", timeout_s)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "--no-deps", f"sglang=={SGLANG_VERSION}", f"sgl-kernel=={SGL_KERNEL_VERSION}"],
         f"install sglang=={SGLANG_VERSION} and sgl-kernel=={SGL_KERNEL_VERSION} (no deps)", timeout_s)
    _run([*pip, *RUNTIME_REQUIREMENTS], "install SGLang's runtime dependencies (CPU torch)", timeout_s)
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     "find site-packages", timeout_s).strip())
    _install_shims(site)
    real_hybrid.install_hybrid_shims(site)
    version = _run([str(python), "-c", _CHECK], "import the shimmed SGLang", timeout_s).strip().splitlines()[-1]
    _run([str(python), "-c", real_hybrid.CHECK], "import the hybrid backend with its stand-ins", timeout_s)
    install_s = time.monotonic() - t0
    log(f"venv ready in {install_s:.0f} s (sglang {version}); building the tiny model")
    t1 = time.monotonic()
    model = json.loads(_run([str(python), str(SHIMS / "build_tiny_model.py"), str(root / "model")],
                            "build the tiny model", timeout_s).strip().splitlines()[-1])
    model_s = time.monotonic() - t1
    log(f"model ready in {model_s:.0f} s: {model['architecture']}, {model['parameters']} parameters")
    t2 = time.monotonic()
    hybrid = json.loads(_run([str(python), str(SHIMS / "build_tiny_hybrid.py"), str(root / "model"),
                              str(root / "hybrid"), str(root / "hybrid-accept")],
                             "build the tiny hybrid model", timeout_s).strip().splitlines()[-1])
    hybrid_model_s = time.monotonic() - t2
    log(f"hybrid model ready in {hybrid_model_s:.0f} s: {hybrid['architecture']}, {hybrid['parameters']} parameters")
    return {"sglang_version": version, "sgl_kernel_version": SGL_KERNEL_VERSION, "layout": LAYOUT,
            "python": sys.version.split()[0], "install_s": round(install_s, 1), "model_s": round(model_s, 1),
            "hybrid_model_s": round(hybrid_model_s, 1), "model": model, "hybrid_model": hybrid,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S")}


def _install_shims(site: Path) -> None:
    """Write every shim into the venv's site-packages (see real_sglang_shims/README.md)."""
    loader = site / "sgl_kernel" / "load_utils.py"
    text = loader.read_text()
    if _LOADER_RAISE not in text:
        raise MtpRemoteError(f"sgl_kernel loader changed: {_LOADER_RAISE.strip()!r} not found in {loader}")
    loader.write_text(text.replace(_LOADER_RAISE, _LOADER_CPU).replace("import logging", "import logging\nimport sys", 1))
    for so in (site / "sgl_kernel").rglob("*.so"):
        so.unlink()
    shutil.copy(SHIMS / "mtp_cpu_tree_ops.py", site / "mtp_cpu_tree_ops.py")
    eagle = site / "sglang" / "srt" / "speculative" / "eagle_utils.py"
    eagle.write_text(eagle.read_text() + (SHIMS / "eagle_utils_cpu.py").read_text())
    for module in IMPORT_STUBS:
        pkg = site.joinpath(*module.split("."))
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text(_STUB_SOURCE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.real_sglang", description=__doc__.split("\n")[0])
    parser.add_argument("--rebuild", action="store_true", help="build again even if the stamp exists")
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    try:
        engine = ensure_real_sglang(rebuild=args.rebuild)
    except MtpRemoteError as exc:
        print(f"real-setup failed: {exc.message}\n{exc.evidence or ''}", file=sys.stderr)
        if registry_unreachable(exc):
            print("(the package registry is unreachable)", file=sys.stderr)
        return 2
    print(json.dumps({**asdict(engine), "this_call_s": round(time.monotonic() - t0, 1)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
