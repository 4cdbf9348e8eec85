"""Noticing, with no call, that an ancestor of a running server was built:
inotify on the ancestors' build directories (else the stat poll,
`disk/statpoll.py`), read when the loop says it is readable, and one timer
that looks at every server again once the build has gone quiet.

What is done about it is its owner's business (the pool's: a replacement
for a server that loaded the old build, a retried compile for one that
blocked); this only says when to look.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from holsrv.disk import ancestors, watching
from holsrv.server.session import Session

log = logging.getLogger(__name__)

# Holmake writes a theory's files one after another, and a build of several
# theories takes a while: a server that loads (or retries) in the middle
# would load half of it.  Builds count once left alone this long.
BUILD_QUIET_S = 1.0


class BuildWatch:
    """The watch on the ancestors' build directories, and the timer that follows a change."""

    def __init__(self, servers: Callable[[], Iterable[Session]], look: Callable[[Session], None]) -> None:
        self._servers = servers  # the files' servers
        self._look = look  # what to do with each one once a build is quiet
        # None: not set up yet, or no watch at all (calls still notice).
        self._watch: watching.DirWatch | None = None
        self._settle: asyncio.TimerHandle | None = None

    def watch(self, script_dir: Path) -> None:
        """Watch where the ancestors of `script_dir`'s scripts are built."""
        if self._watch is None:
            self._watch = watching.create(watching.build_file)
            if self._watch is None:
                return
            asyncio.get_running_loop().add_reader(self._watch.fd, self._readable)
        for place in ancestors.shared.places(script_dir):
            self._watch.watch(place)

    def _readable(self) -> None:
        assert self._watch is not None
        if self._watch.changed() != set():  # a change, or an overflow (anything may have changed)
            self.recheck_in(BUILD_QUIET_S)  # once the build has gone quiet

    def recheck_in(self, delay: float) -> None:
        """Look at every server's ancestors again in `delay` seconds (one timer: a later call moves it)."""
        if self._settle is not None:
            self._settle.cancel()
        self._settle = asyncio.get_running_loop().call_later(delay, self._recheck)

    def _recheck(self) -> None:
        self._settle = None
        for session in list(self._servers()):
            if session.alive and not session.starting and session.data is not None:
                try:
                    self._look(session)
                except Exception:  # a loop callback: log it, the next call notices again
                    log.exception("checking the ancestors of %s failed", session.path)

    def close(self) -> None:
        if self._settle is not None:
            self._settle.cancel()
        if self._watch is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                asyncio.get_running_loop().remove_reader(self._watch.fd)
            self._watch.close()
            self._watch = None
