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


def rebuilt_since(text: str, script_dir: Path, since: float) -> list[str]:
    """Ancestor theories whose built files are newer than `since` (a wall-clock time)."""
    rebuilt = []
    for name in ancestors(text):
        for directory in include_dirs(script_dir):
            if any(_mtime(f) > since for f in _built_files(directory, name)):
                rebuilt.append(f"{name}Theory")
                break
    return rebuilt


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
