"""What the pool remembers about each file across its servers: how the last
one ended, fast deaths and the restart backoff they earn, a heap cap set by
`restart --max-heap-mb`, and how often the file's server was restarted.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from holsrv.config.settings import Settings
from holsrv.disk.files import content_hash
from holsrv.errors import ServerDied
from holsrv.server.session import Session

log = logging.getLogger(__name__)

# A server that dies sooner than this after starting counts as a fast death.
FAST_DEATH_S = 30.0


@dataclass
class FileHistory:
    """What the pool remembers about a file across its sessions."""

    max_heap_mb: int | None = None
    fast_deaths: int = 0
    retry_at: float = 0.0
    last_exit: str = ""
    last_tail: str = ""
    restarts: int = 0
    # The content hash of the text the last server died on: a different text
    # (the user fixed the proof that crashed it) restarts at once.
    died_on: str = ""


class History:
    """Every file's `FileHistory`, and the backoff decisions made from it."""

    def __init__(self, settings: Settings, clock: Callable[[], float]) -> None:
        self.settings = settings
        self.clock = clock
        self._files: dict[Path, FileHistory] = {}
        self.restarted = 0  # every file's restarts together, for the metrics

    def of(self, path: Path) -> FileHistory:
        return self._files.setdefault(path, FileHistory())

    def check(self, path: Path, content: str) -> None:
        """Refuse (`ServerDied`) to start a server for `path` while its backoff lasts, unless
        `content`, the hash of the text about to be sent, is not the one the last server died on."""
        history = self.of(path)
        if content and history.died_on and content != history.died_on and history.retry_at:
            log.info("%s changed since its server died: restarting without the backoff", path)
            history.fast_deaths, history.retry_at = 0, 0.0
        wait = history.retry_at - self.clock()
        if wait > 0:
            raise ServerDied(
                f"the HOL server for {path.name} died {history.fast_deaths} times in a row "
                f"soon after starting ({history.last_exit}); not restarting for another "
                f"{math.ceil(wait)}s. Read the stderr tail below and fix the cause: a changed file restarts at once.",
                detail=history.last_tail,
            )

    def heap_mb(self, path: Path, default: int | None = None) -> int:
        """The heap cap for `path`'s next server: the one `restart` was given, else `default` (its
        project's), else the daemon's."""
        history = self.of(path)
        if history.max_heap_mb is not None:
            return history.max_heap_mb
        return self.settings.max_heap_mb if default is None else default

    def started(self, path: Path, restarted: bool) -> None:
        self.of(path).restarts += restarted
        self.restarted += restarted

    def exited(self, session: Session) -> None:
        """`session`'s process has exited: a death is remembered, and a fast one backs off."""
        if not session.dead:
            return
        history = self.of(session.path)
        history.last_exit, history.last_tail = session.exit_reason, session.tail()
        history.died_on = content_hash(session.data) if session.data is not None else ""
        if self.clock() - session.started_at < FAST_DEATH_S:
            history.fast_deaths += 1
            # The first death restarts at once; repeats back off exponentially.
            if history.fast_deaths > 1:
                delay = min(
                    self.settings.restart_backoff_max_s,
                    self.settings.restart_backoff_s * 2 ** (history.fast_deaths - 2),
                )
                history.retry_at = self.clock() + delay
        else:
            history.fast_deaths = 0

    def forgive(self, path: Path, max_heap_mb: int | None) -> None:
        """A restart was asked for: no backoff, and the heap cap given, if any, from now on."""
        history = self.of(path)
        if max_heap_mb is not None:
            history.max_heap_mb = max_heap_mb
        history.fast_deaths, history.retry_at = 0, 0.0

    def last_words(self, path: Path) -> tuple[str, str]:
        """(how the file's last server died, the tail of its stderr); empty if none died."""
        history = self._files.get(path)
        return (history.last_exit, history.last_tail) if history is not None else ("", "")

    def export(self) -> dict[str, dict]:
        """Every file's history, as plain data for a successor daemon (`adopt`)."""
        return {str(path): msgspec.to_builtins(history) for path, history in self._files.items()}

    def adopt(self, files: dict[str, dict]) -> None:
        """Go on from a predecessor daemon's `export` (times are monotonic: they hold across `exec`)."""
        for path, history in files.items():
            self._files[Path(path)] = msgspec.convert(history, FileHistory)
            self.restarted += self._files[Path(path)].restarts

    def restarts(self, path: Path) -> int:
        history = self._files.get(path)
        return history.restarts if history else 0


def restart_note(old: Session) -> str:
    """What the call that starts a file's server again is told about the previous one."""
    if old.dead:
        return f"started a new HOL server: the previous one died ({old.exit_reason})"
    return f"started a new HOL server: the previous one was stopped ({old.stop_reason or 'by the daemon'})"
