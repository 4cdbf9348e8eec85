"""When a proof that is still checking is probably looping.

HOL's pool has no per-proof timeout (PROTOCOL.md §10.7), so the daemon
judges: checking for longer than `looping_after_s`, or for `looping_ratio`
times the slowest proof that finished in the file and at least
`looping_min_s`.  Nothing is ever stopped for this; it is only reported, and
a looping proof no longer keeps its server from being evicted.
"""

from __future__ import annotations

from holsrv.filestate import FileState, ProofEntry
from holsrv.settings import Settings


def probably_looping(file: FileState, entry: ProofEntry, now: float, settings: Settings) -> bool:
    return file.checking_for(entry, now) > _threshold(file, settings)


def looping_from(file: FileState, entry: ProofEntry, now: float, settings: Settings) -> float:
    """When `entry`, still checking, will count as probably looping (clock time)."""
    return now - file.checking_for(entry, now) + _threshold(file, settings)


def _threshold(file: FileState, settings: Settings) -> float:
    """Seconds of checking after which a proof is probably looping."""
    if file.slowest_s <= 0:
        return settings.looping_after_s
    relative = max(settings.looping_ratio * file.slowest_s, settings.looping_min_s)
    return min(settings.looping_after_s, relative)
