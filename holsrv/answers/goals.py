"""goalState: the goals at a position inside a proof, and why there are none elsewhere."""

from __future__ import annotations

from holsrv import script
from holsrv.answers.common import Context, blocked_message, note, opened, replace, starting_message
from holsrv.files import content_hash
from holsrv.lsp import hol, replies
from holsrv.positions import LineIndex, Text
from holsrv.rpc import messages as m
from holsrv.session import Session

_COMPILING = (
    "The file is still compiling, so there is no goal state yet. Ask again in a few seconds "
    "(or call diagnostics, which waits for the compile)."
)


async def goal_state(ctx: Context, req: m.GoalState, client: str) -> m.GoalStateResult:
    deadline = ctx.clock() + max(0.0, req.wait)
    async with opened(ctx, req.file, client, req.wait, tolerate_start=True) as (src, lease):
        session = lease.session
        lines = Text(src.text)
        lines.to_lsp(req.line, req.col, "utf-8")  # a bad position is refused even while starting
        base = m.GoalStateResult(
            file=str(src.path), content_hash=src.hash, line=req.line, col=req.col,
            state="", message="", server=note(lease),
        )
        if session.starting:
            return replace(base, state="starting", message=starting_message(session, ctx.clock()))
        key = session.cache_key("goalState", src.hash, req.line, req.col)
        cached = ctx.cache.get(key)
        if cached is not None:
            return replace(cached, cached=True, server=note(lease))
        reply = await _ask(ctx, session, lines.to_lsp(req.line, req.col, session.encoding), deadline)
        if isinstance(reply, replies.GoalState) and reply.error:
            session.walk_errors.append(reply.error.rstrip())
        result = _result(base, reply, src.text, session)
        if session.data != src.data:
            # Another call synced a newer text while this one waited.
            return replace(
                result, content_hash=content_hash(session.data or b""), provisional=True,
                message="The file changed on disk during this call, so this may not match the new "
                "text at this position; ask again.",
            )
        # A walk that ran out of time may succeed on a less busy machine.
        if hol.is_settled(reply) and session.phase == "completed":
            ctx.cache.put(key, result)
        return result


Reply = replies.GoalState | replies.Pending | None


async def _ask(ctx: Context, session: Session, position: dict, deadline: float) -> Reply:
    """Ask until HOL stops saying pending or the deadline passes."""
    while True:
        reply = await session.hol.goal_state(position)
        if not hol.is_pending(reply) or ctx.clock() >= deadline:
            return reply
        # The server answers once the running pass announces completion.
        await session.wait_change(min(1.0, deadline - ctx.clock()))


def _result(base: m.GoalStateResult, reply: Reply, text: str, session: Session) -> m.GoalStateResult:
    if session.phase == "blocked" and not isinstance(reply, replies.GoalState):
        return replace(base, state="blocked", message=blocked_message(session))
    if reply is None:
        return replace(base, state="not_in_proof", message=_outside_message(text, base.line, base.col))
    if isinstance(reply, replies.Pending):
        return replace(base, state="compiling", message=_COMPILING)
    failed = reply.failed_range
    return replace(
        base,
        state="ok",
        message="",
        theorem=reply.theorem,
        step=reply.step,
        goals=[m.Goal(asms=[hol.strip_ansi(a) for a in g.asms], goal=hol.strip_ansi(g.goal)) for g in reply.goals],
        context=list(reply.context),
        note=reply.note,
        error=reply.error,
        failed_range=Text(text).lsp_range(failed.as_lsp(), session.encoding) if failed else None,
        provisional=hol.is_provisional(reply),
    )


def _outside_message(text: str, line: int, col: int) -> str:
    message = f"Line {line}, column {col} is not inside a Proof … QED block; goal states exist only there."
    index = LineIndex(text)
    offset = index.offset(line, col)
    blocks = script.proof_blocks(text)
    nearest = min(blocks, key=lambda b: min(abs(b.start - offset), abs(b.end - offset)), default=None)
    if nearest is not None:
        first, last = index.line(nearest.body_start), index.line(nearest.body_end)
        message += f" The nearest proof is {nearest.name}, its tactics on lines {first}-{last}."
    return message
