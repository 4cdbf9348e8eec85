"""The fast path: an answer already in the cache, given with nothing awaited.

Its rules are the cache's (`cache`): the key, what was stored, the look, and
when a look needs nothing awaited (`cache.serving`: the file unchanged since
it was last read, the very text its running server has, and nothing that may
have made that server's answers stale).  Then the key is made and looked up at
once: no lease (nothing is awaited, so nothing can stop or evict the server
under the call), no sync (the server has this text), no re-read for the
freshness stamp (the stat was just taken).  Anything else (no server, another
text, a trial holding the server, a rebuilt ancestor, whose replacement the
ordinary path's look starts, a miss) goes the ordinary way, which answers it
the same.

A goalState at one position and a diagnostics are cached (hover, definition
and the other lookups are asked of HOL each time).  A diagnostics also goes
the ordinary way when its wait could differ there: a request that waits for
a change or may become a job, or a blocked compile (a retry may be due).
"""

from __future__ import annotations

from holsrv.answers import cache
from holsrv.answers.common import Context, answer_settled, freshness, note
from holsrv.disk import files
from holsrv.pool.pool import Lease, Start
from holsrv.rpc import messages as m
from holsrv.server.session import Session
from holsrv.verdict.filestate import Phase


def answer(ctx: Context, request: m.Request, client: str) -> m.Reply | None:
    """The stamped reply to `request` if it is a cached goalState or diagnostics, else None."""
    if type(request) is m.GoalState:  # `type is`, not a match: the cheapest test, and no subclass is either
        return _goal_state(ctx, request, client)
    if type(request) is m.Diagnostics:
        return _diagnostics(ctx, request, client)
    return None


def _goal_state(ctx: Context, request: m.GoalState, client: str) -> m.Reply | None:
    if request.positions is not None:  # a batch: `goalbatch`
        return None
    served = cache.serving(ctx.scripts, ctx.pool, request.file)
    if served is None:
        return None
    script, session = served
    key = cache.goal_key(session, script.hash, request.line, request.column)
    reply = _given(ctx, script, session, key, client, request.expect_hash)
    if reply is not None:
        ctx.prefetches.used(key)
    return reply


def _diagnostics(ctx: Context, request: m.Diagnostics, client: str) -> m.Reply | None:
    if request.changed_since or request.defer_after is not None:  # a wait, or a job: `diagnostics`, `jobs`
        return None
    served = cache.serving(ctx.scripts, ctx.pool, request.file)
    if served is None:
        return None
    script, session = served
    if session.phase == Phase.BLOCKED:  # the ordinary path looks for a retry first
        return None
    # Keyed by its staleness reasons, as the ordinary path keys it: `serving` found none.
    key = cache.diagnostics_key(session, script.hash, ())
    return _given(ctx, script, session, key, client, request.expect_hash)


def _given(ctx: Context, script: files.Script, session: Session, key: tuple, client: str,
           expect_hash: str) -> m.Reply | None:
    """The answer cached under `key`, stamped as the ordinary path stamps it; None on a miss."""
    found = ctx.cache.look(key)
    if found is None:
        return None
    cached, age_s = found
    # No lease, but a use all the same: least recently used order, idleness, status's clients.
    session.clients.add(client)
    ctx.pool.sessions.move_to_end(script.path)
    session.last_used = ctx.clock()
    # As `stamp` would: the file is `script`, just stat'ed, and its server has no staleness
    # reason (`serving` just asked, and nothing has been awaited since).
    fresh = freshness(ctx, script, cached.content_hash, settled=answer_settled(cached, session),
                      age_s=age_s, expect_hash=expect_hash, stale=[])
    return cache.given(cached, note(Lease(session, Start.WARM)), fresh)
