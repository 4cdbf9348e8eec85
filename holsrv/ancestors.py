"""Which built ancestor theories changed after a HOL server loaded them.

A server loads each ancestor at most once (PROTOCOL.md §1.3): a theory
rebuilt with Holmake afterwards does not reach it until it restarts.  The
daemon looks where Holmake puts theories (the script's directory, its
Holmakefile INCLUDES, and, in a `holproject.toml` project, every directory
Holmake's project mode builds, each with its .hol/objs) and compares file
times with what the server loaded.  Ancestors are named by the script's
`Ancestors` header or, in an old-style script, by its `open …Theory` lines
(`ancestry`, kept with the text's facts by `textinfo`).

That is a listing of each directory and a stat of each build file of an
ancestor, too much for every call (a project may have hundreds of
directories): `BuildTimes` keeps each script directory's times, and a
directory watch (inotify) drops them the moment a build file, a
Holmakefile, a holproject.toml or a `.hol/objs` changes.  Nothing polls:
times are read when a call asks, and where no watch can be set they are
re-read at most once per second.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import re
import select
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from holsrv import holproject, textinfo
from holsrv.ancestry import ancestors  # noqa: F401  # re-exported: callers use ancestors.ancestors

log = logging.getLogger(__name__)

_INCLUDES = re.compile(r"^\s*INCLUDES\s*[+:]?=(.*)$", re.MULTILINE)


def include_dirs(script_dir: Path) -> list[Path]:
    """Where the script's ancestors may be built: its directory, the INCLUDES of
    its Holmakefile that exist, and the directories of its holproject.toml project."""
    dirs = [script_dir, *_makefile_includes(script_dir)]
    for directory in holproject.dirs(script_dir):
        if directory not in dirs:
            dirs.append(directory)
    return dirs


def _makefile_includes(script_dir: Path) -> list[Path]:
    dirs: list[Path] = []
    try:
        makefile = (script_dir / "Holmakefile").read_text(errors="replace")
    except OSError:
        return dirs
    joined = makefile.replace("\\\n", " ")
    for match in _INCLUDES.finditer(joined):
        for word in match.group(1).split():
            if "$" not in word:  # make variables (e.g. $(HOLDIR)) are not ours to expand
                path = (script_dir / word).resolve()
                if path.is_dir():
                    dirs.append(path)
    return dirs


def built_times(text: str, script_dir: Path) -> dict[str, float]:
    """For each ancestor, the newest time one of its built files was written (0: none found)."""
    return shared.times(textinfo.of(text).ancestors, script_dir)


class Watch:
    """What a server loaded: each ancestor's build time when first seen loaded."""

    def __init__(self) -> None:
        self._loaded: dict[str, float] = {}

    def loaded(self, times: dict[str, float]) -> None:
        """The server has loaded its ancestors (a pass got past preload) as they are now."""
        for name, built in times.items():
            if built > 0:
                self._loaded.setdefault(name, built)

    def rebuilt(self, times: dict[str, float]) -> list[str]:
        """Ancestors built again since the server loaded them."""
        return [f"{name}Theory" for name, built in times.items() if built > self._loaded.get(name, built)]


def _listing(dirs: list[Path]) -> dict[str, list[Path]]:
    """Every theory's build files in `dirs` and their .hol/objs, by theory name.

    One listing per directory, whatever the number of ancestors: a project
    of hundreds of directories would otherwise cost six stats per ancestor
    and directory (tens of thousands, over half a second).
    """
    found: dict[str, list[Path]] = {}
    for directory in dirs:
        for place in (directory / ".hol" / "objs", directory):
            try:
                with os.scandir(place) as entries:
                    for entry in entries:
                        if entry.name.endswith(_RELEVANT_SUFFIXES):
                            found.setdefault(entry.name.rsplit("Theory.", 1)[0], []).append(Path(entry.path))
            except OSError:  # no such directory (most have no .hol/objs), or unreadable
                continue
    return found


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


# -- build times kept between calls -----------------------------------------

RECHECK_S = 1.0  # without a watch: how stale a build time may be
# With one: a safety net for what inotify cannot see (writes on another
# machine of a network file system, an INCLUDES directory created later).
WATCHED_RECHECK_S = 30.0
MAX_SCRIPT_DIRS = 64


@dataclass
class _Known:
    dirs: list[Path]  # the script's directory and its INCLUDES
    places: frozenset[Path]  # where a change to them would show (see `_places`)
    watched: bool  # every one of those places has a watch
    checked: float
    times: dict[str, float] = field(default_factory=dict)
    built: dict[str, list[Path]] | None = None  # `_listing(dirs)`, once a time is asked for


class BuildTimes:
    """Ancestors' build times, per script directory, kept until something changes.

    `clock` is monotonic; `watch=False` (or a system without inotify) leaves
    only the re-check interval.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, watch: bool = True,
                 max_dirs: int = MAX_SCRIPT_DIRS) -> None:
        self._clock = clock
        self._max_dirs = max_dirs
        self._known: OrderedDict[Path, _Known] = OrderedDict()
        self._watch = watch
        self._watcher: Watcher | None = None  # set up on first use, not at import
        self._lock = threading.Lock()  # shared by the daemons of one process (tests run several)
        self.computed = 0  # times read from the file system, for tests

    @property
    def watching(self) -> bool:
        """Whether directory watches are in use (after the first call)."""
        return self._watcher is not None

    def times(self, names: Iterable[str], script_dir: Path) -> dict[str, float]:
        """For each of `names`, the newest time one of its built files was written (0: none found)."""
        with self._lock:
            return self._times(names, script_dir)

    def places(self, script_dir: Path) -> frozenset[Path]:
        """Where a rebuild of `script_dir`'s ancestors would show, as last learnt (empty if never asked)."""
        with self._lock:
            known = self._known.get(script_dir)
            return known.places if known is not None else frozenset()

    def close(self) -> None:
        """Drop the watches (the shared instance keeps them for the process's life)."""
        with self._lock:
            if self._watcher is not None:
                self._watcher.close()
            self._watch, self._watcher = False, None
            self._known.clear()

    def _times(self, names: Iterable[str], script_dir: Path) -> dict[str, float]:
        if self._watch:
            self._watch, self._watcher = False, Watcher.create()
        self._forget_changed()
        now = self._clock()
        known = self._known.get(script_dir)
        if known is None or now - known.checked >= (WATCHED_RECHECK_S if known.watched else RECHECK_S):
            known = self._learn(script_dir, now)
        self._known.move_to_end(script_dir)
        for name in names:
            if name not in known.times:
                if known.built is None:
                    known.built = _listing(known.dirs)
                known.times[name] = max((_mtime(f) for f in known.built.get(name, ())), default=0.0)
                self.computed += 1
        return {name: known.times[name] for name in names}

    def _learn(self, script_dir: Path, now: float) -> _Known:
        dirs = include_dirs(script_dir)
        places = _places(dirs)
        watched = self._watcher is not None and all(self._watcher.watch(place) for place in places)
        known = self._known[script_dir] = _Known(dirs, frozenset(places), watched, now)
        while len(self._known) > self._max_dirs:
            self._known.popitem(last=False)
        return known

    def _forget_changed(self) -> None:
        if self._watcher is None:
            return
        changed = self._watcher.changed()
        if changed is None:  # the kernel dropped events: anything may have changed
            self._known.clear()
        elif changed:
            for script_dir, known in list(self._known.items()):
                if not known.places.isdisjoint(changed):
                    del self._known[script_dir]


def _places(dirs: list[Path]) -> list[Path]:
    """Where a build file, a new `.hol/objs` or a Holmakefile would appear: each
    directory, and as much of its `.hol/objs` as exists."""
    places = []
    for directory in dirs:
        places.append(directory)
        for sub in (directory / ".hol", directory / ".hol" / "objs"):
            if sub.is_dir():
                places.append(sub)
    return places


# inotify(7): what happens to a directory's entries.  Writes count when the
# file is closed (Holmake's build is then complete); a new mtime alone (touch)
# is an attribute change.
_IN_ATTRIB, _IN_CLOSE_WRITE, _IN_MOVED_FROM, _IN_MOVED_TO = 0x4, 0x8, 0x40, 0x80
_IN_CREATE, _IN_DELETE, _IN_DELETE_SELF, _IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
_IN_Q_OVERFLOW, _IN_IGNORED = 0x4000, 0x8000
_MASK = (_IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
         | _IN_DELETE_SELF | _IN_MOVE_SELF)
_SELF = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_IGNORED
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, length of the name that follows
_RELEVANT_SUFFIXES = tuple(f"Theory.{suffix}" for suffix in ("uo", "ui", "dat"))
_RELEVANT_NAMES = frozenset({"Holmakefile", ".hol", "objs", holproject.PROJECT_FILE, holproject.LOCAL_FILE})


class Watcher:
    """inotify watches on directories, read without blocking when asked."""

    def __init__(self, fd: int, add_watch: Callable[[int, bytes, int], int]) -> None:
        self._fd = fd
        self._add_watch = add_watch
        # Asking whether anything is pending is one poll(2), and no exception
        # when nothing is: most calls find nothing.
        self._pending = select.poll()
        self._pending.register(fd, select.POLLIN)
        self._dirs: dict[int, Path] = {}  # watch descriptor -> directory
        self._watched: dict[Path, int] = {}

    @classmethod
    def create(cls) -> Watcher | None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):  # not Linux
            return None
        if fd < 0:
            log.info("no inotify (%s): ancestors' build times are re-read every %.0fs",
                     os.strerror(ctypes.get_errno()), RECHECK_S)
            return None
        add = libc.inotify_add_watch
        add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        return cls(fd, add)

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

    def changed(self) -> set[Path] | None:
        """Directories where something relevant happened since the last call; None after an overflow."""
        changed: set[Path] = set()
        if not self._pending.poll(0):
            return changed
        while True:
            try:
                chunk = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                return changed
            for wd, mask, name in _events(chunk):
                if mask & _IN_Q_OVERFLOW:
                    return None
                directory = self._dirs.get(wd)
                if directory is None:
                    continue
                if mask & _SELF:
                    changed.add(directory)
                    if mask & _IN_IGNORED:  # the kernel dropped the watch (directory gone)
                        del self._dirs[wd]
                        with contextlib.suppress(KeyError):
                            del self._watched[directory]
                elif name in _RELEVANT_NAMES or name.endswith(_RELEVANT_SUFFIXES):
                    changed.add(directory)


def _events(chunk: bytes) -> Iterable[tuple[int, int, str]]:
    at = 0
    while at + _EVENT.size <= len(chunk):
        wd, mask, _, length = _EVENT.unpack_from(chunk, at)
        at += _EVENT.size
        name = chunk[at:at + length].rstrip(b"\0").decode("utf-8", "surrogateescape")
        at += length
        yield wd, mask, name


# What `built_times` uses: one process, one set of watches.
shared = BuildTimes()
