"""The fast path: an answer already in the cache, given with nothing awaited.

A cached answer's key holds the server, everything it has said and the
content hash of the text (`cache`).  When the file on disk is unchanged
since it was last read (one `os.stat`: the freshness check) and is the very
text its running server has, the key is made and looked up at once: no
lease (nothing is awaited, so nothing can stop or evict the server under
the call), no sync (the server has this text), no re-read for the
freshness stamp (the stat was just taken), no look for rebuilt ancestors
(the build watch notices a build with no call, and the answer's freshness
still names it).  Anything else (no server, another text, a trial holding
the server, a miss) goes the ordinary way, which answers it the same.
"""

from __future__ import annotations

from holsrv.answers import goals
from holsrv.answers.common import Context, answer_settled, freshness, replace
from holsrv.rpc import messages as m

# The server note of a warm lease: what the ordinary path says of a running server.
_WARM = "warm"


def answer(ctx: Context, request: m.Request, client: str) -> m.Reply | None:
    """The stamped reply to `request` if it is a cached goalState, else None."""
    if type(request) is not m.GoalState or request.positions is not None:  # a batch: `goalbatch`
        return None
    script = ctx.scripts.unchanged(request.file)
    if script is None:
        return None
    session = ctx.pool.sessions.get(script.path)
    if (session is None or not session.alive or session.starting or session.trials.trial
            or session.data is None or session.content_hash != script.hash):
        return None
    key = goals.cache_key(session, script.hash, request.line, request.column)
    cached = ctx.cache.get(key, count_miss=False)
    if cached is None:
        return None
    # No lease, but a use all the same: least recently used order, idleness, status's clients.
    session.clients.add(client)
    ctx.pool.sessions.move_to_end(script.path)
    session.last_used = ctx.clock()
    # As `stamp` would: the file is `script`, just stat'ed.
    fresh = freshness(ctx, script, cached.content_hash, settled=answer_settled(cached, session),
                      age_s=ctx.cache.age(key), expect_hash=request.expect_hash)
    return replace(cached, cached=True, server=m.ServerNote(pid=session.pid or 0, start=_WARM), freshness=fresh)
