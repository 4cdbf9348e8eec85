"""Where two texts differ: the edit that makes one the other.

Plain functions over two texts, comparing slices in C (a character loop
costs milliseconds per 100 KB).  Comparing two 4 MB texts takes
milliseconds, so a caller on the event loop compares a bounded stretch at a
time (`script.edit_span_steps`): `prefix_within` and `suffix_within` look at
one stretch each and say whether the texts differ there.
"""

from __future__ import annotations


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
