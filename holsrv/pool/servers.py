"""The pool as the modules beside it see it: `replacement` and `unblocking`
read and change the servers by file through this, and nothing else.

Why a `Protocol` declared below all three, rather than callables handed to
each: the replacer needs a dozen of the pool's powers (its map, starting and
stopping servers, room, the clock), and the pool owns a replacer; a protocol
names those powers once, lets mypy check that `pool.Pool` has them, and keeps
every import pointing down (pool → replacement → servers), with no lazy or
`TYPE_CHECKING` import of the pool anywhere below it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from holsrv.config.settings import Settings
from holsrv.pool.holds import Holds
from holsrv.process.builds import Builds
from holsrv.server.buffers import Buffers
from holsrv.server.session import Session


class Servers(Protocol):
    """The servers by file, with the powers to start, install and stop them (`pool.Pool`)."""

    settings: Settings
    builds: Builds  # the daemon's own Holmake runs
    clock: Callable[[], float]
    closing: bool  # the daemon is shutting down: no new servers
    texts: Buffers  # the text a sync with no call sends: an editor's buffer, else the disk's
    holds: Holds  # editors' open documents, told the new server at a switch

    def current(self, path: Path) -> Session | None:
        """The file's server in the map (alive or not), if any."""
        ...

    def serving(self) -> list[Session]:
        """Every file's server in the map, least recently used first."""
        ...

    def live(self) -> list[Session]:
        """Every running server, the map's and those beside it."""
        ...

    def make_room_beside(self, old: Session) -> str:
        """Room for a second server for `old`'s file, idle servers stopped for it
        (least recently used first); why there is none ("" once there is)."""
        ...

    def spawn(self, path: Path, heap_mb: int, hol: str, like: Session | None = None) -> Session:
        """A new server for `path`, starting in the background, outside the map."""
        ...

    def install(self, path: Path, session: Session) -> None:
        """Make `session` the file's server, in the old one's place in the LRU order."""
        ...

    async def stop_session(self, session: Session, reason: str = "stopped by the daemon") -> None: ...

    def stop_later(self, session: Session, reason: str, name: str | None = None) -> None:
        """Count `session` as gone at once and stop it in a task of its own."""
        ...
