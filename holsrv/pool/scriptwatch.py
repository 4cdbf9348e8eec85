"""Syncing a script to its server when it is written, with no call.

Every script with a live server is watched (inotify, one watch per
directory; else the stat poll, `disk/statpoll.py`, of the scripts alone).
When it is written, in place or by rename, the daemon reads it and sends HOL
the new text once the writes have paused for `sync_debounce_s` (each write
restarts the wait: a file written every few milliseconds costs one check per
quiet moment), so the next call finds the check running or done.  The sync
is the one calls make (`Session.sync`, read in slices).  Whether the disk's
text may go to a server now is one predicate, `may_send_disk_text`: not
while the server starts or before a call first opened the file, and not
while a trial holds it (the sync waits for the trial to end, bounded).
Without any watch nothing is watched and calls sync as they always do: the
per-call freshness check stays the truth.

`next_write` lets a call wait for a script's next write (`diagnostics`
with `changed_since`, what `holctl watch` loops on) at no cost meanwhile.
A sync leaves what the next call needs ready: the text's facts, the read
itself (`vouch`: a file written under two seconds ago is otherwise read
again by every call), and, through `diagnosticsahead`, the answer once HOL is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from holsrv.disk import files, watching
from holsrv.errors import HolsrvError
from holsrv.pool.diagnosticsahead import Ahead, Compute
from holsrv.server.session import Session
from holsrv.text import stepping

log = logging.getLogger(__name__)


class ScriptWatch:
    """The watch on the directories of scripts with a live server, and their debounced syncs."""

    def __init__(
        self,
        current: Callable[[Path], Session | None],
        synced: Callable[[Session, files.Script], Awaitable[None]],
        debounce_s: float,
        trial_wait_s: float = 30.0,
        *,
        editor_holds: Callable[[Path], bool],
        ahead: Compute | None = None,
    ) -> None:
        """`editor_holds`: whether an editor (`holctl lsp`) holds a file (its buffer, not the disk, is then
        the server's text); `ahead`: the answer computed once a write is synced (`diagnosticsahead`)."""
        self._current = current  # the file's server, if any
        self._synced = synced  # what a call does after its sync (the pool's `synced`)
        self._debounce_s = debounce_s
        self._trial_wait_s = trial_wait_s  # how long a sync waits for a trial to end
        # None: not set up yet, or no watch at all (calls still sync).
        self._watch: watching.DirWatch | None = None
        self._unavailable = False
        self._scripts: dict[Path, set[str]] = {}  # directory -> names of scripts watched in it
        self._timers: dict[Path, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task] = set()
        self._syncing: set[Path] = set()  # files whose sync is under way
        self._again: set[Path] = set()  # ... and written again meanwhile
        self._written: dict[Path, asyncio.Event] = {}  # set once a file's next write was dealt with
        self._reads: dict[str, files.Vouched] = {}  # the last read of each script, while not written since
        self._writes: dict[Path, int] = {}  # writes seen per script, to tell a write during a read
        self.ahead = Ahead(ahead)  # once a write is synced: its answer, computed in the background
        self.editor_holds = editor_holds
        self.syncs = 0  # syncs made on a write (for tests and the benchmark)

    def watch(self, path: Path) -> None:
        """Watch the script `path` (its directory, if not watched already)."""
        if self._watch is None:
            if self._unavailable:
                return
            self._watch = watching.create(self._watched_script)
            if self._watch is None:
                self._unavailable = True
                log.info("no file watching: scripts are synced when a call comes, not when written")
                return
            asyncio.get_running_loop().add_reader(self._watch.fd, self._readable)
        names = self._scripts.get(path.parent)
        if names is None:
            # Named first: a stat poll's first look takes the script in as it is, not as a write.
            names = self._scripts[path.parent] = {path.name}
            if not self._watch.watch(path.parent):
                del self._scripts[path.parent]
                return  # refused (too many watches): calls still sync
        names.add(path.name)

    def _watched_script(self, directory: Path, name: str) -> bool:
        """Whether `name` in `directory` is a script watched (what a stat poll looks at; any thread)."""
        return name in self._scripts.get(directory, ())

    def watches(self, path: Path) -> bool:
        """Whether a write to the script `path` is noticed now."""
        return self._watch is not None and path.name in self._scripts.get(path.parent, ())

    def next_write(self, path: Path) -> asyncio.Event:
        """Set once `path`'s next write has been synced (or could not be: a trial ran on, the
        server is gone), or `path` is no longer watched.  Never set if it is not watched."""
        if not self.watches(path):
            return asyncio.Event()
        return self._written.setdefault(path, asyncio.Event())

    def _wake(self, path: Path) -> None:
        event = self._written.pop(path, None)
        if event is not None:
            event.set()

    def may_send_disk_text(self, session: Session) -> bool:
        """Whether the file's text on disk may be sent to `session`'s server now, with no call.

        Not before a call first opened the file (the open is the call's), not
        while the server starts or after it ended, and not while a trial holds
        it (the trial's text is not overwritten; its end sends the disk's text),
        not while an editor holds the file (its buffer is the server's text).
        This is the one place such a reason goes.
        """
        return (session.alive and not session.starting and session.data is not None and not session.trials.trial
                and not self.editor_holds(session.path))

    def vouch(self, file: str) -> files.Vouched | None:
        """This watch's last read of the script `file` (its resolved path), if no write to it has been
        seen since; writes already signalled but not yet taken in are taken in first.  Only a watch
        that sees every write vouches (a stat poll misses a rewrite that keeps the stat)."""
        if self._watch is None or not self._watch.sees_every_write or file not in self._reads:
            return None
        self._readable()  # one poll(2) when nothing is pending
        return self._reads.get(file)

    def watching(self) -> set[Path]:
        """The scripts watched now (for status and tests)."""
        return {d / n for d, names in self._scripts.items() for n in names}

    def forget(self, path: Path) -> None:
        """`path` has no live server any more: stop watching it (and its directory, if it was the last)."""
        timer = self._timers.pop(path, None)
        if timer is not None:
            timer.cancel()
        self._wake(path)  # a call waiting for its next write looks again
        self._reads.pop(str(path), None)
        self._writes.pop(path, None)
        self.ahead.cancel(path)
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
            self._reads.pop(str(path), None)
            self._writes[path] = self._writes.get(path, 0) + 1
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
                await self.sync_disk(path)
                if path not in self._again:
                    return
        finally:
            self._syncing.discard(path)
            self._again.discard(path)
            self._wake(path)

    async def sync_disk(self, path: Path) -> None:
        """Give the file's server the disk's text, as a call would (`Pool.synced`, the answer
        computed ahead), if it may have it now (`may_send_disk_text`) and it differs."""
        session = self._current(path)
        if session is None:
            return  # gone: the next call starts one
        try:
            # A trial's text is not overwritten: wait (bounded) for it to end.
            # Its end sends the disk's text as it is then, so the read below
            # usually finds that text already there.
            async with session.trials.use(self._trial_wait_s, path.name):
                if not self.may_send_disk_text(session):
                    return  # not yet opened by a call, starting, or gone: the next call syncs
                script = await self._read(path)
                if script.data == session.data:  # written with the bytes HOL has (or a call synced it first)
                    return
                # Shielded, as a call's sync is: the text is recorded whole or not sent.
                await asyncio.shield(session.sync(script.data, script.text, script.hash))
                self.syncs += 1
                await self._synced(session, script)
                self.ahead.start(session, script)
        except HolsrvError as e:  # gone, unreadable, a trial that ran on: the next call says so
            log.debug("no sync on write for %s: %s", path, e)
        except Exception:  # a background task: log it, the next call syncs anyway
            log.exception("syncing %s on write failed", path)

    async def _read(self, path: Path) -> files.Script:
        """Read the script, and keep the read for `vouch` unless a write came while it was read."""
        writes = self._writes.get(path, 0)
        identity = files.identity(str(path))  # before the read: a write during it shows in the stat
        script = await stepping.sliced(files.read_steps(str(path)))
        if identity is not None and self._writes.get(path, 0) == writes and self.watches(path):
            self._reads[str(path)] = files.Vouched(identity, script)
        return script

    async def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for path in list(self._written):
            self._wake(path)
        self.ahead.close()
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
