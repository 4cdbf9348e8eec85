"""Where two texts differ: the edit that makes one the other.

Plain functions over two texts, comparing slices in C (a character loop
costs milliseconds per 100 KB).  Comparing two 4 MB texts takes
milliseconds, so a caller on the event loop compares a bounded stretch at a
time (`edit_span_steps`): `prefix_within` and `suffix_within` look at
one stretch each and say whether the texts differ there.  A computation of
its own, apart from a text's facts (`textinfo`): it reads two texts and
keeps nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from holsrv.text.stepping import CHARS_PER_STEP, Steps, run


def edit_span(old: str, new: str) -> tuple[int, int, int]:
    """(first differing offset, end of the changed region in old, end in new)."""
    return run(edit_span_steps(old, new))


def edit_span_steps(old: str, new: str) -> Steps[tuple[int, int, int]]:
    """`edit_span` in steps: comparing two 4 MB texts takes milliseconds."""
    start = yield from _agreeing(prefix_within, old, new, min(len(old), len(new)))
    same_tail = yield from _agreeing(suffix_within, old, new, min(len(old), len(new)) - start)
    return start, len(old) - same_tail, len(new) - same_tail


def _agreeing(within: Callable[[str, str, int, int], int], a: str, b: str, limit: int) -> Steps[int]:
    """How far `a` and `b` agree (at most `limit`), a step's worth of characters compared at a time."""
    at = 0
    while at < limit:
        end = min(at + CHARS_PER_STEP, limit)
        found = within(a, b, at, end)
        if found < end:
            return found
        at = end
        yield
    return limit


def prefix_within(a: str, b: str, at: int, end: int) -> int:
    """The common prefix's length, given that `a[:at] == b[:at]`, when it is
    less than `end`; else `end` (the two agree up to there)."""
    x, y = a[at:end], b[at:end]
    return end if x == y else at + _prefix_length(x, y)


def suffix_within(a: str, b: str, at: int, end: int) -> int:
    """The common suffix's length, given that the last `at` characters agree,
    when it is less than `end`; else `end`."""
    x, y = a[len(a) - end:len(a) - at], b[len(b) - end:len(b) - at]
    return end if x == y else at + _prefix_length(x[::-1], y[::-1])


def _prefix_length(x: str, y: str) -> int:
    """The longest common prefix of `x` and `y`, by bisection over slice comparisons."""
    low, high = 0, min(len(x), len(y))  # x[:low] == y[:low]; the answer is at most high
    while low < high:
        mid = (low + high + 1) // 2
        if x[low:mid] == y[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low
