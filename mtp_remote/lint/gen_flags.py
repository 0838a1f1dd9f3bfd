"""Regenerate the SGLang flag tables (``flags_<version>.json``) from SGLang's real parser.

Usage: ``python -m mtp_remote.lint.gen_flags [VERSION ...]`` (default: :data:`PINNED_VERSIONS`). For each
version it builds (or reuses) a throwaway venv with ``sglang==VERSION --no-deps`` and the CPU torch
(:mod:`mtp_remote.lint.sglang_env`), builds ``ServerArgs.add_cli_args(argparse.ArgumentParser())`` there
and writes every action (option strings, dest, action kind, nargs, const, default, type name, choices,
required) next to this file. Commit the JSON; the linter reads only the JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mtp_remote.lint.probe import run_probe
from mtp_remote.lint.sglang_env import ensure_sglang_venv

#: The field's release, the first of the hybrid+spec+radix failure window, its last, and the newest 0.5.x.
PINNED_VERSIONS = ("0.5.9", "0.5.10", "0.5.13", "0.5.23")
TABLE_DIR = Path(__file__).parent


def generate(version: str) -> Path:
    """Dump SGLang ``version``'s parser to ``flags_<version>.json``; return the path. Raises MtpRemoteError."""
    python = ensure_sglang_venv(version)
    answer = run_probe(str(python), "dump")
    if "actions" not in answer:
        raise SystemExit(f"sglang {version}: {answer.get('error', answer)}")
    table = {
        "sglang_version": answer["sglang_version"],
        "generated_with_python": answer["python"],
        "source": "ServerArgs.add_cli_args(argparse.ArgumentParser(prog='sglang serve'))",
        "actions": answer["actions"],
    }
    out = TABLE_DIR / f"flags_{version}.json"
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return out


def main(argv: list[str]) -> int:
    for version in argv or PINNED_VERSIONS:
        path = generate(version)
        print(f"{version}: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
