"""Project files: the nearest `holsrv.toml` beside a script sets the settings of its development.

A project file is found in the script's directory or above it, up to the
repository root (a directory holding `.git`, itself searched) and never in or
above the user's home (the user's config file is the place for settings of
every project).  It may set only the settings that belong to a development
(`PER_PROJECT`: which HOL, its Holmake, its heap cap, …); a setting of the
daemon as a whole (its socket, memory budget, connection limits) is an
error that says where it belongs.  For its scripts it overrides the
user-wide settings (flags of the daemon, the environment, the user's config
file, the defaults); only an option of one call (`restart --max-heap-mb`)
overrides it.

A project file names a program to run, so it is read only when it is a
regular file (not a symlink) owned by the user and not writable by group
or others, as the daemon's own files; otherwise every call about its scripts
is refused with the file and why.  Each file is read once per (inode, mtime,
size): a call costs the stats of the walk up and of the file.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import stat
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from holsrv.config.settings import OPERATOR, TYPES, USER, Settings
from holsrv.config.settingsources import config_path, from_toml, key_line
from holsrv.errors import ProjectError

PROJECT_NAME = "holsrv.toml"
# How old a project file's look may be when a cached answer is given with one stat (`Projects.recent`):
# an edited project file shows in a cached answer's reasons within this, without a directory walk per call.
RECENT_S = 1.0
# The settings a project file may set: those of a development, not of the daemon.
# `holdir` is a project file's own way to name a HOL: its bin/hol (and Holmake beside it).
PER_PROJECT = ("hol_bin", "holdir", "holmake_bin", "max_heap_mb", "extra_path", "holmake_jobs",
               "holmake_timeout_s", "try_timeout_s", "letgo_s", "hard_footprint_pct", "max_try_candidates")
_PATHS = ("hol_bin", "holdir", "holmake_bin")
_TYPES_HERE: dict[str, Any] = {**{k: TYPES[k] for k in PER_PROJECT if k != "holdir"}, "holdir": "str"}


@dataclass(frozen=True)
class Project:
    """One project file as read: its settings, or why it was refused (`error`)."""

    file: Path
    stamp: tuple[int, int, int]  # (inode, mtime_ns, size) when read
    values: dict[str, Any]
    error: str = ""

    def apply(self, settings: Settings) -> Settings:
        """`settings` with this file's values over them, each one's source the file; ProjectError if refused."""
        if self.error:
            raise ProjectError(self.error)
        values = dict(self.values)
        holdir = values.pop("holdir", None)
        if holdir is not None and "hol_bin" not in values:
            values["hol_bin"] = str(Path(holdir) / "bin" / "hol")
        if "hol_bin" in values and "holmake_bin" not in values:
            # The user-wide Holmake belongs to the user-wide HOL: this project's is beside its own `hol`.
            values["holmake_bin"] = str(Path(holdir) / "bin" / "Holmake") if holdir else None
        source = f"project file {self.file}"
        sources = {**settings.sources, **{name: source for name in values}}
        return dataclasses.replace(settings, **values, sources=sources, warnings=settings.warnings)


# The user-wide settings, once refused by a project file, are told where they belong.
def _belongs(key: str) -> str:
    where = config_path() or "the user's config file"
    return (f"{key!r} is a setting of the daemon as a whole, not of one project: set it in {where} or as "
            f"HOLSRV_{key.upper()} in the daemon's environment, and remove it from the project file")


def read(file: Path, stamp: tuple[int, int, int], data: bytes) -> Project:
    """The project file `file` from its bytes: its values, or the error that refuses it."""
    try:
        text = data.decode("utf-8")
        table = tomllib.loads(text)
    except UnicodeDecodeError as err:
        return Project(file, stamp, {}, f"project file {file} is not UTF-8 ({err}); fix it or move it away")
    except tomllib.TOMLDecodeError as err:  # its message names the line and column
        return Project(file, stamp, {}, f"project file {file} is not valid TOML: {err}; fix it or move it away")
    values: dict[str, Any] = {}
    for key, raw in table.items():
        where = f"{file}, line {key_line(text, key)}"
        if key not in _TYPES_HERE:
            if key in USER or key in OPERATOR:
                return Project(file, stamp, {}, f"{_belongs(key)} ({where})")
            close = difflib.get_close_matches(key, PER_PROJECT, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            return Project(file, stamp, {}, f"unknown setting {key!r} in project file {where}; {hint}a project "
                                            f"file may set: {', '.join(PER_PROJECT)}")
        try:
            value = from_toml(_TYPES_HERE, key, raw)
        except ValueError as err:
            return Project(file, stamp, {}, f"bad value for {key!r} in project file {where}: {err}")
        if key in _PATHS:  # relative to the project's directory, as the file is read from anywhere
            value = os.path.normpath(file.parent / os.path.expanduser(value))
        elif key == "extra_path":
            value = tuple(os.path.normpath(file.parent / os.path.expanduser(p)) for p in value)
        values[key] = value
    problem = _missing_hol(values)
    if problem:
        return Project(file, stamp, {}, f"project file {file}: {problem}")
    return Project(file, stamp, values)


def _missing_hol(values: dict[str, Any]) -> str:
    """What is wrong with the HOL a project file names ("" if nothing)."""
    for key, must in (("hol_bin", values.get("hol_bin")), ("holmake_bin", values.get("holmake_bin"))):
        if must and not (os.access(must, os.X_OK) and Path(must).is_file()):
            return f"{key} = {must} is not an executable file; give the path of HOL's {key[:-4]}"
    holdir = values.get("holdir")
    if holdir and not os.access(Path(holdir) / "bin" / "hol", os.X_OK):
        return f"holdir = {holdir} has no executable bin/hol; give the root of a built HOL tree"
    return ""


def find(script: Path, home: Path | None = None) -> Path | None:
    """The nearest project file for `script`: in its directory or above, up to the repository root
    (a `.git` directory or file), never in the user's home or above it."""
    home = home if home is not None else _home()
    directory = script.parent
    while True:
        if home is not None and (directory == home or directory in home.parents):
            return None
        candidate = directory / PROJECT_NAME
        if os.path.lexists(candidate):
            return candidate
        if os.path.lexists(directory / ".git") or directory.parent == directory:
            return None
        directory = directory.parent


def _home() -> Path | None:
    home = os.environ.get("HOME")
    return Path(home) if home else None


class Projects:
    """Every project file read, by path, kept while its (inode, mtime, size) is unchanged."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._read: dict[Path, Project] = {}
        self._clock = clock
        self._recent: dict[Path, tuple[float, Project | None]] = {}  # by script: when looked, what was found

    def recent(self, script: Path) -> Project | None:
        """`of(script)` as it was at most `RECENT_S` ago: for the fast path of cached answers, which
        may not walk up the directories on every call; OSError as `of`."""
        now = self._clock()
        known = self._recent.get(script)
        if known is not None and now - known[0] < RECENT_S:
            return known[1]
        project = self.of(script)
        if len(self._recent) > 1024:
            self._recent.clear()  # bounded, as `_read`
        self._recent[script] = (now, project)
        return project

    def of(self, script: Path) -> Project | None:
        """`script`'s project (None: no project file), read again only once changed."""
        file = find(script)
        if file is None:
            return None
        try:
            info = os.lstat(file)
        except OSError as err:
            return Project(file, (0, 0, 0), {}, f"project file {file} cannot be read ({err.strerror})")
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        known = self._read.get(file)
        if known is not None and known.stamp == stamp:
            return known
        project = self._load(file, info, stamp)
        if len(self._read) > 1024:
            self._read.clear()  # bounded: a daemon serving more projects than that reads them again
        self._read[file] = project
        return project

    def settings_for(self, script: Path, settings: Settings) -> tuple[Settings, Project | None]:
        """The settings for `script`: `settings` with its project file's over them; ProjectError if refused."""
        project = self.of(script)
        return (settings if project is None else project.apply(settings)), project

    @staticmethod
    def _load(file: Path, info: os.stat_result, stamp: tuple[int, int, int]) -> Project:
        unsafe = why_unsafe(file, info)
        if unsafe:
            return Project(file, stamp, {}, unsafe)
        try:
            fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as err:
            return Project(file, stamp, {}, f"project file {file} cannot be read ({err.strerror})")
        try:
            opened = os.fstat(fd)
            unsafe = why_unsafe(file, opened)  # what was opened, not what was looked at
            if unsafe:
                return Project(file, stamp, {}, unsafe)
            if opened.st_size > 1 << 20:
                return Project(file, stamp, {}, f"project file {file} is over 1 MB; a project file is a few lines")
            with os.fdopen(os.dup(fd), "rb") as handle:
                data = handle.read(1 << 20)
        finally:
            os.close(fd)
        return read(file, stamp, data)


def why_unsafe(file: Path, info: os.stat_result) -> str:
    """Why the daemon will not read the project file `file` ("" if it will)."""
    fix = "; it names a program the daemon runs, so it must be yours alone"
    if stat.S_ISLNK(info.st_mode):
        return f"project file {file} is a symbolic link, so it was ignored: put the file itself there{fix}"
    if not stat.S_ISREG(info.st_mode):
        return f"project file {file} is not a regular file, so it was ignored{fix}"
    if info.st_uid != os.getuid():
        return (f"project file {file} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}), so it was "
                f"ignored{fix}")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"project file {file} is writable by others (mode {stat.S_IMODE(info.st_mode):04o}), so it was "
                f"ignored: chmod go-w {file}{fix}")
    return ""


__all__ = ["PER_PROJECT", "PROJECT_NAME", "Project", "ProjectError", "Projects", "find", "read"]
