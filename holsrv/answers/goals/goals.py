"""goalState: the goals at a position, or before and after a line's tactics.

HOL runs the tactics that end at or before the cursor (docs/protocol.md#goal-state-answers),
so a position shows the goals *before* the tactic under it.  A whole line is
therefore asked twice: at its first character (before its first tactic) and
just past its last (after its last tactic).  HOL answers on the QED line only
at QED's first byte (docs/protocol.md#where-a-goal-state-applies), so any column there is asked there: what is left
at the end of the proof.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from holsrv.answers import cache, lacking
from holsrv.answers.common import (
    NO_SERVER,
    Context,
    blocked_message,
    note,
    opened,
    position_check,
    replace,
    starting_message,
    within,
)
from holsrv.answers.goals.goalagreement import QED_NOTE, agreeing
from holsrv.answers.goals.goalcolumns import Where, where_to_ask
from holsrv.answers.states import PositionState
from holsrv.disk.files import Script, content_hash
from holsrv.lsp import hol, quirks, replies
from holsrv.pool.pool import Lease
from holsrv.rpc import messages as m
from holsrv.server import runaway
from holsrv.server.session import Session
from holsrv.text import textinfo
from holsrv.text.positions import Text
from holsrv.verdict.filestate import Phase

Reply = replies.GoalState | replies.Pending | None
Gate = Callable[[], Awaitable[None]]

_COMPILING = (
    "The file is still compiling, so there is no goal state yet. Ask again in a few seconds "
    "(or call diagnostics, which waits for the compile)."
)
# HOL's walk budget is a constant in its goal-state driver: no request field,
# $/setConfig field, initialize option or environment variable sets it.
_TIMED_OUT = (
    "HOL gave up running the tactics up to here: each goal-state walk has a fixed time budget "
    "(see error) that this HOL does not let a client change, so the goals here are unknown. "
    "Ask at an earlier line first, then step forward: HOL keeps the state after each tactic of "
    "a walk that finished, so the next walk only runs what follows. If one tactic alone is too "
    "slow, split it into smaller steps (intermediate `sg`/`by` subgoals, fewer simp or metis "
    "lemmas). diagnostics checks the whole proof without this budget."
)
async def goal_state(ctx: Context, req: m.GoalState, client: str) -> m.GoalStateResult:
    deadline = ctx.clock() + max(0.0, req.wait)
    check = position_check(req.line, req.column)  # a bad position is refused before any server starts
    async with opened(ctx, req.file, client, req.wait, tolerate_start=True, check=check) as (src, lease):
        text = textinfo.of(src.text).lines  # split once per text, not per call
        return await at_position(ctx, src, lease, text, (req.line, req.column), deadline)


async def at_position(
    ctx: Context, src: Script, lease: Lease, text: Text, position: tuple[int, int | None], deadline: float
) -> m.GoalStateResult:
    """The goals at one (line, column or None) of the opened `src`, cached per text and
    server; `PositionOutOfRange` if it is not in the text."""
    line, column = position
    session = lease.session
    text.to_lsp(line, column or 1, "utf-8")  # and again for the text synced, if it changed
    base = base_of(src, line, column, note(lease))
    if session.starting:
        return replace(base, state=PositionState.STARTING, message=starting_message(session, ctx.clock()))
    key = cache.goal_key(session, src.hash, line, column)
    cached = ctx.cache.hit(key, note(lease))
    if cached is not None:
        ctx.prefetches.used(key)
        return cached
    return await answered(ctx, session, src, base, deadline)


def base_of(src: Script, line: int, column: int | None, server: m.ServerNote) -> m.GoalStateResult:
    """The answer about `src` at (line, column) before HOL has said anything."""
    text = textinfo.of(src.text).lines  # split once per text, not per call
    return m.GoalStateResult(
        file=str(src.path), content_hash=src.hash, line=line, column=column, state="", message="",
        server=server, line_text=text.lines[line - 1] if column is None else "",
    )


async def answered(
    ctx: Context, session: Session, src: Script, base: m.GoalStateResult, deadline: float, *, ahead: bool = False
) -> m.GoalStateResult:
    """HOL's answer at `base`'s position of `src` (synced to `session`), put in the cache if settled.
    `ahead`: asked by no call (see `prefetch`); a call's own walks go first."""
    key = cache.goal_key(session, src.hash, base.line, base.column)
    text = textinfo.of(src.text).lines
    text.to_lsp(base.line, base.column or 1, "utf-8")  # and again for the text synced, if it changed
    refusal = not_walked(ctx, session, src, base.line)
    if refusal:
        return replace(base, state=PositionState.LOOPING, message=refusal)
    where = where_to_ask(src.text, text.lines, base.line, base.column)
    if ahead:
        asked = await _walks(ctx, session, text, base.line, where, deadline,
                             gate=lambda: ctx.prefetches.turn(session, src.hash))
    else:
        async with ctx.prefetches.real(session):
            asked = await _walks(ctx, session, text, base.line, where, deadline)
    result = _result(base, asked[0], asked[-1], text, session, where)
    if result.state == PositionState.NOT_IN_PROOF and not ahead:
        # HOL said null inside a proof: a server without a goal-state walker, found out once (`lacking`).
        result = await lacking.without_goals(session, src.text, result, within(ctx, deadline))
    if session.data != src.data:
        # Another call synced a newer text while this one waited.
        return replace(
            result, content_hash=content_hash(session.data or b""), provisional=True,
            message="The file changed on disk during this call, so this may not match the new "
            "text at this position; ask again.",
        )
    # A walk that ran out of time may succeed on a less busy machine.
    if ctx.cache.keep(key, result, settled=all(hol.is_settled(r) for r in asked) and session.phase == Phase.COMPLETED):
        if ahead:
            ctx.prefetches.kept(key)
    return result


def not_walked(ctx: Context, session: Session, src: Script, line: int) -> str:
    """Why the daemon asks HOL no goal state at `line` of `src` (a proof that loops), or ""."""
    loops = ctx.pool.loops.known(src.path, src.text)
    return runaway.walk_refusal(session.file, src.text, line, loops, ctx.clock(), ctx.settings)


def ask_ahead(
    ctx: Context, session: Session, src: Script, verdict: m.DiagnosticsResult, keep: Callable[[], object]
) -> None:
    """After a settled verdict on `src`: ask in the background for the goal states at the
    failures it has located on their failing steps, as an agent asks next (see `prefetch`).
    `keep` caches the verdict again: a failed walk's diagnostic is news to the cache's key,
    but says nothing the verdict does not (it leaves walks out), so it still holds."""
    failures = [(d.range.line, d.range.col) for d in verdict.diagnostics
                if quirks.is_proof_failure(d.message) and not d.note]  # a note: not on its step yet
    questions = ctx.prefetches.plan(session, src.hash, failures)
    if not questions:
        return
    said = _said_but_walks(session)

    async def ask(line: int, column: int | None) -> None:
        if cache.goal_key(session, src.hash, line, column) not in ctx.cache:  # a call asked already
            base = base_of(src, line, column, NO_SERVER)
            await answered(ctx, session, src, base, ctx.clock() + ctx.settings.request_timeout_s, ahead=True)
            if _said_but_walks(session) == said:
                keep()

    ctx.prefetches.start(session, src.hash, questions, ask)


def _said_but_walks(session: Session) -> tuple[int, list[dict]]:
    """What the server has said of the file but its walks' own diagnostics: the count of its other
    notifications, and its diagnostics less the walks' failures."""
    walks = set(session.walk_errors)
    file = session.file
    return (file.events - file.publishes,
            [d for d in file.diagnostics if str(d.get("message", "")).rstrip() not in walks])


async def _walks(
    ctx: Context, session: Session, text: Text, line: int, where: Where, deadline: float, gate: Gate | None = None
) -> list[Reply]:
    """HOL's answers at `where`'s columns of `line`; a failed walk's error is noted as not the text's.
    `gate` is awaited before each walk (a prefetch's: see `prefetch`)."""
    # One walk per position; HOL runs them one at a time, so ask in turn.
    # Before first: the later walk then starts from the state HOL kept.
    asked = []
    for column in ([where.before] if where.before else []) + [where.after]:
        if gate is not None:
            await gate()
        asked.append(await _ask(ctx, session, text.to_lsp(line, column, session.encoding), deadline))
    for error in dict.fromkeys(r.error.rstrip() for r in asked if isinstance(r, replies.GoalState) and r.error):
        session.walk_errors.append(error)
    return asked


async def _ask(ctx: Context, session: Session, position: dict, deadline: float) -> Reply:
    """Ask until HOL stops saying pending or the deadline passes."""
    while True:
        reply = await session.hol.goal_state(position, timeout=within(ctx, deadline))
        if not hol.is_pending(reply) or ctx.clock() >= deadline:
            return reply
        # The server answers once the running pass announces completion.
        await session.wait_change(min(1.0, deadline - ctx.clock()))


# -- the answer -------------------------------------------------------------


def _result(
    base: m.GoalStateResult, first: Reply, last: Reply, text: Text, session: Session, where: Where
) -> m.GoalStateResult:
    """The answer from the walk before the line (`first`) and the one after it (`last`);
    with a column, or a line with one position, they are the same walk."""
    if session.phase == Phase.BLOCKED and not isinstance(last, replies.GoalState):
        return replace(base, state=PositionState.BLOCKED, message=blocked_message(session))
    if hol.is_pending(first) or hol.is_pending(last):
        return replace(base, state=PositionState.COMPILING, message=_COMPILING)
    shown = last if isinstance(last, replies.GoalState) else first
    if not isinstance(shown, replies.GoalState):
        return replace(base, state=PositionState.NOT_IN_PROOF,
                       message=_outside_message(text.text, base.line, base.column))
    failed = shown.failed_range
    result = replace(
        base,
        state=(PositionState.FAILED if shown.error else PositionState.GOALS if shown.goals
               else PositionState.PROVED_HERE),
        theorem=shown.theorem,
        step=shown.step,
        goals=goals_of(shown),
        context=list(shown.context),
        note=shown.note,
        error=shown.error,
        failed_range=text.lsp_range(failed.as_lsp(), session.encoding) if failed else None,
        provisional=hol.is_provisional(first) or hol.is_provisional(last),
    )
    if base.column is None:
        result = replace(result, before=goals_of(first) if isinstance(first, replies.GoalState) else None)
    return agreeing(replace(result, message=_message(result, shown, where)), session, text.text, where)


def goals_of(reply: replies.GoalState) -> list[m.Goal]:
    return [m.Goal(asms=[hol.strip_ansi(a) for a in g.asms], goal=hol.strip_ansi(g.goal)) for g in reply.goals]


def _message(result: m.GoalStateResult, reply: replies.GoalState, where: Where) -> str:
    said = {"qed": QED_NOTE, "blank": f"Line {result.line} has no tactic: goals are those at this point."}
    # Past a failure the goals are not those of this line, whatever it is.
    line_note = "" if result.state == PositionState.FAILED else said.get(where.kind, "")
    return " ".join(filter(None, [line_note, _state_message(result, reply)]))


def _state_message(result: m.GoalStateResult, reply: replies.GoalState) -> str:
    if hol.walk_timed_out(reply):
        return _TIMED_OUT
    if result.state == PositionState.PROVED_HERE:
        proved = "this branch's goal" if result.context else "the goal"
        return f"No goals are left here: the tactics up to this point prove {proved}."
    if result.state != PositionState.FAILED:
        return ""
    where = result.failed_range
    if where is None:
        return "A step up to here fails (see error); goals are the state before it."
    span = f"line {where.line}, columns {where.col}-{where.end_col}"
    if where.line <= result.line <= where.end_line:
        return f"The tactic at {span} fails (see error): goals are the state it was given."
    return (
        f"An earlier tactic, at {span}, fails (see error), so these goals are not those of line "
        f"{result.line}: fix that tactic first, then ask again."
    )


def _outside_message(text: str, line: int, col: int | None) -> str:
    at = f"Line {line}" if col is None else f"Line {line}, column {col}"
    message = f"{at} is not inside a Proof … QED block; goal states exist only there."
    index = textinfo.of(text).index
    offset = index.offset(line, col or 1)
    blocks = textinfo.of(text).blocks
    nearest = min(blocks, key=lambda b: min(abs(b.start - offset), abs(b.end - offset)), default=None)
    if nearest is not None:
        first, last = index.line(nearest.body_start), index.line(nearest.body_end)
        message += f" The nearest proof is {nearest.name}, its tactics on lines {first}-{last}."
    return message
