"""A bounded stat poll: file watching where there is no inotify (`facilities.inotify`).

The portable fallback of `inotify.Watcher`, with its interface (`fd`,
`watch`, `unwatch`, `written`, `changed`, `close`), so sync on write and the
build watch keep working on macOS, the BSDs and in portable mode.  Each
watched directory is listed (one `os.scandir`) and each of its entries a
watcher cares about (`relevant(directory, name)`) is stat'ed; an entry's (device, inode, size,
mtime_ns, ctime_ns) that differs from the last look, an entry that appears
or goes, or the directory itself gone or replaced, is an event, delivered as
inotify's are.

Who looks:

- a watcher given a `Poller` is looked at by that poller's one thread every
  `interval_s` (`facilities.STAT_POLL_S`); events make its `fd` readable, so
  an event loop's reader wakes as it does on inotify's descriptor (the
  script watch, the build watch);
- a watcher with no poller looks when its owner says (`sweep`, of the
  directories it names): the build-times cache looks at a script's places
  when a call asks about it, since a build finished before a call must show
  in it, as inotify's queued event does (no interval to wait out).

What a stat cannot see, it does not: a rewrite within the file system's
timestamp granularity that keeps the size (`sees_every_write` is False, so
no read is vouched for by it), and a write between two looks shows at the
next.  Bounded: at most `max_dirs` directories per poller (and per watcher
with none), `MAX_ENTRIES` entries stat'ed per directory, `MAX_PENDING`
events kept (beyond: an overflow, as inotify's queue has).  A refused
`watch` returns False, as inotify's does when out of watches.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from holsrv import facilities

log = logging.getLogger(__name__)

MAX_DIRS = 512  # directories one poller (or one watcher asked directly) looks at
MAX_ENTRIES = 1024  # relevant entries of one directory stat'ed per look; more are not seen
MAX_PENDING = 4096  # events kept until read; beyond, an overflow (anything may have changed)

_Identity = tuple[int, int, int, int, int]  # device, inode, size, mtime_ns, ctime_ns


@dataclass(frozen=True)
class _Look:
    """One directory as last seen: its own identity, and its relevant entries'."""

    itself: tuple[int, int] | None  # device and inode; None: gone
    entries: dict[str, _Identity]


def _identity(path: str) -> _Identity | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def _look(directory: Path, relevant: Callable[[Path, str], bool]) -> _Look:
    try:
        info = os.stat(directory)
        with os.scandir(directory) as listing:
            found = [entry.path for entry in listing if relevant(directory, entry.name)]
    except OSError:
        return _Look(None, {})
    entries = {}
    for path in found[:MAX_ENTRIES]:
        identity = _identity(path)  # followed: a linked script's target
        if identity is not None:
            entries[os.path.basename(path)] = identity
    return _Look((info.st_dev, info.st_ino), entries)


class Poller:
    """One thread that looks at every watcher registered with it every `interval_s`.

    The thread starts with the first watched directory and ends once no
    watcher is left, so nothing runs where nothing is watched.
    """

    def __init__(self, interval_s: float = facilities.STAT_POLL_S, max_dirs: int = MAX_DIRS) -> None:
        self.interval_s = interval_s
        self.max_dirs = max_dirs
        self._lock = threading.Lock()
        self._watchers: weakref.WeakSet[PollWatcher] = weakref.WeakSet()
        self._thread: threading.Thread | None = None
        self.rounds = 0  # looks taken at every watcher (for tests)

    def dirs(self) -> int:
        """Directories watched through this poller now."""
        with self._lock:
            return sum(w.watched() for w in self._watchers)

    def add(self, watcher: PollWatcher) -> None:
        with self._lock:
            self._watchers.add(watcher)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="holsrv-stat-poll", daemon=True)
                self._thread.start()

    def remove(self, watcher: PollWatcher) -> None:
        with self._lock:
            self._watchers.discard(watcher)

    def _run(self) -> None:
        while True:
            time.sleep(self.interval_s)  # a poll's interval, not a wait for something
            with self._lock:
                watchers = list(self._watchers)
                if not watchers:
                    self._thread = None
                    return
            for watcher in watchers:
                try:
                    watcher.sweep()
                except Exception:  # a thread's top: log it, the next round looks again
                    log.exception("the stat poll of %s failed", watcher)
            self.rounds += 1


# The daemon's one poller (tests run several daemons in one process: they share it).
shared = Poller()


class PollWatcher:
    """Directories looked at by stat: `inotify.Watcher`'s interface, for where it is missing."""

    sees_every_write = False  # a rewrite that keeps the stat is missed: vouch for no read

    def __init__(self, relevant: Callable[[Path, str], bool], poller: Poller | None = None,
                 max_dirs: int = MAX_DIRS) -> None:
        self._relevant = relevant  # which entries (directory, name) count; called from the poll thread too
        self._poller = poller
        self._max_dirs = max_dirs
        self._lock = threading.Lock()  # the looks and events, between the poll thread and the owner
        self._sweeping = threading.Lock()  # one sweep at a time
        self._looks: dict[Path, _Look] = {}
        self._events: list[tuple[Path, str | None, bool]] = []  # directory, entry name (None: itself), exists
        self._overflow = False
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._closed = False

    @property
    def fd(self) -> int:
        """Readable once a poller's look found events (for an event loop's reader)."""
        return self._read

    def watched(self) -> int:
        return len(self._looks)

    def watch(self, directory: Path) -> bool:
        """Watch `directory`; False if it cannot be looked at or the bound is reached."""
        with self._lock:
            if directory in self._looks:
                return True
        bound = self._max_dirs if self._poller is None else self._poller.max_dirs
        in_use = self.watched() if self._poller is None else self._poller.dirs()
        if in_use >= bound:
            log.warning("the stat poll watches %d directories already: %s is not watched", in_use, directory)
            return False
        look = _look(directory, self._relevant)
        if look.itself is None:
            return False
        with self._lock:
            self._looks[directory] = look
        if self._poller is not None:
            self._poller.add(self)
        return True

    def unwatch(self, directory: Path) -> None:
        with self._lock:
            self._looks.pop(directory, None)

    def written(self) -> set[Path] | None:
        """Files that appeared or changed in the watched directories since the last call; None
        after an overflow."""
        events = self._take()
        if events is None:
            return None
        return {directory / name for directory, name, exists in events if name is not None and exists}

    def changed(self) -> set[Path] | None:
        """Directories where a relevant entry appeared, changed or went, or that went themselves,
        since the last call; None after an overflow."""
        events = self._take()
        if events is None:
            return None
        return {directory for directory, _name, _exists in events}

    def _take(self) -> list[tuple[Path, str | None, bool]] | None:
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._read, 4096):
                pass
        with self._lock:
            events, self._events = self._events, []
            overflow, self._overflow = self._overflow, False
        return None if overflow else events

    def sweep(self, only: Iterable[Path] | None = None) -> None:
        """Look at every watched directory (or those of `only` watched) once, and record what differs."""
        with self._sweeping:
            with self._lock:
                before = dict(self._looks) if only is None else {d: self._looks[d] for d in only if d in self._looks}
            found: list[tuple[Path, str | None, bool]] = []
            now = {directory: _look(directory, self._relevant) for directory in before}
            with self._lock:
                for directory, look in now.items():
                    if self._looks.get(directory) is not before[directory]:
                        continue  # unwatched, or watched again, meanwhile
                    found += _differences(directory, before[directory], look)
                    if look.itself is None:
                        del self._looks[directory]  # gone: as inotify drops the watch
                    else:
                        self._looks[directory] = look
                if not found:
                    return
                self._events += found
                if len(self._events) > MAX_PENDING:
                    self._events, self._overflow = [], True
            if self._poller is not None and not self._closed:
                with contextlib.suppress(BlockingIOError, OSError):  # full: readable already
                    os.write(self._write, b"\0")

    def close(self) -> None:
        if self._poller is not None:
            self._poller.remove(self)
        with self._sweeping:
            self._closed = True
            os.close(self._read)
            os.close(self._write)
        with self._lock:
            self._looks.clear()


def _differences(directory: Path, before: _Look, after: _Look) -> list[tuple[Path, str | None, bool]]:
    if after.itself != before.itself:  # gone, or another directory now has its name
        return [(directory, None, False)]
    found: list[tuple[Path, str | None, bool]] = []
    for name, identity in after.entries.items():
        if before.entries.get(name) != identity:
            found.append((directory, name, True))
    for name in before.entries.keys() - after.entries.keys():
        found.append((directory, name, False))
    return found
