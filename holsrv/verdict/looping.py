"""When a proof that is still checking is far slower than the rest, or probably looping.

HOL's pool has no per-proof timeout (docs/protocol.md#looping-proofs), so the daemon
judges, on two levels:

- *far slower*: some proofs of the file have finished, and this one has been
  checking for `slow_ratio` times the slowest of them and at least
  `slow_after_s` (an early word, when its neighbours are fast);
- *probably looping*: checking for longer than `looping_after_s`, or for
  `looping_ratio` times the slowest finished proof and at least
  `looping_min_s` (the reference tool's rule, the upper bound).

Nothing is ever stopped for either; it is only reported, and a probably
looping proof no longer keeps its server from being evicted.
"""

from __future__ import annotations

import math

from holsrv.config.settings import Settings
from holsrv.verdict.filestate import FileState, ProofEntry


def probably_looping(file: FileState, entry: ProofEntry, now: float, settings: Settings) -> bool:
    return file.checking_for(entry, now) > looping_threshold(file, settings)


def suspicious(file: FileState, entry: ProofEntry, now: float, settings: Settings) -> bool:
    """Far slower than the rest, or probably looping: waiting on it is unlikely to pay."""
    return file.checking_for(entry, now) > min(slow_threshold(file, settings), looping_threshold(file, settings))


def looping_from(file: FileState, entry: ProofEntry, now: float, settings: Settings) -> float:
    """When `entry`, still checking, will count as probably looping (clock time)."""
    return now - file.checking_for(entry, now) + looping_threshold(file, settings)


def slow_from(file: FileState, entry: ProofEntry, now: float, settings: Settings) -> float:
    """When `entry`, still checking, will count as far slower than the rest (clock time; inf: never)."""
    return now - file.checking_for(entry, now) + slow_threshold(file, settings)


def looping_threshold(file: FileState, settings: Settings) -> float:
    """Seconds of checking after which a proof is probably looping."""
    if file.slowest_s <= 0:
        return settings.looping_after_s
    relative = max(settings.looping_ratio * file.slowest_s, settings.looping_min_s)
    return min(settings.looping_after_s, relative)


def slow_threshold(file: FileState, settings: Settings) -> float:
    """Seconds of checking after which a proof is far slower than every finished one."""
    if file.finished == 0:
        return math.inf  # nothing to compare with
    return max(settings.slow_after_s, settings.slow_ratio * file.slowest_s)
