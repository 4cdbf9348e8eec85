"""Who keeps a file's server: the calls waiting on it, and the holds that keep it open.

A call's lease counts in `Session.waiting` (status's waiting calls; a
replaced server is stopped once none waits on it).  A hold is not a call:
an editor's open document (`holctl lsp`) keeps its file's server for as
long as it is open, as `hol lsp` would live for it.  A hold keeps the server
from being stopped for idleness or for room (`held`), but a planned
replacement does not wait for it to end: at the switch each holder of the
replaced server is told the new one at once (`switched`), lets the old one
go and takes the new one.  The pool's, not the server's: it is about a
server's life (idleness, room, a switch); the text the document puts on the
server is `server.buffers`'s.
"""

from __future__ import annotations

from collections.abc import Callable

from holsrv.server.session import Session

# What a holder is told at a planned switch: the server that replaces the one it holds.
Moved = Callable[[Session], None]


class Holds:
    """The holds on each server, with what each holder is told at a switch."""

    def __init__(self) -> None:
        self._holders: dict[Session, list[Moved]] = {}

    def take(self, session: Session, moved: Moved | None) -> Callable[[], None]:
        """A call waiting on `session` (`moved` None), or a hold told `moved(new)` at a
        planned switch; returns what lets it go."""
        if moved is None:
            session.waiting += 1

            def done() -> None:
                session.waiting -= 1

            return done
        holders = self._holders.setdefault(session, [])
        holders.append(moved)

        def let_go() -> None:
            holders.remove(moved)
            if not holders and self._holders.get(session) is holders:
                del self._holders[session]

        return let_go

    def held(self, session: Session) -> bool:
        """Whether a hold (an editor's open document) keeps `session`."""
        return session in self._holders

    def switched(self, old: Session, new: Session) -> None:
        """`new` replaces `old` as its file's server: tell each holder of `old`."""
        for moved in list(self._holders.get(old, ())):
            moved(new)
