"""File watching, by whichever facility this machine has: inotify, else a stat poll.

The script watch, the build watch and the build-times cache ask here for a
watcher; each gets inotify's (`inotify.Watcher`) where `facilities.inotify`
says so, else a `statpoll.PollWatcher` over the entries it cares about
(`relevant`).  Both have one interface: `fd`, `watch`, `unwatch`, `written`,
`changed`, `close`, and `sees_every_write` (only inotify's can vouch that a
file was not written).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from holsrv.disk import inotify, statpoll

DirWatch = inotify.Watcher | statpoll.PollWatcher


def create(relevant: Callable[[Path, str], bool], poller: statpoll.Poller | None = statpoll.shared,
           recheck_s: float = 1.0) -> DirWatch | None:
    """inotify's watches, else a stat poll of the entries `relevant` accepts, looked at by
    `poller` (None: when the owner calls its `sweep`); None only where neither can be had."""
    found = inotify.Watcher.create(recheck_s)
    if found is not None:
        return found
    try:
        return statpoll.PollWatcher(relevant, poller)
    except OSError:  # no descriptor left for its pipe
        return None


def build_file(directory: Path, name: str) -> bool:
    """Whether a change to `name` in `directory` may be a change to a theory's build
    (`inotify.Watcher.changed`'s names)."""
    return inotify.relevant_name(name)
