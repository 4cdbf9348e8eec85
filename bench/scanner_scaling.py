"""Is the comment/string scanner linear?  Time `masking.blank_comments_and_strings` as the input grows 4x a step.

    python bench/scanner_scaling.py            # 64 KiB .. 16 MiB of nested comments, strings, quotations
    python bench/scanner_scaling.py --check    # exit 1 if a 4x larger input costs over 20x the time

Tests never assert on wall-clock time (DESIGN.md); this is where the
property test's "and linear" half is measured.  Each size is the best of
three runs; the ratio column compares each size with the one before it
(linear is about 4).
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from holsrv.text import masking

# Text shaped to hit every branch: deeply nested comments, strings with
# escapes, all four quotation forms, and plain code between them.
_PIECES = [
    "val x = f (y, z) + 1;\n",
    "(* a (* nested (* deeper *) comment *) with \"quotes\" inside *)\n",
    '"a string with \\"escapes\\" and (* no comment *) in it"\n',
    "`a quotation`", "``a term``", "‘∀x. x = x’", "“T ∧ F”",
    "Theorem t: ‘p ⇒ p’\nProof\n  rw[] >> cheat\nQED\n",
]


def text_of(size: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    parts, total = [], 0
    while total < size:
        piece = rng.choice(_PIECES)
        if rng.random() < 0.05:
            depth = rng.randint(2, 30)
            piece = "(* " * depth + "deep" + " *)" * depth + "\n"
        parts.append(piece)
        total += len(piece)
    return "".join(parts)


def best_of(fn, text: str, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if 4x the input costs over 20x the time")
    args = parser.parse_args()
    sizes = [64 * 1024 * 4**k for k in range(5)]  # 64 KiB .. 16 MiB
    previous = None
    worst = 0.0
    print(f"{'size':>10}  {'time':>10}  {'x previous':>10}")
    for size in sizes:
        seconds = best_of(masking.blank_comments_and_strings, text_of(size))
        ratio = seconds / previous if previous else float("nan")
        worst = max(worst, ratio if previous else 0.0)
        print(f"{size / 1024:>8.0f}KB  {seconds * 1000:>8.1f}ms  {ratio:>10.1f}")
        previous = seconds
    print(f"worst step: {worst:.1f}x time for 4x input (linear: ~4)")
    return 1 if args.check and worst > 20 else 0


if __name__ == "__main__":
    sys.exit(main())
