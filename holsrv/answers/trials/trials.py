"""try: candidate tactics in place of a line's, answered one by one, the file untouched;
goalDiff: what changed in the goals between two positions of one proof.

A trial holds the file's server alone (`TrialGate.exclusive`), sends each
candidate's text as a whole-text change, and reads the goals at the end of
the candidate and its proof's verdict: where a candidate goes is
`placement`'s, running it `candidates`', what it did `judging`'s.  A candidate confined to one proof
body is an edit HOL takes on its fast path (docs/protocol.md#compile-lifecycle, #what-an-edit-does-to-the-pool): only
that proof is re-elaborated and re-checked.  The next candidate, or the
disk text sent back at the end, is another such edit, so HOL drops the
previous candidate's check, a looping one included.  The file is written
only when asked (`apply`), after the trial: that is `applying`'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from holsrv.answers.common import Context, Report, note, read, replace, starting_message
from holsrv.answers.goals import goals
from holsrv.answers.states import CandidateState, PositionState
from holsrv.answers.trials import applying, candidates, goaldiff, judging, placement
from holsrv.disk import filewrite
from holsrv.disk.files import Script
from holsrv.errors import BadRequest, RanAway, Starting, TooManyCandidates
from holsrv.lsp import replies
from holsrv.pool.pool import Lease, Start
from holsrv.rpc import limits
from holsrv.rpc import messages as m
from holsrv.text.positions import Text
from holsrv.verdict.filestate import Phase

MAX_TACTIC_CHARS = 20_000  # one candidate; a frame holds the whole call anyway


# -- try ----------------------------------------------------------------------


async def try_tactics(ctx: Context, req: m.Try, client: str, report: Report | None = None) -> m.TryResult:
    _check_request(ctx, req)
    if not req.apply:
        return (await _trial(ctx, req, client, report))[0]
    filewrite.refuse_link(req.file)  # before the trial, not after it
    started = ctx.clock()
    result, src, span = await _trial(ctx, req, client, report)
    result = await applying.apply(ctx, req, client, result, src, span, report)
    result.time_s = round(ctx.clock() - started, 3)  # the write and the file's check too
    return result


async def _trial(
    ctx: Context, req: m.Try, client: str, report: Report | None
) -> tuple[m.TryResult, Script, placement.Span]:
    """The candidates tried one by one, the server given the disk text back; the text they were tried on.

    If the file's server is replaced as a runaway meanwhile (a walk that never
    ended), the candidate it was on is reported as looping, and the rest are
    tried on the fresh server, each with its own full time: not tried only once
    the call's own deadline (`_deadline`) is spent.
    """
    timeout = ctx.settings.try_timeout_s if req.timeout is None else max(0.1, req.timeout)
    started = ctx.clock()
    deadline = _deadline(ctx, req, timeout, started)
    tried: list[m.TryCandidate] = []
    told: list[str] = []  # what the runaways were: the answer's server note says it
    while True:
        try:
            return await _round(ctx, req, client, report, timeout, started, tried, told)
        except RanAway as ran:
            told.append(str(ran))
            if len(tried) < len(req.tactics) and ctx.clock() < deadline:
                continue  # on the fresh server
            raise


def _deadline(ctx: Context, req: m.Try, timeout: float, started: float) -> float:
    """When the call's own time is spent, as its client counts it (`rpc.calls`): a start,
    the wait, and each candidate's limit with HOL's letting go of the one before."""
    each = timeout + limits.try_release_s(timeout)
    return started + ctx.settings.start_wait_s + max(0.0, req.wait) + len(req.tactics) * each


async def _round(
    ctx: Context, req: m.Try, client: str, report: Report | None, timeout: float, started: float,
    tried: list[m.TryCandidate], told: list[str],
) -> tuple[m.TryResult, Script, placement.Span]:
    """The candidates not yet in `tried`, on the file's server as it is now."""
    begun = ctx.clock()
    async with _held(ctx, req.file, client, req.wait) as (src, lease):
        session = lease.session
        footprint = session.footprint_mb()  # to tell bloat the trial caused from what it found
        span = placement.span(src.text, req.line, req.column)
        spans = [placement.for_candidate(src.text, span, t) for t in req.tactics]  # bad ones refused first
        await candidates.compiled(ctx, session, begun + max(0.0, req.wait))
        if session.phase == Phase.BLOCKED:
            result = m.TryResult(
                file=str(src.path), content_hash=src.hash, line=req.line, column=req.column, theorem=span.name,
                replaced=src.text[span.start:span.end], before=[], candidates=[], server=note(lease),
            )
            result.whole_proof = span.kind == "proof"
            result = candidates.blocked(session, result, req.tactics)
            result.time_s = round(ctx.clock() - started, 3)
            return result, src, span
        await session.refresh_tally(before_trial=True)  # the file's own tally stands until the trial ends
        before_reply = await candidates.goals_at(ctx, session, Text(src.text), span.start, begun + max(0.0, req.wait))
        before = goals.goals_of(before_reply) if isinstance(before_reply, replies.GoalState) else []
        server = note(lease)
        if told:
            server = replace(server, start=Start.RESTARTED,
                             note="; ".join([*told, server.note] if server.note else told))
        result = m.TryResult(
            file=str(src.path), content_hash=src.hash, line=req.line, column=req.column, theorem=span.name,
            replaced=src.text[span.start:span.end], before=before, candidates=tried, server=server,
            whole_proof=span.kind == "proof",
        )
        try:
            count = len(req.tactics)
            for i, tactic in enumerate(req.tactics[len(tried):], start=len(tried)):
                if report is not None:
                    await report(m.Progress(f"trying {i + 1} of {count}: {tactic[:60]}", i, count))
                session.trials.doing(f"candidate {i + 1} of {count}, up to {timeout:.0f}s each")
                if result.candidates and result.candidates[-1].state == CandidateState.NOT_TRIED:
                    result.candidates.append(candidates.not_tried(tactic))
                    continue
                try:
                    result.candidates.append(candidates.stated(src.text, spans[i], await candidates.run(
                        ctx, session, src.text, spans[i], tactic, before, timeout)))
                except candidates.Looped as looped:
                    result.candidates.append(looped.candidate)
                    raise looped.ran from None
        finally:
            now = await candidates.restore(ctx, session, req.file)
        result.changed_on_disk = now.hash != src.hash
        if session.server.runaway is not None:  # it would not let go of the last candidate
            result.server = replace(server, note="; ".join(filter(None, [server.note, session.server.runaway.story()])))
            shed = ""
        else:
            result.replacing_server, shed = await candidates.shed(ctx, session, footprint)
        result.time_s = round(ctx.clock() - started, 3)
        taken_back = session.server.runaway is not None or session.phase != Phase.COMPILING
        result.message = " ".join(w for w in (judging.message(result, before_reply, timeout, taken_back,
                                                              ctx.settings.letgo_s), shed) if w)
        return result, src, span


def _check_request(ctx: Context, req: m.Try) -> None:
    limit = ctx.settings.max_try_candidates
    if not req.tactics:
        raise BadRequest("try needs at least one candidate tactic: give the tactics to try after the line.")
    if len(req.tactics) > limit:
        raise TooManyCandidates(
            f"try takes at most {limit} candidate tactics per call (HOLSRV_MAX_TRY_CANDIDATES), and "
            f"{len(req.tactics)} were given: split them over several calls, most promising first."
        )
    for tactic in req.tactics:
        whole = placement.is_declaration(tactic)  # a whole `Theorem … QED` (its shape: `for_candidate`)
        if not tactic.strip() or len(tactic) > MAX_TACTIC_CHARS or ("QED" in tactic.split() and not whole):
            raise BadRequest(
                f"a candidate must be a non-empty tactic of at most {MAX_TACTIC_CHARS} characters, "
                f"inside the proof (no QED), or a whole `Theorem name: … Proof … QED`: {tactic[:80]!r}"
            )


@contextlib.asynccontextmanager
async def _held(ctx: Context, file: str, client: str, wait: float) -> AsyncIterator[tuple[Script, Lease]]:
    """The file's server, started, held by this trial alone, with the disk text in it."""
    src = await read(ctx, file)
    ctx.editors.refuse_trial(src)  # before a server starts only to refuse
    async with ctx.pool.lease(src.path, client, src.hash) as lease:
        session = lease.session
        if not await session.wait_started(wait):
            raise Starting(starting_message(session, ctx.clock()))
        async with session.trials.exclusive(ctx.settings.trial_wait_s, src.path.name):
            src = await read(ctx, file)  # the newest text, now that no one else syncs
            ctx.editors.refuse_trial(src)
            await session.sync(src.data, src.text, src.hash)
            yield src, lease


# -- goalDiff -----------------------------------------------------------------


async def goal_diff(ctx: Context, req: m.GoalDiff, client: str) -> m.GoalDiffResult:
    """The goals at the first position (before the line's tactics when its column is
    omitted) against those at the second (after the line's tactics)."""
    first = await goals.goal_state(ctx, m.GoalState(req.file, req.line1, req.column1, wait=req.wait), client)
    second = await goals.goal_state(ctx, m.GoalState(req.file, req.line2, req.column2, wait=req.wait), client)
    for r in (first, second):
        if r.state not in (PositionState.GOALS, PositionState.PROVED_HERE, PositionState.CHEATED, PositionState.FAILED):
            raise BadRequest(f"no goals at line {r.line}: {r.message}")
    if first.theorem != second.theorem:
        raise BadRequest(
            f"line {req.line1} is in {first.theorem} and line {req.line2} in {second.theorem}: goalDiff "
            "compares two positions of one proof."
        )
    before = first.before if req.column1 is None and first.before is not None else first.goals
    after = second.goals
    diff = goaldiff.diff(before, after)
    warnings = [r.message for r in (first, second) if r.state == PositionState.FAILED]
    changed = first.content_hash != second.content_hash
    return m.GoalDiffResult(
        file=first.file, content_hash=second.content_hash, theorem=first.theorem, before=before, after=after,
        diff=diff, server=second.server,
        # Not the summary again: `diff.summary` says it, and answers show both.
        message=" ".join(warnings + (["The file changed on disk between the two positions; ask again."]
                                     if changed else [])),
    )

