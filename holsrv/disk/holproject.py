"""The directories of a `holproject.toml` project, as Holmake's project mode finds them.

As HOL's Holmake reads it (tools/Holmake/core/HMProject.sml): the nearest
`holproject.toml` at or above the script's directory is the project root.
Every directory under the root is part of the project, except `exclude`d
ones, VCS and `.hol` directories, and nested projects (a directory with its
own holproject.toml); so is every directory under each `[projects.<id>]
path = …` (also from `holproject.local.toml`), and each of
`external_includes` (where `$(HOLDIR)` is left alone, as in INCLUDES).
"""

from __future__ import annotations

import logging
import os
import tomllib
from pathlib import Path

log = logging.getLogger(__name__)

PROJECT_FILE, LOCAL_FILE = "holproject.toml", "holproject.local.toml"
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".hol", ".holbuild", "node_modules"})
# A project tree is walked when its build times are first read (and after a
# change): this bounds that walk and the watches it sets.
MAX_PROJECT_DIRS = 256


def project_root(script_dir: Path) -> Path | None:
    """The nearest directory at or above `script_dir` holding a holproject.toml."""
    for directory in (script_dir, *script_dir.parents):
        if (directory / PROJECT_FILE).is_file():
            return directory
    return None


def dirs(script_dir: Path) -> list[Path]:
    """The directories of the script's holproject.toml project ([] outside one),
    at most MAX_PROJECT_DIRS of them."""
    root = project_root(script_dir)
    if root is None:
        return []
    manifest = _toml(root / PROJECT_FILE)
    if manifest is None:
        return []
    if manifest.get("holmake", True) is False:  # project mode off: only external_includes count
        return _external_includes(root, manifest)
    local = _toml(root / LOCAL_FILE) or {}
    trees = [(root, set(_paths(root, manifest.get("exclude"))))]
    for table in (local.get("projects"), manifest.get("projects")):  # local first: it overrides
        for entry in (table or {}).values() if isinstance(table, dict) else ():
            if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                path = (root / entry["path"]).resolve()
                if path not in (tree for tree, _ in trees):
                    trees.append((path, set(_paths(path, entry.get("exclude")))))
    found: list[Path] = []
    for tree, excluded in trees:
        _walk(tree, excluded, found)
    for include in _external_includes(root, manifest):
        if include not in found and len(found) < MAX_PROJECT_DIRS:
            found.append(include)
    return found


def _walk(tree: Path, excluded: set[Path], found: list[Path]) -> None:
    pending = [tree]
    while pending and len(found) < MAX_PROJECT_DIRS:
        directory = pending.pop()
        if directory in excluded or directory in found:
            continue
        found.append(directory)
        try:
            with os.scandir(directory) as entries:
                children = sorted(e.path for e in entries if e.is_dir() and e.name not in _SKIP_DIRS)
        except OSError:
            continue
        # Depth first, in name order; a nested project is a project of its own.
        pending += [Path(c) for c in reversed(children) if not os.path.isfile(os.path.join(c, PROJECT_FILE))]
    if pending:
        log.info("the holproject.toml project at %s has more than %d directories: ancestors are "
                 "looked for in the first %d only", tree, MAX_PROJECT_DIRS, MAX_PROJECT_DIRS)


def _external_includes(root: Path, manifest: dict) -> list[Path]:
    return [p for p in _paths(root, manifest.get("external_includes")) if p.is_dir()]


def _paths(base: Path, value: object) -> list[Path]:
    """A manifest's list of paths, relative to `base` (anything else in it ignored)."""
    words = [w for w in value if isinstance(w, str) and "$" not in w] if isinstance(value, list) else []
    return [(base / w).resolve() for w in words]


def _toml(path: Path) -> dict | None:
    """The manifest at `path` ({} if there is none), or None if it cannot be read."""
    try:
        with path.open("rb") as manifest:
            return tomllib.load(manifest)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as err:
        # Holmake refuses a broken manifest, and the server's compile says so.
        log.info("cannot read %s (%s): its project's directories are not searched", path, err)
        return None
