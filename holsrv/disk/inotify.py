"""inotify watches on the directories where Holmake writes a script's ancestors.

inotify(7) on each directory, read without blocking when asked: which
directories saw a build file, a Holmakefile, a holproject.toml or a
`.hol/objs` change since the last call.  `ancestors.BuildTimes` drops the
build times it kept for those; the replacement wakes on the descriptor.
`written` says instead which files were written (closed after a write,
renamed over, created): `scriptwatch` syncs scripts so.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import struct
from collections.abc import Callable, Iterable
from pathlib import Path

from holsrv import facilities
from holsrv.disk import holproject

log = logging.getLogger(__name__)

# inotify(7): what happens to a directory's entries.  Writes count when the
# file is closed (Holmake's build is then complete); a new mtime alone (touch)
# is an attribute change.
_IN_ATTRIB, _IN_CLOSE_WRITE, _IN_MOVED_FROM, _IN_MOVED_TO = 0x4, 0x8, 0x40, 0x80
_IN_CREATE, _IN_DELETE, _IN_DELETE_SELF, _IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
_IN_Q_OVERFLOW, _IN_IGNORED = 0x4000, 0x8000
_MASK = (_IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
         | _IN_DELETE_SELF | _IN_MOVE_SELF)
_SELF = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_IGNORED
_WRITTEN = _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE  # a file's new bytes, in place or by rename
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, length of the name that follows
BUILD_SUFFIXES = tuple(f"Theory.{suffix}" for suffix in ("uo", "ui", "dat"))
_RELEVANT_NAMES = frozenset({"Holmakefile", ".hol", "objs", holproject.PROJECT_FILE, holproject.LOCAL_FILE})


class Watcher:
    """inotify watches on directories, read without blocking when asked."""

    sees_every_write = True  # every write to a watched directory's file is an event, whatever its stat

    def __init__(
        self, fd: int, add_watch: Callable[[int, bytes, int], int], rm_watch: Callable[[int, int], int] | None = None
    ) -> None:
        self._fd = fd
        self._add_watch = add_watch
        self._rm_watch = rm_watch if rm_watch is not None else (lambda fd, wd: 0)
        # Asking whether anything is pending is one poll(2), and no exception
        # when nothing is: most calls find nothing.
        self._pending = select.poll()
        self._pending.register(fd, select.POLLIN)
        self._dirs: dict[int, Path] = {}  # watch descriptor -> directory
        self._watched: dict[Path, int] = {}

    @classmethod
    def create(cls, recheck_s: float = 1.0) -> Watcher | None:
        """Watches, or None where the system has no inotify (`recheck_s`: how
        often times are re-read instead, for the log)."""
        if not facilities.inotify():  # not Linux, or portable mode: calls sync and re-read instead
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):  # not Linux
            return None
        if fd < 0:
            log.info("no inotify (%s): ancestors' build times are re-read every %.0fs",
                     os.strerror(ctypes.get_errno()), recheck_s)
            return None
        add = libc.inotify_add_watch
        add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        rm = libc.inotify_rm_watch
        rm.argtypes = (ctypes.c_int, ctypes.c_int)
        return cls(fd, add, rm)

    @property
    def fd(self) -> int:
        """Readable when events are pending (for an event loop's reader)."""
        return self._fd

    def close(self) -> None:
        self._pending.unregister(self._fd)
        os.close(self._fd)

    def watch(self, directory: Path) -> bool:
        """Watch `directory`; False if the system refuses (no such directory, too many watches)."""
        if directory in self._watched:
            return True
        wd = self._add_watch(self._fd, os.fsencode(directory), _MASK)
        if wd < 0:
            return False
        self._dirs[wd], self._watched[directory] = directory, wd
        return True

    def unwatch(self, directory: Path) -> None:
        """Stop watching `directory` (nothing if it was not watched)."""
        wd = self._watched.pop(directory, None)
        if wd is not None:
            del self._dirs[wd]
            self._rm_watch(self._fd, wd)

    def written(self) -> set[Path] | None:
        """Files written (closed after a write, renamed or created) in the watched directories
        since the last call; None after an overflow (any of them may have been)."""
        events = self._drain()
        if events is None:
            return None
        written: set[Path] = set()
        for directory, mask, name in events:
            if mask & _IN_IGNORED:  # the kernel dropped the watch (directory gone)
                self._forget(directory)
            elif name and mask & _WRITTEN:
                written.add(directory / name)
        return written

    def changed(self) -> set[Path] | None:
        """Directories where something relevant happened since the last call; None after an overflow."""
        events = self._drain()
        if events is None:
            return None
        changed: set[Path] = set()
        for directory, mask, name in events:
            if mask & _SELF:
                changed.add(directory)
                if mask & _IN_IGNORED:  # the kernel dropped the watch (directory gone)
                    self._forget(directory)
            elif relevant_name(name):
                changed.add(directory)
        return changed

    def _drain(self) -> list[tuple[Path, int, str]] | None:
        """Every event pending, as (watched directory, mask, name); None after an overflow.
        Events of a watch already forgotten are left out."""
        events: list[tuple[Path, int, str]] = []
        if not self._pending.poll(0):
            return events
        while True:
            try:
                chunk = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                return events
            for wd, mask, name in _events(chunk):
                if mask & _IN_Q_OVERFLOW:
                    return None
                directory = self._dirs.get(wd)
                if directory is not None:
                    events.append((directory, mask, name))

    def _forget(self, directory: Path) -> None:
        """The kernel dropped `directory`'s watch: forget it."""
        for wd in [wd for wd, d in self._dirs.items() if d == directory]:
            del self._dirs[wd]
        with contextlib.suppress(KeyError):
            del self._watched[directory]


def relevant_name(name: str) -> bool:
    """Whether an entry of this name, changed, may change a theory's build: a build file,
    a Holmakefile, a project file, a `.hol/objs`."""
    return name in _RELEVANT_NAMES or name.endswith(BUILD_SUFFIXES)


def _events(chunk: bytes) -> Iterable[tuple[int, int, str]]:
    at = 0
    while at + _EVENT.size <= len(chunk):
        wd, mask, _, length = _EVENT.unpack_from(chunk, at)
        at += _EVENT.size
        name = chunk[at:at + length].rstrip(b"\0").decode("utf-8", "surrogateescape")
        at += length
        yield wd, mask, name
