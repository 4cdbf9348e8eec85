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
    seconds = file.checking_for(entry, now)
    if seconds > settings.looping_after_s:
        return True
    return (
        file.slowest_s > 0
        and seconds > settings.looping_ratio * file.slowest_s
        and seconds >= settings.looping_min_s
    )
