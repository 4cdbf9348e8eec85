"""Which built ancestor theories changed after a HOL server loaded them.

A server loads each ancestor at most once (PROTOCOL.md §1.3): a theory
rebuilt with Holmake afterwards does not reach it until it restarts.  The
daemon looks where Holmake puts theories (the script's directory and its
Holmakefile INCLUDES, each with its .hol/objs) and compares file times with
the server's start.
"""

from __future__ import annotations

import re
from pathlib import Path

_ANCESTORS = re.compile(r"^Ancestors\b(.*?)(?=^\S|^\s*$|\Z)", re.MULTILINE | re.DOTALL)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_']*")
_INCLUDES = re.compile(r"^\s*INCLUDES\s*[+:]?=(.*)$", re.MULTILINE)


def ancestors(text: str) -> list[str]:
    """The theory names in the script's `Ancestors` header (attributes dropped)."""
    match = _ANCESTORS.search(text)
    if match is None:
        return []
    words = re.sub(r"\[[^\]]*\]", " ", match.group(1))
    return list(dict.fromkeys(_NAME.findall(words)))


def include_dirs(script_dir: Path) -> list[Path]:
    """The script's directory and the INCLUDES of its Holmakefile that exist."""
    dirs = [script_dir]
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
    dirs = include_dirs(script_dir)
    return {
        name: max((_mtime(f) for directory in dirs for f in _built_files(directory, name)), default=0.0)
        for name in ancestors(text)
    }


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


def _built_files(directory: Path, name: str) -> list[Path]:
    return [
        place / f"{name}Theory.{suffix}"
        for place in (directory / ".hol" / "objs", directory)
        for suffix in ("uo", "ui", "dat")
    ]


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
