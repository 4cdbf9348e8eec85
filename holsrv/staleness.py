"""Why an answer about a script may be stale: the one place that knows every
such reason, one sentence each.

An ancestor rebuilt after the server loaded it (being replaced in the
background, or, without room for that, to restart: `replacement`), a build
a blocked compile was missing whose retry is pending (`unblocking`), a
Holmake running where its theories are built (`builds`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from holsrv import ancestors
from holsrv.builds import Builds
from holsrv.replacement import Replacer
from holsrv.session import Session
from holsrv.unblocking import Unblocker


class Staleness:
    """Asks each of them about a file's server and puts the answers together."""

    def __init__(
        self,
        replacer: Replacer,
        unblocker: Unblocker,
        builds: Builds,
        clock: Callable[[], float],
        current: Callable[[Path], Session | None],
    ) -> None:
        self._replacer, self._unblocker, self._builds = replacer, unblocker, builds
        self._clock = clock
        self._current = current  # the file's server in the pool's map

    def reasons(self, path: Path, session: Session | None = None) -> list[str]:
        """Why answers about the script `path` (from `session`, default its current server) may be stale."""
        reasons = self._replacer.stale_reasons(path, session)
        current = session or self._current(path)
        if current is not None:
            reasons += self._unblocker.reasons(current)
        if self._builds.running:  # the Holmakefile is read only while some Holmake runs
            for build in self._builds.running_in(ancestors.include_dirs(path.parent)):
                reasons.append(
                    f"Holmake running in {build.directory} (for {self._clock() - build.started:.0f}s): theories "
                    "this file loads may change under it; ask again when it has finished"
                )
        return reasons
