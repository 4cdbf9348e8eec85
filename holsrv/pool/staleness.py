"""Why an answer about a script may be stale: the one place that knows every
such reason, one sentence each.

An ancestor rebuilt after the server loaded it (being replaced in the
background, or, without room for that, to restart: `replacement`), a build
a blocked compile was missing whose retry is pending (`unblocking`), a
Holmake running where its theories are built (`builds`).

Asked on every answer, so a server found with nothing to say is remembered
(`_Clean`) until something it was judged on may have changed: its text, the
ancestors it loaded, or the ancestors' build times (`BuildTimes.serial`, which
inotify moves on the moment a build file is written).  The rest is looked at
directly on each call, in a few lookups: a Holmake running, a replacement or
retry under way, a blocked compile.  A server with something to say is asked
again each time (its sentences may carry times, and such answers are rare).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from holsrv.disk import ancestors
from holsrv.pool.replacement import Replacer
from holsrv.pool.unblocking import Unblocker
from holsrv.process.builds import Builds
from holsrv.server.session import Session
from holsrv.verdict.filestate import Phase


@dataclass(eq=False)
class _Clean:
    """What a server with no staleness reason was judged on."""

    path: Path
    parent: Path  # kept: its text is made once, not on every call
    text: str  # the server's text: its ancestors
    data: bytes | None
    loaded: int  # the generation of what it loaded (`ancestors.Watch`)
    serial: int  # of its ancestors' build times (`BuildTimes.serial`)


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
        self._clean: weakref.WeakKeyDictionary[Session, _Clean] = weakref.WeakKeyDictionary()

    def reasons(self, path: Path, session: Session | None = None) -> list[str]:
        """Why answers about the script `path` (from `session`, default its current server) may be stale."""
        current = session or self._current(path)
        if current is None or not self._judged_alone(path, current):
            return self._reasons(path, session)
        clean = self._clean.get(current)
        if clean is not None and self._still(clean, path, current):
            return []
        reasons = self._reasons(path, session)
        serial = ancestors.shared.serial(path.parent) if not reasons else None
        if serial is not None:  # after the reasons: a build seen meanwhile leaves nothing kept
            self._clean[current] = _Clean(path, path.parent, current.file.text, current.data,
                                          current.ancestors.generation, serial)
        return reasons

    def fresh(self, path: Path, session: Session) -> bool:
        """No answer from `session` about `path` may be stale, and none is being replaced
        (whose answers say so: `Pool.rebuilt_reasons`)."""
        return path not in self._replacer.running and not self.reasons(path, session)

    def _judged_alone(self, path: Path, session: Session) -> bool:
        """Whether what `session` has (text, loaded ancestors, their builds) is all its reasons
        depend on: no Holmake running, no replacement or retry under way, not blocked."""
        return (not self._builds.running and path not in self._replacer.running
                and session not in self._replacer.retiring and session.phase != Phase.BLOCKED
                and not self._unblocker.pending(session))

    @staticmethod
    def _still(clean: _Clean, path: Path, session: Session) -> bool:
        return (clean.text is session.file.text and clean.data is session.data
                and clean.loaded == session.ancestors.generation and (clean.path is path or clean.path == path)
                and ancestors.shared.serial(clean.parent) == clean.serial)

    def _reasons(self, path: Path, session: Session | None) -> list[str]:
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
