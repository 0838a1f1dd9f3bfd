"""Benchmark of ``analyze_text``: time per output against length, for looping and healthy texts.

Run as a script (not collected by pytest)::

    python bench/bench_degeneracy.py            # table on stdout
    python bench/bench_degeneracy.py --markdown # the table as docs/PERFORMANCE.md shows it

Texts are generated deterministically (seeded): *healthy* is varied prose from a 2,000-word vocabulary with
punctuation and newlines; *looping* is healthy prose for the first 10 % then one sentence repeated to the
end (a tail loop, the field case); *escaped* has a 400-token loop in the middle of healthy prose. Sizes are
in text tokens as ``tokenize`` counts them. Each figure is the median of ``--repeats`` runs after a warm-up.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from mtp_remote.analysis.degeneracy import analyze_text, tokenize

SIZES = (1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000)


def _words(rng: random.Random, n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(2000)]
    out = []
    while len(out) < n:
        sentence = rng.choices(vocab, k=rng.randint(6, 18))
        out += sentence + [rng.choice([".", ".", ",", ";", "?"])] + (["\n"] if rng.random() < 0.2 else [])
    return out[:n]


def _render(tokens: list[str]) -> str:
    return " ".join(tokens).replace(" \n ", "\n")


def make_text(kind: str, n_tokens: int, seed: int = 0) -> str:
    """A text of about ``n_tokens`` tokens of the given kind (healthy, looping, escaped)."""
    rng = random.Random(seed)
    if kind == "healthy":
        return _render(_words(rng, n_tokens))
    if kind == "looping":
        head = _words(rng, n_tokens // 10)
        unit = "The user's question is 2+2 and I should answer it ."  # 14 tokens
        reps = (n_tokens - len(head)) // 14 + 1
        return _render(head) + " " + " ".join([unit] * reps)
    if kind == "escaped":
        body = _words(rng, n_tokens - 400)
        loop = ["Adding", "the", "two", "values", "gives", "the", "same", "total", "again", "."] * 40
        mid = len(body) // 2
        return _render(body[:mid] + loop + body[mid:])
    raise ValueError(f"unknown kind {kind!r}; choose healthy, looping or escaped")


def measure(text: str, repeats: int) -> float:
    """Median seconds of ``analyze_text(text)`` over ``repeats`` runs (one warm-up run first)."""
    analyze_text(text)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        analyze_text(text)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args(argv)
    kinds = ("healthy", "looping", "escaped")
    rows = []
    for size in SIZES:
        row = [size]
        for kind in kinds:
            text = make_text(kind, size)
            row.append((len(tokenize(text)), measure(text, args.repeats)))
        rows.append(row)
    out = sys.stdout
    if args.markdown:
        out.write("| tokens | healthy ms | looping ms | escaped ms | healthy µs/token | looping µs/token |\n")
        out.write("|---:|---:|---:|---:|---:|---:|\n")
    for size, *cells in rows:
        ms = [f"{t * 1e3:.2f}" for _, t in cells]
        per = [f"{t * 1e6 / n:.3f}" for n, t in cells[:2]]
        if args.markdown:
            out.write(f"| {size:,} | {' | '.join(ms)} | {' | '.join(per)} |\n")
        else:
            out.write(f"{size:>7} tokens  " + "  ".join(f"{k} {m} ms" for k, m in zip(kinds, ms))
                      + f"  ({per[0]} / {per[1]} us/token)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
