"""What every answer shares: its context, opening the file on its server, and common words.

Every call re-reads the file (the file on disk is the truth), leases the
file's session from the pool (starting it if needed) and syncs it.  Waits
never cancel anything in the server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import msgspec

from holsrv.answers.cache import AnswerCache
from holsrv.answers.goals.prefetch import Prefetches
from holsrv.answers.inheritedcheats import AncestorCheats
from holsrv.answers.scope import Ancestries
from holsrv.answers.statementcheck import HeadNotes
from holsrv.answers.states import UNSETTLED
from holsrv.config.settings import Settings
from holsrv.disk import files
from holsrv.errors import BadRequest, HolsrvError, RanAway, Starting
from holsrv.pool.pool import Lease, Pool, Start
from holsrv.rpc import limits
from holsrv.rpc import messages as m
from holsrv.server.buffers import Buffers
from holsrv.server.runaway import Runaway
from holsrv.server.session import Session
from holsrv.text import stepping, textinfo
from holsrv.verdict.filestate import Phase

# Where an answer that waits sends its progress (`Progress` frames to the caller).
Report = Callable[[m.Progress], Awaitable[None]]


class Context:
    """What answers work with, whole once made: what needs a setting is made from `settings` here.
    `clock` is the pool's, so times from both compare."""

    def __init__(self, pool: Pool, cache: AnswerCache, settings: Settings, scripts: files.Reader | None = None,
                 *, prefetches: Prefetches | None = None) -> None:
        self.pool = pool
        self.cache = cache
        self.settings = settings
        self.scripts = files.Reader() if scripts is None else scripts  # one stat when a file is unchanged
        self.ancestries = Ancestries()  # what each server says the ancestors are
        self.prefetches = Prefetches(0) if prefetches is None else prefetches  # goal states asked ahead
        # Each server's cheated ancestor theorems, asked once (`inheritedcheats`); every request to HOL has a deadline.
        self.ancestor_cheats = AncestorCheats(settings.request_timeout_s)
        # Each text's statements that differ from HEAD's, for diagnostics' note (`statementcheck`); every git run too.
        self.head_notes = HeadNotes(settings.request_timeout_s)

    @property
    def clock(self) -> Callable[[], float]:
        return self.pool.clock

    @property
    def editors(self) -> Buffers:
        """The files an editor holds (`holctl lsp`): the pool's, whose syncs send their buffers."""
        return self.pool.texts


@contextlib.asynccontextmanager
async def opened(
    ctx: Context, file: str, client: str, wait: float | None = None, *, tolerate_start: bool = False,
    check: Callable[[files.Script], object] | None = None,
) -> AsyncIterator[tuple[files.Script, Lease]]:
    """Read the file, lease its server, wait (up to `wait`, else the start wait) for it
    to start, and sync it.

    `check` refuses a request that does not fit the text on disk (a line past
    the end) before a server is started only to refuse it.  If the server is
    still starting when the wait runs out, raise `Starting`, unless
    `tolerate_start`: then yield unsynced and let the caller say so.  While an
    editor holds the file, its buffer is the text synced and yielded: the
    disk's is never sent over it.
    """
    script = await read(ctx, file)  # bad input fails here, before any HOL starts
    if check is not None:
        check(ctx.pool.texts.over(script))  # a position in the text answered about
    async with ctx.pool.lease(script.path, client, script.hash) as lease:
        session = lease.session
        # A trial's text is never synced over, nor read as this call's answer.
        # The wait for it is within the call's own (clients size their timeouts so).
        trial_wait = min(ctx.settings.trial_wait_s, ctx.settings.start_wait_s if wait is None else wait)
        async with session.trials.use(trial_wait, script.path.name):
            if await session.wait_started(ctx.settings.start_wait_s if wait is None else wait):
                if lease.start != Start.WARM:
                    script = await read(ctx, file)  # the start took a while: the newest text wins
                script = ctx.pool.texts.over(script)
                # Shielded: a caller that hangs up mid-sync (its call is then
                # cancelled) must not leave the server's text half-recorded.
                await asyncio.shield(session.sync(script.data, script.text, script.hash))
                await ctx.pool.synced(session, script)  # a rebuilt ancestor starts its replacement
            elif not tolerate_start:
                raise Starting(starting_message(session, ctx.clock()))
            yield script, lease


async def read(ctx: Context, file: str) -> files.Script:
    """The file as it is now, its text's facts computed (a new large text in
    slices, so the loop answers others meanwhile)."""
    script = await stepping.sliced(ctx.scripts.read_steps(file))
    await textinfo.prepare(script.text)
    return script


async def compiled(ctx: Context, session: Session, wait: float | None = None) -> None:
    """Wait (up to `wait`, else the lookup wait) for the compile of our text to end.

    Hover, definition and symbols read the compiler's trees, and retry must
    know whether the file is blocked.
    """
    await session.wait_until(lambda: session.phase != Phase.COMPILING,
                             ctx.settings.lookup_wait_s if wait is None else wait)


def within(ctx: Context, deadline: float) -> float:
    """How long one request to HOL may take in a call that should end by `deadline`,
    so a caller's wait bounds the whole call, even on a hung server."""
    return min(ctx.settings.request_timeout_s, max(limits.MIN_REQUEST_S, deadline - ctx.clock()))


def position_check(line: int, column: int | None) -> Callable[[files.Script], object]:
    """An `opened` check: `PositionOutOfRange` unless (line, column) is in the text (column None: the line)."""
    return lambda script: textinfo.of(script.text).lines.to_lsp(line, column or 1, "utf-8")


# The `ServerNote` of an answer that needed no HOL server, so none was started.
NO_SERVER = m.ServerNote(pid=0, start=Start.NONE)


def note(lease: Lease) -> m.ServerNote:
    """Which server answered, and whether this call had to start it."""
    return m.ServerNote(pid=lease.session.pid or 0, start=lease.start, note=lease.note,
                        stderr_tail=lease.stderr_tail)


def told(reply: m.Reply, ran: RanAway) -> m.Reply:
    """`reply`, from the fresh server that replaced a runaway the call waited on, saying so."""
    server = getattr(reply, "server", None)
    if not isinstance(server, m.ServerNote) or not isinstance(ran.runaway, Runaway):
        return reply
    story = ran.runaway.story(server.pid or None)
    said = [] if ran.runaway.reason in server.note else [server.note]  # the fresh server's lease told it
    note = "; ".join(filter(None, [f"{story} This answer is from the new one", *said]))
    return replace(reply, server=replace(server, start=Start.RESTARTED, note=note))


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
    if session.phase == Phase.COMPILING:
        return (
            "The file is still compiling: HOL answers only as far as it has compiled, so this "
            "may be incomplete or stale. Ask again once diagnostics has settled."
        )
    if session.phase == Phase.BLOCKED:
        return blocked_message(session)
    return ""


def blocked_message(session: Session) -> str:
    blocked = session.file.blocked or {}
    return (
        f"The file is blocked: {blocked.get('message', 'its dependencies could not be loaded')}. "
        "Build what is missing (holmake): the daemon then retries the compile by itself."
    )


# -- freshness: one function for every file-scoped answer ---------------------

# At least this many characters of a hash make a usable `expect_hash` (answers show 12).
MIN_EXPECT_CHARS = 8
_HEX = frozenset("0123456789abcdef")


def check_expect_hash(expect_hash: str, name: str = "expect_hash") -> None:
    """BadRequest unless `expect_hash` (the request's field `name`) is "" or the start of a content hash."""
    if expect_hash and (len(expect_hash) < MIN_EXPECT_CHARS or not set(expect_hash) <= _HEX):
        raise BadRequest(
            f"{name} {expect_hash[:40]!r} is not a content hash: pass the hash an earlier answer "
            f"gave (`about file content …`, {MIN_EXPECT_CHARS} or more of its hex digits), or leave it out"
        )


def freshness(
    ctx: Context, now: files.Script | HolsrvError, about: str, *, settled: bool, age_s: float = 0.0,
    expect_hash: str = "", stale: list[str] | None = None,
) -> m.Freshness:
    """How fresh an answer about content `about` of a file, which is `now` on disk, is.

    The staleness reasons come from the pool (`Pool.stale_reasons`, or `stale`
    if the caller has just asked it), plus the file itself: changed on disk
    since the text answered about, or not the text the caller expected.
    """
    reasons: list[str] = []
    if isinstance(now, HolsrvError):
        reasons.append(f"file changed since: it can no longer be read ({now})")
    elif unsaved := ctx.editors.unsaved_reason(now, about):
        reasons += [unsaved, *(ctx.pool.stale_reasons(now.path) if stale is None else stale)]
    else:
        if expect_hash and not now.hash.startswith(expect_hash):
            reasons.append(
                f"file changed since: you expected content {expect_hash[:12]}, but the file now has "
                f"{now.hash[:12]}; this answer is about {about[:12]}"
            )
        elif about and now.hash != about:
            reasons.append(
                f"file changed since: this answer is about content {about[:12]}, the file now has "
                f"{now.hash[:12]}; ask again for the new text"
            )
        reasons += ctx.pool.stale_reasons(now.path) if stale is None else stale
    return m.Freshness(
        content_hash=about, settled=settled, age_s=round(age_s, 2), may_be_stale=bool(reasons),
        reasons=reasons, expected_hash=expect_hash,
    )


async def stamp(ctx: Context, request: m.Request, reply: m.Reply) -> m.Reply:
    """`reply` with its `freshness` filled in, if it is an answer about a file; else as it is.

    Called once per answer, by the daemon, after the answer is computed: an
    age already set (a cached answer's) is kept.
    """
    if not hasattr(reply, "freshness") or not hasattr(request, "file"):
        return reply
    now: files.Script | HolsrvError
    try:
        now = await read(ctx, request.file)  # one stat when the file is unchanged
    except HolsrvError as err:
        now = err
    return stamped(ctx, request, reply, now)


def stamped(ctx: Context, request: m.Request, reply: m.Reply, now: files.Script | HolsrvError) -> m.Reply:
    """`stamp` with the file as it is `now` already read."""
    session = ctx.pool.sessions.get(now.path) if isinstance(now, files.Script) else None
    about = getattr(reply, "content_hash", "") or (now.hash if isinstance(now, files.Script) else "")
    before = getattr(reply, "freshness", None)
    age = before.age_s if before is not None else 0.0
    fresh = freshness(ctx, now, about, settled=answer_settled(reply, session), age_s=age,
                      expect_hash=getattr(request, "expect_hash", ""), stale=_answering_reasons(ctx, reply, now))
    return replace(reply, freshness=fresh)  # a copy: the reply may be the very object the cache holds


def _answering_reasons(ctx: Context, reply: m.Reply, now: files.Script | HolsrvError) -> list[str] | None:
    """The staleness reasons of the server that gave `reply`, when it is no longer the file's
    (replaced while the call held it); None: the file's server gave it, ask the pool as usual.
    An answer is stale for as long as the server that gave it has a stale reason."""
    server = getattr(reply, "server", None)
    pid = getattr(server, "pid", 0)
    if not pid or not isinstance(now, files.Script):
        return None
    current = ctx.pool.sessions.get(now.path)
    if current is not None and current.pid == pid:
        return None
    replaced = ctx.pool.replacer.replaced_reason(pid)
    return [replaced, *ctx.pool.stale_reasons(now.path)] if replaced else None


def answer_settled(reply: m.Reply, session: Session | None) -> bool:
    """Whether asking again (with nothing changed) could say more."""
    match reply:
        case m.DiagnosticsResult():
            return reply.complete
        case m.GoalStateResult():
            return not reply.provisional and reply.state not in UNSETTLED
        case m.GoalStatesResult():
            return not any(e.provisional or e.state in UNSETTLED for e in reply.positions)
        case m.HolesResult():
            return reply.complete and not any(h.goals is not None and (
                h.goals.provisional or h.goals.state in UNSETTLED) for h in reply.holes)
        case m.HoverResult() | m.DefinitionResult() | m.CompletionResult() | m.WorkspaceSymbolResult() \
                | m.SearchResult():
            return not reply.note
    return session is not None and not session.starting and session.phase != Phase.COMPILING
