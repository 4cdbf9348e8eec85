"""What every answer shares: its context, opening the file on its server, and common words.

Every call re-reads the file (the file on disk is the truth), leases the
file's session from the pool (starting it if needed) and syncs it.  Waits
never cancel anything in the server.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import msgspec

from holsrv import files, textinfo
from holsrv.cache import AnswerCache
from holsrv.errors import Starting
from holsrv.pool import Lease, Pool
from holsrv.rpc import messages as m
from holsrv.session import Session
from holsrv.settings import Settings

# Where an answer that waits sends its progress (`Progress` frames to the caller).
Report = Callable[[m.Progress], Awaitable[None]]


@dataclass(frozen=True)
class Context:
    """What answers work with.  `clock` is the pool's, so times from both compare."""

    pool: Pool
    cache: AnswerCache
    settings: Settings
    scripts: files.Reader = field(default_factory=files.Reader)  # one stat when a file is unchanged

    @property
    def clock(self) -> Callable[[], float]:
        return self.pool.clock


@contextlib.asynccontextmanager
async def opened(
    ctx: Context, file: str, client: str, wait: float | None = None, *, tolerate_start: bool = False
) -> AsyncIterator[tuple[files.Script, Lease]]:
    """Read the file, lease its server, wait (up to `wait`, else the start wait) for it
    to start, and sync it.

    If the server is still starting when the wait runs out, raise `Starting`,
    unless `tolerate_start`: then yield unsynced and let the caller say so.
    """
    script = await read(ctx, file)  # bad input fails here, before any HOL starts
    async with ctx.pool.lease(script.path, client, script.hash) as lease:
        session = lease.session
        if await session.wait_started(ctx.settings.start_wait_s if wait is None else wait):
            if lease.start != "warm":
                script = await read(ctx, file)  # the start took a while: the newest text wins
            await session.sync(script.data, script.text)
            await ctx.pool.synced(session, script)  # a rebuilt ancestor starts its replacement
        elif not tolerate_start:
            raise Starting(starting_message(session, ctx.clock()))
        yield script, lease


async def read(ctx: Context, file: str) -> files.Script:
    """The file as it is now, its text's facts computed (a new large text in
    slices, so the loop answers others meanwhile)."""
    script = ctx.scripts.read(file)
    await textinfo.prepare(script.text)
    return script


async def compiled(ctx: Context, session: Session, wait: float | None = None) -> None:
    """Wait (up to `wait`, else the lookup wait) for the compile of our text to end.

    Hover, definition and symbols read the compiler's trees, and retry must
    know whether the file is blocked.
    """
    await session.wait_until(lambda: session.phase != "compiling", ctx.settings.lookup_wait_s if wait is None else wait)


def note(lease: Lease) -> m.ServerNote:
    """Which server answered, and whether this call had to start it."""
    return m.ServerNote(pid=lease.session.pid or 0, start=lease.start, note=lease.note,
                        stderr_tail=lease.stderr_tail)


def replace(struct, **changes):
    return msgspec.structs.replace(struct, **changes)


def starting_message(session: Session, now: float) -> str:
    return (
        f"the HOL server for {session.path.name} (pid {session.pid or '-'}) is still starting "
        f"(loading its heap; {now - session.started_at:.0f}s so far). It carries on; ask again "
        "in a few seconds."
    )


def frontier_note(session: Session) -> str:
    """Why a lookup may have found less than there is, or "" when the file is compiled."""
    if session.phase == "compiling":
        return (
            "The file is still compiling: HOL answers only as far as it has compiled, so this "
            "may be incomplete or stale. Ask again once diagnostics has settled."
        )
    if session.phase == "blocked":
        return blocked_message(session)
    return ""


def blocked_message(session: Session) -> str:
    blocked = session.file.blocked or {}
    return (
        f"The file is blocked: {blocked.get('message', 'its dependencies could not be loaded')}. "
        "Build what is missing (Holmake), then call retryCompile."
    )
