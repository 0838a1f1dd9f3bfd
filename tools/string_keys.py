"""Count string-keyed access in ``mtp_remote/`` outside ``sim/``: ``x["key"]`` and ``x.get("key", ...)``.

Bar ``issue-architecture-2`` (issue 26): records travel as typed objects, so this count stays below 350. Counted
on the syntax tree (code only, docstrings and comments not; f-string fields included; either quote style): a
subscript whose index is a string literal, and a ``.get`` call whose first argument is one. ``--by-file`` lists
the files, most first; ``--regex`` also prints the plain-text count the issue was measured with
(``\\["key"\\]|\\.get\\("``, double quotes only, comments included).

Usage: ``python tools/string_keys.py [--by-file] [--regex] [ROOT]`` (ROOT default: the package beside this file).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mtp_remote"
BAR = 350
_TEXT = re.compile(r'\["[^"\n]*"\]|\.get\("')


def sources(root: Path = PACKAGE) -> list[Path]:
    """The package's Python files outside ``sim/`` (the simulated engine is a separate program)."""
    return sorted(p for p in root.rglob("*.py") if "sim" not in p.relative_to(root).parts)


def count_file(path: Path) -> int:
    """String-keyed accesses in one file, counted on its syntax tree."""
    n = 0
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            n += 1
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            n += 1
    return n


def count(root: Path = PACKAGE) -> Counter:
    """``{file: count}`` over :func:`sources` (files with none left out)."""
    return Counter({str(p.relative_to(root.parent)): n for p in sources(root) if (n := count_file(p))})


def count_text(root: Path = PACKAGE) -> int:
    """The issue's plain-text count: ``["key"]`` and ``.get("`` anywhere in the text (double quotes only)."""
    return sum(len(_TEXT.findall(p.read_text())) for p in sources(root))


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    root = Path(args[0]) if args else PACKAGE
    by_file = count(root)
    if "--by-file" in argv:
        for name, n in by_file.most_common():
            print(f"{n:5d}  {name}")
    print(f"string-keyed accesses: {sum(by_file.values())} (bar: below {BAR})")
    if "--regex" in argv:
        print(f'plain-text count (\\["key"\\] and .get(", double quotes): {count_text(root)}')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
