"""Replacing, in the background, a HOL server whose ancestors were rebuilt
(or that a trial left bloated: see `Replacer.shed`).

A server loads each ancestor theory once (docs/protocol.md#working-directory-heap-and-ancestors): after Holmake
rebuilds one, only a new server sees the new build.  Starting that server
the moment a call notices would make the agent wait on a cold start it did
not ask for, so the old server keeps answering, every answer marked stale
with the reason, while a successor starts beside it:

    noticed   a call synced the file and an ancestor was built after the
              server loaded it (`ancestors.Watch`)
    starting  a second server for the file, if `max_servers` and the memory
              budget hold both; otherwise the answer says why and advises
              restart, as before
    catching  it opens the file as it is on disk (each edit reaching the old
    up        server is forwarded to it too), compiles it, and checks the
              proofs the old one had finished
    switched  the pool's map points at it; the old server is stopped once no
              call waits on it any more

A successor that fails, or has not caught up within `replace_timeout_s`, is
stopped, and the answers go back to advising restart.

A server whose compile *blocked* on a missing ancestor loaded nothing, so a
build of that ancestor needs no successor: `unblocking` retries its compile
on the same server (`buildwatch` tells both when to look).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from holsrv.disk import ancestors, files
from holsrv.errors import HolsrvError
from holsrv.pool.buildwatch import BUILD_QUIET_S, BuildWatch
from holsrv.pool.servers import Servers
from holsrv.pool.successor import CannotTakeOver, Replacement, catch_up, forward
from holsrv.rpc import messages as m
from holsrv.server.session import Session
from holsrv.verdict.filestate import Phase

log = logging.getLogger(__name__)

MAX_REPLACED_KEPT = 64  # replaced servers whose answers' staleness is remembered


@dataclass
class _Refusal:
    """Why the server with id `server` is not being replaced."""

    server: int
    why: str
    # The builds a successor failed on: not tried again until they change.
    # None: no room, or the build still being written: tried on every call.
    built: dict[str, float] | None = None
    waiting: bool = False  # the build is still being written: it starts by itself
    # A theory between the file and a rebuilt ancestor, built against the old one: HOL
    # refuses to load it (`link_parents`), so its next build is what is missing.  By name,
    # with the newer ancestors it lags behind and its script (see `ancestors.Development`).
    late: dict[str, tuple[list[str], Path | None]] | None = None


def missing_build(development: ancestors.Development) -> str:
    """The builds of theories between a script and its rebuilt ancestors that a server needs
    before it can load them ("" when none is missing)."""
    late = development.out_of_date()
    return _missing_build({name: (newer, development.scripts.get(name)) for name, newer in late.items()})


def _missing_build(late: dict[str, tuple[list[str], Path | None]]) -> str:
    """The builds a fresh server waits for, and how to run each."""
    parts = []
    for name, (newer, script) in late.items():
        how = f": holmake {script}" if script is not None else " (holmake in its directory)"
        below = ", ".join(f"`{p}`" for p in newer)
        parts.append(f"`{name}` must be rebuilt against the new {below}{how}")
    return "; ".join(parts)


def _rebuilt_reason(rebuilt: list[str], refused: _Refusal | None) -> str:
    """What answers from a server that loaded the builds before `rebuilt` say, with no successor under way."""
    said = (f"{', '.join(rebuilt)} changed after this HOL server loaded it; HOL never reloads a theory, "
            "so these answers use the old one.")
    if refused is not None and refused.late:
        return (f"STALE: {said} {_missing_build(refused.late)} (holctl holmake FILE, or the holmake tool): "
                "HOL refuses to load a theory built against an older ancestor, so a fresh server would be "
                "BLOCKED until then. After that build this server is replaced in the background by itself.")
    if refused is not None and refused.waiting:
        return (f"STALE: {said} A fresh server starts in the background once the build has been left alone "
                f"for {BUILD_QUIET_S:.0f}s; ask again shortly.")
    why = f" It is not replaced in the background: {refused.why}." if refused is not None else ""
    return f"REBUILT: {said}{why} Call restart to use the new build."


class Replacer:
    """The pool's background replacements, and the servers they leave running
    beside its map: successors not yet switched to, and replaced ones still
    answering a call."""

    def __init__(self, pool: Servers, watch: BuildWatch) -> None:
        self.pool = pool  # only what `Servers` offers: the pool owns this, not the reverse
        self.watch = watch  # a rebuild starts a replacement with no call and no polling
        self.running: dict[Path, Replacement] = {}
        self.retiring: dict[Session, str] = {}  # replaced server -> what answers from it say
        self.switched = 0  # replacements done, for the metrics
        # Why a server is not being replaced (no room, its successor failed),
        # by file, with the id of the server it is about.
        self._refused: dict[Path, _Refusal] = {}
        # What answers from a replaced server say, by its pid, after it is gone from
        # `retiring` too: an answer it gave is stamped after the call let go of it.
        self._replaced: OrderedDict[int, str] = OrderedDict()

    def replaced_reason(self, pid: int) -> str:
        """Why an answer from the server with `pid` is stale because it was replaced ("" if it was not)."""
        return self._replaced.get(pid, "")

    def sessions(self) -> list[Session]:
        return [*(r.new for r in self.running.values()), *self.retiring]

    # -- what a call sees ------------------------------------------------------

    async def synced(self, session: Session, script: files.Script) -> None:
        """A call has synced `script` to `session`: note what the server has
        loaded, start its replacement if an ancestor was rebuilt since, and give
        a successor under way the same text."""
        rep = self.running.get(session.path)
        if rep is not None and rep.old is session:
            await forward(rep, script, self.pool.texts)
            return
        if self.pool.current(session.path) is session:  # not a successor, nor a replaced one
            self.consider(session)

    def consider(self, session: Session) -> None:
        """Start `session`'s replacement if an ancestor was rebuilt since it loaded them, and there is room."""
        path = session.path
        development = ancestors.development(session.file.text, path.parent)
        built = development.times
        self.watch.watch(path.parent)
        if session.phase == Phase.COMPLETED:
            session.ancestors.loaded(built)  # a pass got past preload: these are what it has
        rebuilt = session.ancestors.rebuilt(built)
        refused = self._refused.get(path)
        if not rebuilt or path in self.running:
            if not rebuilt:
                self._refused.pop(path, None)
            return
        if refused is not None and refused.server == session.id and refused.built == built:
            return  # a successor failed on these very builds: the agent has been told to restart
        newest = max(built.get(name.removesuffix("Theory"), 0.0) for name in rebuilt)
        if time.time() - newest < BUILD_QUIET_S:  # wall clock: file times are
            self._refused[path] = _Refusal(session.id, "the build is still being written", waiting=True)
            self.watch.recheck_in(BUILD_QUIET_S)
            return
        late = development.out_of_date()
        if late:  # looked at again on every call and once each build goes quiet
            self._refused[path] = _Refusal(session.id, "a theory between must be rebuilt first", late={
                name: (newer, development.scripts.get(name)) for name, newer in late.items()})
            return
        why = self._no_room(session)
        if why:
            self._refused[path] = _Refusal(session.id, why)
            return
        self._start(session, rebuilt, built)

    def stale_reasons(self, path: Path, session: Session | None = None) -> list[str]:
        """Why answers from `session` (default: the file's current server) may be
        stale because of rebuilt ancestors; [] when they are not."""
        session = session or self.pool.current(path)
        if session is None:
            return []
        if session in self.retiring:
            return [self.retiring[session]] if self.retiring[session] else []
        rep = self.running.get(path)
        if rep is not None and rep.old is session:
            return [rep.reason()] if rep.reason() else []
        if session.data is None or (rep is not None and rep.new is session):
            return []
        rebuilt = session.ancestors.rebuilt(ancestors.built_times(session.file.text, path.parent))
        if not rebuilt:
            return []
        refused = self._refused.get(path)
        return [_rebuilt_reason(rebuilt, refused if refused is not None and refused.server == session.id else None)]

    def memory_notes(self, path: Path, session: Session | None = None) -> list[str]:
        """What answers from `session` (default: the file's server) say while a fresh
        server replaces it for the memory it took; [] otherwise."""
        rep = self.running.get(path)
        session = session or self.pool.current(path)
        if rep is None or not rep.bloat_mb or rep.old is not session:
            return []
        return [f"REPLACING: this HOL server grew to {rep.bloat_mb:.0f} MB, past the soft limit of "
                f"{self.pool.settings.soft_footprint_mb} MB (HOLSRV_SOFT_FOOTPRINT_MB), and HOL never gives memory "
                "back: a fresh server is catching up in the background and takes over by itself; nothing to do."]

    def status(self, session: Session, row: m.SessionStatus, now: float) -> m.SessionStatus:
        """`row` with the replacement of `session`, if one is under way."""
        rep = self.running.get(session.path)
        return row if rep is None or rep.old is not session else rep.status(row, now)

    # -- starting and giving up ----------------------------------------------

    def _no_room(self, old: Session) -> str:
        """Why a second server for `old`'s file cannot run beside it ("" if it can)."""
        if self.pool.settings.replace_timeout_s <= 0:
            return "no room: background replacement is off (replace_timeout_s=0)"
        if self.pool.closing:
            return "no room: the daemon is shutting down"
        return self.pool.make_room_beside(old)

    def replacing(self, path: Path) -> bool:
        """A successor for `path`'s server is under way."""
        return path in self.running

    def shed(self, session: Session, footprint_mb: float) -> str:
        """Replace `session`, which grew to `footprint_mb`, in the background; "" once
        started (or under way already), else why there is no room for it."""
        if session.path in self.running:
            return ""
        why = self._no_room(session)
        if not why:
            built = ancestors.built_times(session.file.text, session.path.parent)
            self._start(session, [], built, bloat_mb=footprint_mb)
        return why

    def refresh(self, session: Session, why: str) -> str:
        """Replace `session`, whose HOL state `why` says was changed, in the background; "" once
        started (or under way already), else why there is no room for it."""
        if session.path in self.running or self.pool.current(session.path) is not session:
            return ""
        no_room = self._no_room(session)
        if not no_room:
            self._start(session, [], ancestors.built_times(session.file.text, session.path.parent), refresh=why)
        return no_room

    def _start(self, old: Session, rebuilt: list[str], built: dict[str, float], bloat_mb: float = 0.0,
               refresh: str = "") -> None:
        new = self.pool.spawn(old.path, old.max_heap_mb, old.hol_cmd, old)
        # It loads these builds or newer ones: a later rebuild is one it missed.
        new.ancestors.loaded(built)
        rep = self.running[old.path] = Replacement(old, new, rebuilt, self.pool.clock(), built, bloat_mb=bloat_mb,
                                                   refresh=refresh)
        self._refused.pop(old.path, None)
        log.info("replacing %s (pid %s) in the background: %s", old.path, old.pid, rep.cause())
        rep.task = asyncio.create_task(self._run(rep), name=f"replace-{old.path.name}")

    async def _run(self, rep: Replacement) -> None:
        timeout = self.pool.settings.replace_timeout_s
        try:
            async with asyncio.timeout(timeout):
                assert rep.new.start_task is not None
                await asyncio.shield(rep.new.start_task)  # raises if the start failed
                await catch_up(rep, timeout, self.pool.texts)
        except TimeoutError:
            await self._give_up(rep, f"it had not caught up after {timeout:.0f}s (the constant replace_timeout_s)")
        except (HolsrvError, OSError, CannotTakeOver) as err:
            await self._give_up(rep, str(err))
        except Exception:  # the top of a task: log it, leave the old server answering
            log.exception("replacing %s failed", rep.old.path)
            await self._give_up(rep, "an internal error (see the daemon's log)")
        else:
            self._switch(rep)

    async def _give_up(self, rep: Replacement, why: str) -> None:
        path = rep.old.path
        if self.running.get(path) is rep:
            del self.running[path]
        if self.pool.current(path) is rep.new:  # promoted: it is the file's server now
            log.warning("the successor of %s (pid %s) did not catch up: %s", path, rep.new.pid, why)
            return
        log.warning("not replacing %s (pid %s): %s", path, rep.old.pid, why)
        self._refused[path] = _Refusal(rep.old.id, f"a fresh server was tried and failed: {why}", rep.built)
        await self.pool.stop_session(rep.new, "its replacement was given up")

    async def drop(self, path: Path, reason: str) -> None:
        """Stop the replacement of `path`'s server, if one is under way (the server itself is being stopped)."""
        rep = self.running.pop(path, None)
        if rep is not None:
            if rep.task is not None:
                rep.task.cancel()
            await self.pool.stop_session(rep.new, reason)

    # -- switching over ----------------------------------------------------

    def _switch(self, rep: Replacement) -> None:
        path = rep.old.path
        if self.running.get(path) is rep:
            del self.running[path]
        if self.pool.current(path) is rep.new:  # promoted already (its predecessor ended)
            return
        if self.pool.current(path) is not rep.old or not rep.new.alive:
            # Stopped, restarted or dead meanwhile: someone else decided.
            self._stop_later(rep.new, "its predecessor was replaced otherwise")
            return
        if rep.bloat_mb and (rep.new.footprint_mb() or 0.0) > self.pool.settings.soft_footprint_mb:
            rep.new.keeps_large = True  # as large fresh, caught up: its file needs it
        rep.new.clients |= rep.old.clients
        rep.new.last_used = rep.old.last_used
        self.retiring[rep.old] = rep.retired_reason()
        if rep.old.pid and rep.retired_reason():
            self._replaced[rep.old.pid] = rep.retired_reason()
            while len(self._replaced) > MAX_REPLACED_KEPT:
                self._replaced.popitem(last=False)
        self.pool.install(path, rep.new)  # once the old one is retiring: both are in the record
        self.switched += 1
        self.pool.holds.switched(rep.old, rep.new)  # an editor's document follows: it does not keep the old one
        log.info("replaced %s: pid %s → %s (%s), after %.1fs", path, rep.old.pid, rep.new.pid,
                 rep.cause(), self.pool.clock() - rep.since)
        self.released(rep.old)

    def released(self, session: Session) -> None:
        """A call let go of `session`: a replaced server is stopped once none holds it."""
        if session in self.retiring and session.waiting == 0:
            del self.retiring[session]
            self._stop_later(session, "replaced by a fresh server")

    def _stop_later(self, session: Session, reason: str) -> None:
        # As an eviction: counted as gone at once, stopped outside the caller.
        self.pool.stop_later(session, reason, name=f"retire-{session.path.name}")

    def promote(self, path: Path) -> tuple[Session, str] | None:
        """The file's server is gone: its successor, if one has started, takes over at once;
        returns it with what the call that finds it should be told."""
        rep = self.running.get(path)
        if rep is None or not rep.new.alive or rep.new.starting:
            return None
        # Its task carries on catching up, and then finds it already in place.
        del self.running[path]
        self.pool.install(path, rep.new)
        why = rep.old.exit_reason if rep.old.dead else (rep.old.stop_reason or "it was stopped")
        note = (f"the previous HOL server ended ({why}); the one started because {rep.cause()} "
                "answers now, and may still be catching up")
        return rep.new, note

    async def close(self) -> None:
        for rep in self.running.values():
            if rep.task is not None:
                rep.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*(r.task for r in self.running.values() if r.task), return_exceptions=True)
