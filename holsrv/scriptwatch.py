"""Syncing a script to its server when it is written, with no call.

Every script with a live server is watched (inotify, one watch per
directory).  When it is written, in place or by rename, the daemon reads it
and sends HOL the new text once the writes have paused for
`sync_debounce_s` (each write restarts the wait: a file written every few
milliseconds costs one check per quiet moment), so the next call finds the
check running or done.  The sync is the one calls make (`Session.sync`,
read in slices); it is skipped while a trial holds the server, while the
server starts and before a call first opened the file.  Without inotify
nothing is watched and calls sync as they always do: the per-call
freshness check stays the truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from holsrv import files, stepping, textinfo
from holsrv.errors import HolsrvError
from holsrv.inotify import Watcher
from holsrv.session import Session

log = logging.getLogger(__name__)


class ScriptWatch:
    """The watch on the directories of scripts with a live server, and their debounced syncs."""

    def __init__(
        self,
        current: Callable[[Path], Session | None],
        synced: Callable[[Session, files.Script], Awaitable[None]],
        debounce_s: float,
    ) -> None:
        self._current = current  # the file's server, if any
        self._synced = synced  # what a call does after its sync (the pool's `synced`)
        self._debounce_s = debounce_s
        # None: not set up yet, or no inotify (calls still sync).
        self._watch: Watcher | None = None
        self._unavailable = False
        self._scripts: dict[Path, set[str]] = {}  # directory -> names of scripts watched in it
        self._timers: dict[Path, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task] = set()
        self._syncing: set[Path] = set()  # files whose sync is under way
        self._again: set[Path] = set()  # ... and written again meanwhile
        self.syncs = 0  # syncs made on a write (for tests and the benchmark)

    def watch(self, path: Path) -> None:
        """Watch the script `path` (its directory, if not watched already)."""
        if self._watch is None:
            if self._unavailable:
                return
            self._watch = Watcher.create()
            if self._watch is None:
                self._unavailable = True
                log.info("no inotify: scripts are synced when a call comes, not when written")
                return
            asyncio.get_running_loop().add_reader(self._watch.fd, self._readable)
        names = self._scripts.get(path.parent)
        if names is None:
            if not self._watch.watch(path.parent):
                return  # refused (too many watches): calls still sync
            names = self._scripts[path.parent] = set()
        names.add(path.name)

    def watching(self) -> set[Path]:
        """The scripts watched now (for status and tests)."""
        return {d / n for d, names in self._scripts.items() for n in names}

    def forget(self, path: Path) -> None:
        """`path` has no live server any more: stop watching it (and its directory, if it was the last)."""
        timer = self._timers.pop(path, None)
        if timer is not None:
            timer.cancel()
        names = self._scripts.get(path.parent)
        if names is None:
            return
        names.discard(path.name)
        if not names:
            del self._scripts[path.parent]
            if self._watch is not None:
                self._watch.unwatch(path.parent)

    def _readable(self) -> None:
        assert self._watch is not None
        written = self._watch.written()
        if written is None:  # an overflow: any script may have been written
            written = self.watching()
        loop = asyncio.get_running_loop()
        for path in written:
            if path.name not in self._scripts.get(path.parent, ()):
                continue
            timer = self._timers.pop(path, None)
            if timer is not None:
                timer.cancel()  # still being written: wait for the writes to pause
            self._timers[path] = loop.call_later(self._debounce_s, self._quiet, path)

    def _quiet(self, path: Path) -> None:
        self._timers.pop(path, None)
        if path in self._syncing:  # one sync of a file at a time, the newest text last
            self._again.add(path)
            return
        self._syncing.add(path)
        task = asyncio.get_running_loop().create_task(self._syncs(path), name=f"sync-on-write-{path.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _syncs(self, path: Path) -> None:
        try:
            while True:
                self._again.discard(path)
                await self._sync(path)
                if path not in self._again:
                    return
        finally:
            self._syncing.discard(path)
            self._again.discard(path)

    async def _sync(self, path: Path) -> None:
        session = self._current(path)
        # Not yet opened by a call, starting, or gone: the next call syncs.
        if session is None or not session.alive or session.starting or session.data is None:
            return
        if session.trials.trial:  # the trial's text is not overwritten; the next call after it syncs
            return
        try:
            script = await stepping.sliced(files.read_steps(str(path)))
            if script.data == session.data:  # written with the bytes HOL has (or a call synced it first)
                return
            await textinfo.prepare(script.text)
            async with session.trials.use(0.0, path.name):  # refused if a trial began meanwhile
                if not session.alive:
                    return
                # Shielded, as a call's sync is: the text is recorded whole or not sent.
                await asyncio.shield(session.sync(script.data, script.text, script.hash))
                self.syncs += 1
                await self._synced(session, script)
        except HolsrvError as e:  # gone, unreadable, a trial: the next call says so
            log.debug("no sync on write for %s: %s", path, e)
        except Exception:  # a background task: log it, the next call syncs anyway
            log.exception("syncing %s on write failed", path)

    async def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._watch is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                asyncio.get_running_loop().remove_reader(self._watch.fd)
            self._watch.close()
            self._watch = None
