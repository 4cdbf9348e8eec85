"""Which HOL build a server runs, when its `serverInfo` does not say.

HOL reports the git hash its binary was built from in `serverInfo.version`,
or `"unknown"` when the tree was not a git checkout (the recorded servers of
the second set, docs/protocol.md#initialize-result); an older server sends no `serverInfo` at
all.  Then the build is named by what can be seen from outside: the HOL tree
(HOLDIR), the `hol` executable's path and date, and `git describe` of the
tree when it is a checkout after all (the run-time tree can differ from the
build tree).  `git describe` is a process: it is bounded, and run once per
`hol` (and that file's mtime, so a rebuild is seen), not once per status.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

# serverInfo.version values that name no build.
UNKNOWN = ("", "unknown")
GIT_TIMEOUT_S = 2.0
MAX_KEPT = 32  # distinct `hol`s remembered; a daemon runs one or two


def said(version: str) -> bool:
    """Whether HOL's own `serverInfo.version` names its build."""
    return version.strip() not in UNKNOWN


def describe(hol: str, holdir: str, timeout_s: float = GIT_TIMEOUT_S) -> str:
    """`HOLDIR …, hol … of YYYY-MM-DD, git …`: what names a build HOL did not name; blocking."""
    parts = [f"HOLDIR {holdir}"] if holdir else []
    real = os.path.realpath(hol)
    try:
        built = time.strftime("%Y-%m-%d", time.localtime(os.stat(real).st_mtime))
        parts.append(f"hol {real} of {built}")
    except OSError:
        parts.append(f"hol {real}")
    described = _git_describe(holdir or str(Path(real).parent.parent), timeout_s)
    if described:
        parts.append(f"git {described}")
    return ", ".join(parts)


def _git_describe(tree: str, timeout_s: float) -> str:
    """`git describe` of `tree` when it is a git checkout, "" otherwise or when git cannot say in time."""
    if not tree or not (Path(tree) / ".git").exists():
        return ""
    try:
        done = subprocess.run(
            ["git", "-C", tree, "describe", "--always", "--dirty", "--tags"],
            capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


class BuildNames:
    """`describe`'s answers, made once per `hol` (path and mtime) and HOL tree, off the event loop."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, int, str], str] = {}

    async def of(self, hol: str, holdir: str) -> str:
        try:
            stamp = os.stat(hol).st_mtime_ns
        except OSError:
            stamp = 0
        key = (os.path.realpath(hol), stamp, holdir)
        if key not in self._known:
            if len(self._known) >= MAX_KEPT:
                self._known.pop(next(iter(self._known)))
            self._known[key] = await asyncio.to_thread(describe, hol, holdir)
        return self._known[key]
