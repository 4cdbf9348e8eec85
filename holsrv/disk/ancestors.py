"""Which built ancestor theories changed after a HOL server loaded them.

A server loads each ancestor at most once (docs/protocol.md#working-directory-heap-and-ancestors): a theory
rebuilt with Holmake afterwards does not reach it until it restarts.  The
daemon looks where Holmake puts theories (the script's directory, its
Holmakefile INCLUDES, and, in a `holproject.toml` project, every directory
Holmake's project mode builds, each with its .hol/objs) and compares file
times with what the server loaded.  Ancestors are named by the script's
`Ancestors` header or, in an old-style script, by its `open …Theory` lines
(`textinfo.ancestors`, kept with the text's other facts).

That is a listing of each directory and a stat of each build file of an
ancestor, too much for every call (a project may have hundreds of
directories): `BuildTimes` keeps each script directory's times, and a
directory watch (inotify) drops them the moment a build file, a
Holmakefile, a holproject.toml or a `.hol/objs` changes.  Without inotify
the same watch is a stat poll taken when a call asks (`disk/statpoll.py`:
a listing of each place and a stat of its build files, so a build finished
before the call shows in it); where no watch can be set, times are re-read
at most once per second.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from holsrv.disk import holproject, statpoll, watching
from holsrv.disk.inotify import BUILD_SUFFIXES
from holsrv.text import textinfo
from holsrv.text.textinfo import ancestors  # noqa: F401  # re-exported: callers use ancestors.ancestors

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
    """For each ancestor, however deep, the newest time one of its built files was written
    (0: none found).  A server loads its ancestors' ancestors too: a rebuilt `base` two
    levels up is as much a change to it as a rebuilt parent (see `BuildTimes.development`)."""
    return shared.development(textinfo.of(text).ancestors, script_dir).times


def development(text: str, script_dir: Path) -> Development:
    """The ancestors of the script `text` in `script_dir` that the development builds, however deep."""
    return shared.development(textinfo.of(text).ancestors, script_dir)


@dataclass
class Development:
    """A script's ancestors, however deep, as the development's build directories show them.

    Each theory built in one of the directories Holmake looks in (`include_dirs`
    of the script naming it) is followed to its own script, `<name>Script.sml`
    beside its build files, whose `Ancestors` header names the next level.  A
    theory with no build found there (a standard one, or one not built) ends
    its branch: its time is 0.
    """

    times: dict[str, float] = field(default_factory=dict)  # by theory name, however deep
    parents: dict[str, list[str]] = field(default_factory=dict)  # a built theory's own ancestors
    scripts: dict[str, Path] = field(default_factory=dict)  # a built theory's script, where found

    def built(self) -> list[str]:
        """The theories the development built (a build file was found), nearest first."""
        return [name for name, t in self.times.items() if t > 0]

    def out_of_date(self) -> dict[str, list[str]]:
        """Each built ancestor whose build is older than one of its own built ancestors', with those:
        HOL refuses to load it against the newer one (`link_parents`), so the next build of it is what
        is missing.  Only the lowest such theories: what is above them waits for them anyway."""
        late: dict[str, list[str]] = {}
        for name in self.built():
            newer = [p for p in self.parents.get(name, []) if self.times.get(p, 0.0) > self.times[name]]
            if newer:
                late[name] = newer
        return {name: newer for name, newer in late.items()
                if not any(below in late for below in self._below(name))}

    def _below(self, name: str) -> set[str]:
        seen: set[str] = set()
        todo = list(self.parents.get(name, []))
        while todo:
            parent = todo.pop()
            if parent not in seen:
                seen.add(parent)
                todo += self.parents.get(parent, [])
        return seen


class Watch:
    """What a server loaded: each ancestor's build time when first seen loaded."""

    def __init__(self) -> None:
        self._loaded: dict[str, float] = {}
        self.generation = 0  # moves on whenever `rebuilt` may answer otherwise for the same times

    def loaded(self, times: dict[str, float]) -> None:
        """The server has loaded its ancestors (a pass got past preload) as they are now."""
        for name, built in times.items():
            if built > 0 and name not in self._loaded:
                self._loaded[name] = built
                self.generation += 1

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
                        if entry.name.endswith(BUILD_SUFFIXES):
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
MAX_SCRIPT_DIRS = 256  # a development's ancestors may span many directories


MAX_DEPTH_THEORIES = 256  # a development's ancestors followed, at most


@dataclass
class _Known:
    dirs: list[Path]  # the script's directory and its INCLUDES
    places: frozenset[Path]  # where a change to them would show (see `_places`)
    watched: bool  # every one of those places has a watch
    checked: float
    serial: int  # new with each learning: the times below hold while it is the same
    times: dict[str, float] = field(default_factory=dict)
    built: dict[str, list[Path]] | None = None  # `_listing(dirs)`, once a time is asked for
    # A built theory's own ancestors and script, read once per learning (a build
    # of it changes a place, which drops this entry): (script dir, script, parents).
    parents: dict[str, tuple[Path, Path, list[str]]] = field(default_factory=dict)
    deeper: tuple[str, ...] = ()  # the other script directories the last `development` went through


class BuildTimes:
    """Ancestors' build times, per script directory, kept until something changes.

    `clock` is monotonic; `watch=False` (or a system without inotify) leaves
    only the re-check interval.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, watch: bool = True,
                 max_dirs: int = MAX_SCRIPT_DIRS) -> None:
        self._clock = clock
        self._max_dirs = max_dirs
        # By the directory's name: callers pass a new `path.parent` each time, whose hash is not yet computed.
        self._known: OrderedDict[str, _Known] = OrderedDict()
        self._watch = watch
        self._watcher: watching.DirWatch | None = None  # set up on first use, not at import
        self._lock = threading.Lock()  # shared by the daemons of one process (tests run several)
        self.computed = 0  # times read from the file system, for tests
        # `development`'s answers, by script directory and names, with the serial they hold for.
        self._developments: dict[tuple[str, tuple[str, ...]], tuple[int, Development]] = {}
        self._serials = itertools.count(1)

    @property
    def watching(self) -> bool:
        """Whether directory watches are in use (after the first call)."""
        return self._watcher is not None

    def times(self, names: Iterable[str], script_dir: Path) -> dict[str, float]:
        """For each of `names`, the newest time one of its built files was written (0: none found)."""
        with self._lock:
            self._look(script_dir)
            return self._times(names, script_dir)

    def development(self, names: Iterable[str], script_dir: Path) -> Development:
        """`names`, the ancestors of a script in `script_dir`, and theirs, however deep (`Development`).

        Each level's times are read where the script naming it looks (its
        directory's `include_dirs`), so a rebuild anywhere below is seen, and
        watched: `places` and `serial` cover every directory gone through.
        """
        with self._lock:
            key = (str(script_dir), tuple(names))
            serial = self._serial(script_dir)
            kept = self._developments.get(key)
            if kept is not None and serial is not None and kept[0] == serial:
                return kept[1]  # nothing it was made of has changed: one poll of the watch
            dev = Development()
            todo: list[tuple[list[str], Path]] = [(list(names), script_dir)]
            deeper: list[str] = []
            while todo and len(dev.times) < MAX_DEPTH_THEORIES:
                level, directory = todo.pop(0)
                fresh = [n for n in level if n not in dev.times]
                if not fresh:
                    continue
                if directory != script_dir and str(directory) not in deeper:
                    deeper.append(str(directory))
                times = self._times(fresh, directory)
                known = self._known[str(directory)]
                for name in fresh:
                    dev.times[name] = times[name]
                    found = self._parents(known, name) if times[name] > 0 else None
                    if found is not None:
                        where, script, parents = found
                        dev.scripts[name], dev.parents[name] = script, parents
                        todo.append((parents, where))
            top = self._known.get(str(script_dir))
            if top is not None:  # every script of the directory: its serial covers them all
                top.deeper = tuple(dict.fromkeys([*top.deeper, *deeper]))
            serial = self._serial(script_dir, look=False)  # looked at on the way in
            if serial is not None:
                self._developments[key] = (serial, dev)
                while len(self._developments) > self._max_dirs:
                    del self._developments[next(iter(self._developments))]
            return dev

    @staticmethod
    def _parents(known: _Known, name: str) -> tuple[Path, Path, list[str]] | None:
        """Where theory `name`'s script is, and the ancestors its header names (None: no script beside its build)."""
        if name not in known.parents:
            for built in (known.built or {}).get(name, ()):
                where = built.parent.parent.parent if built.parent.name == "objs" else built.parent
                script = where / f"{name}Script.sml"
                try:
                    text = script.read_text(errors="replace")
                except OSError:
                    continue
                known.parents[name] = (where, script, [p for p in textinfo.ancestors(text) if p != name])
                break
        return known.parents.get(name)

    def places(self, script_dir: Path) -> frozenset[Path]:
        """Where a rebuild of `script_dir`'s ancestors, however deep, would show, as last
        learnt (empty if never asked)."""
        with self._lock:
            return self._places(script_dir)

    def _places(self, script_dir: Path) -> frozenset[Path]:
        known = self._known.get(str(script_dir))
        if known is None:
            return frozenset()
        places = set(known.places)
        for other in known.deeper:
            deeper = self._known.get(other)
            if deeper is not None:
                places |= deeper.places
        return frozenset(places)

    def _look(self, script_dir: Path) -> None:
        """Without inotify: stat where a rebuild of `script_dir`'s ancestors would show, now, so
        a build finished before this call shows in it (the other directories wait for their own)."""
        if isinstance(self._watcher, statpoll.PollWatcher):
            self._watcher.sweep(self._places(script_dir))

    def serial(self, script_dir: Path) -> int | None:
        """A number that stays the same exactly as long as `times` for `script_dir` gives the
        times it gave (for the names it was asked), so what was made of them may be kept; None
        when the next `times` reads them again (never asked, a change seen, the re-check due).
        One poll of the watch: cheap enough for every call."""
        with self._lock:
            return self._serial(script_dir)

    def _serial(self, script_dir: Path, look: bool = True) -> int | None:
        if look:
            self._look(script_dir)
        self._forget_changed()
        known = self._known.get(str(script_dir))
        if known is None or not self._current(known):
            return None
        serials = [known.serial]
        for other in known.deeper:  # the ancestors' own directories (`development`)
            deeper = self._known.get(other)
            if deeper is None or not self._current(deeper):
                return None
            serials.append(deeper.serial)
        return hash(tuple(serials)) if known.deeper else known.serial

    def _current(self, known: _Known) -> bool:
        return self._clock() - known.checked < (WATCHED_RECHECK_S if known.watched else RECHECK_S)

    def close(self) -> None:
        """Drop the watches (the shared instance keeps them for the process's life)."""
        with self._lock:
            if self._watcher is not None:
                self._watcher.close()
            self._watch, self._watcher = False, None
            self._known.clear()

    def _times(self, names: Iterable[str], script_dir: Path) -> dict[str, float]:
        if self._watch:
            # No poller: the stat poll looks when a call asks (`_look`), so the call sees a build done before it.
            self._watch, self._watcher = False, watching.create(watching.build_file, None, RECHECK_S)
        self._forget_changed()
        now = self._clock()
        known = self._known.get(str(script_dir))
        if known is None or now - known.checked >= (WATCHED_RECHECK_S if known.watched else RECHECK_S):
            known = self._learn(script_dir, now)
        self._known.move_to_end(str(script_dir))
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
        known = self._known[str(script_dir)] = _Known(dirs, frozenset(places), watched, now, next(self._serials))
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


# What `built_times` uses: one process, one set of watches.
shared = BuildTimes()
