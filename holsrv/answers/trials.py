"""try: candidate tactics in place of a line's, answered one by one, the file untouched;
goalDiff: what changed in the goals between two positions of one proof.

A trial holds the file's server alone (`TrialGate.exclusive`), sends each
candidate's text as a whole-text change, and reads the goals at the end of
the candidate and its proof's verdict.  A candidate confined to one proof
body is an edit HOL takes on its fast path (PROTOCOL.md §9.1, §10.6): only
that proof is re-elaborated and re-checked.  The next candidate, or the
disk text sent back at the end, is another such edit, so HOL drops the
previous candidate's check, a looping one included.  The daemon never
writes the file.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

from holsrv import goaldiff, pool, proofs, script, textinfo
from holsrv.answers import goals
from holsrv.answers.common import Context, Report, blocked_message, note, read, replace, starting_message
from holsrv.errors import BadRequest, ServerTimeout, Starting, TooManyCandidates
from holsrv.files import Script
from holsrv.lsp import hol, replies
from holsrv.pool import Lease
from holsrv.positions import LineIndex, Text
from holsrv.rpc import limits
from holsrv.rpc import messages as m
from holsrv.session import Session

# A line's own combinators stay when its whole tactic is replaced: `>> simp[]`
# tried as `metis_tac[]` must stay `>> metis_tac[]`, or the proof no longer parses.
_LEADING = re.compile(r"(?:>>|\\\\|>-|>\||THEN1\b|THENL\b|THEN\b)\s*")
_TRAILING = re.compile(r"\s*(?:>>|\\\\|THEN\b)$")
MAX_TACTIC_CHARS = 20_000  # one candidate; a frame holds the whole call anyway
# HOL takes a candidate about 0.3 s after it is sent (its debounce); longer
# means it was still stopping the check before, and the answer says so.
SLOW_RELEASE_S = 1.0
# How long a trial that bloated its server waits for it to go quiet, to replace it.
SHED_WAIT_S = 5.0


@dataclass(frozen=True)
class _Span:
    """What a candidate replaces: text[start:end], inside `block`'s body."""

    start: int
    end: int
    block: script.ProofBlock
    name: str  # the proof's pool name


# -- try ----------------------------------------------------------------------


async def try_tactics(ctx: Context, req: m.Try, client: str, report: Report | None = None) -> m.TryResult:
    _check_request(ctx, req)
    timeout = ctx.settings.try_timeout_s if req.timeout is None else max(0.1, req.timeout)
    started = ctx.clock()
    async with _held(ctx, req.file, client, req.wait) as (src, lease):
        session = lease.session
        footprint = session.footprint_mb()  # to tell bloat the trial caused from what it found
        span = _span(src.text, req.line, req.column)
        await _compiled(ctx, session, started + max(0.0, req.wait))
        before_reply = await _goals_at(ctx, session, Text(src.text), span.start, started + max(0.0, req.wait))
        before = goals.goals_of(before_reply) if isinstance(before_reply, replies.GoalState) else []
        result = m.TryResult(
            file=str(src.path), content_hash=src.hash, line=req.line, column=req.column, theorem=span.name,
            replaced=src.text[span.start:span.end], before=before, candidates=[], server=note(lease),
        )
        try:
            count = len(req.tactics)
            for i, tactic in enumerate(req.tactics):
                if report is not None:
                    await report(m.Progress(f"trying {i + 1} of {count}: {tactic[:60]}", i, count))
                session.trials.doing(f"candidate {i + 1} of {count}, up to {timeout:.0f}s each")
                if result.candidates and result.candidates[-1].state == "not_tried":
                    result.candidates.append(_not_tried(tactic))
                    continue
                result.candidates.append(await _candidate(ctx, session, src.text, span, tactic, before, timeout))
        finally:
            now = await _restore(ctx, session, req.file)
        result.changed_on_disk = now.hash != src.hash
        result.replacing_server, shed = await _shed(ctx, session, footprint)
        result.time_s = round(ctx.clock() - started, 3)
        result.message = " ".join(w for w in (_message(result, before_reply, timeout), shed) if w)
        return result


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
        if not tactic.strip() or len(tactic) > MAX_TACTIC_CHARS or "QED" in tactic.split():
            raise BadRequest(
                f"a candidate must be a non-empty tactic of at most {MAX_TACTIC_CHARS} characters, "
                f"inside the proof (no QED): {tactic[:80]!r}"
            )


@contextlib.asynccontextmanager
async def _held(ctx: Context, file: str, client: str, wait: float) -> AsyncIterator[tuple[Script, Lease]]:
    """The file's server, started, held by this trial alone, with the disk text in it."""
    src = await read(ctx, file)
    async with ctx.pool.lease(src.path, client, src.hash) as lease:
        session = lease.session
        if not await session.wait_started(wait):
            raise Starting(starting_message(session, ctx.clock()))
        async with session.trials.exclusive(ctx.settings.trial_wait_s, src.path.name):
            src = await read(ctx, file)  # the newest text, now that no one else syncs
            await session.sync(src.data, src.text, src.hash)
            yield src, lease


def _span(text: str, line: int, column: int | None) -> _Span:
    """The tactic text of `line` from `column` (or all of it) that candidates replace."""
    lines = Text(text)
    lines.to_lsp(line, column or 1, "utf-8")  # refuses a position outside the file
    info = textinfo.of(text)  # computed once per text
    start = info.index.start(line)
    chars = lines.lines[line - 1]
    found = next(((n, b) for n, b in info.named if b.body_start <= start + len(chars) and start < b.body_end), None)
    if found is None:
        raise BadRequest(
            f"line {line} is not a line of tactics inside a Proof … QED block; give the line of the "
            "tactic to replace (goalState shows the goals on any line of a proof)."
        )
    name, block = found
    first = start + len(chars) - len(chars.lstrip()) if column is None else start + column - 1
    a, b = max(first, block.body_start), min(start + len(chars.rstrip()), block.body_end)
    if column is None:
        lead = _LEADING.match(text, a, b)
        a = lead.end() if lead else a
        trail = _TRAILING.search(text[a:b])
        b = a + trail.start() if trail else b
    if a >= b:
        raise BadRequest(
            f"line {line}{'' if column is None else f', column {column},'} has no tactic text to replace; "
            "give a line (and column) inside the proof where a tactic is."
        )
    return _Span(a, b, block, name)


async def _compiled(ctx: Context, session: Session, deadline: float) -> None:
    """Wait for the disk text's compile: the goals before the candidates need it."""
    await session.wait_until(lambda: session.phase != "compiling", deadline - ctx.clock())
    if session.phase == "blocked":
        raise BadRequest(blocked_message(session))
    if session.phase == "compiling":
        raise ServerTimeout(
            f"{session.path.name} is still compiling, so no candidate was tried; call try again in a few "
            "seconds (or call diagnostics, which waits for the compile)."
        )


async def _goals_at(ctx: Context, session: Session, text: Text, offset: int, deadline: float) -> goals.Reply:
    """HOL's goal state at `offset` of the server's text: the goals before the tactic there."""
    line, col = textinfo.of(text.text).index.line_col(offset)
    position = text.to_lsp(line, col, session.encoding)
    while True:
        timeout = max(0.1, min(ctx.settings.request_timeout_s, deadline - ctx.clock()))
        reply = await session.hol.goal_state(position, timeout=timeout)
        if not hol.is_pending(reply) or ctx.clock() >= deadline:
            return reply
        await session.wait_change(min(1.0, deadline - ctx.clock()))


async def _candidate(
    ctx: Context, session: Session, text: str, span: _Span, tactic: str, before: list[m.Goal], timeout: float
) -> m.TryCandidate:
    """One candidate in place: its goals, its proof's verdict, its time, its diff.

    Its time starts when HOL has taken its text, not when it was sent: HOL
    first stops the check of the candidate before, which for a looping one
    took a real HOL about 2 s (transcript candidate-loops).
    """
    trial = text[:span.start] + tactic + text[span.end:]
    await textinfo.prepare(trial)
    sent = session.clock()
    await session.sync(trial.encode(), trial)
    out = m.TryCandidate(tactic=tactic, state="timed_out")
    release = limits.try_release_s(timeout)
    taken = await session.wait_until(lambda: _taken(session, span.name, sent), release)
    out.taken_s = round(session.clock() - sent, 3)
    if not taken:
        return replace(out, state="not_tried", message=(
            f"Not tried: HOL had not taken this candidate's text {release:g}s after it was sent, because it was "
            "still stopping the check of the candidate before; the file's own text was sent back to it at the end."
        ))
    started = ctx.clock()
    deadline = started + timeout
    reply: goals.Reply = None
    try:
        if await session.wait_until(lambda: session.phase != "compiling", deadline - ctx.clock()):
            failure = _compile_failure(session, trial, span, tactic)
            if failure is not None:
                failure.time_s, failure.taken_s = round(ctx.clock() - started, 3), out.taken_s
                return failure
            reply = await _goals_at(ctx, session, Text(trial), span.start + len(tactic), deadline)
            await session.wait_until(lambda: _verdict_in(session, span.name), deadline - ctx.clock())
    except ServerTimeout:
        pass  # a walk HOL did not answer in time: the candidate is cut off like a loop
    out.time_s = round(ctx.clock() - started, 3)
    return _judged(out, session, trial, span, reply, before, timeout)


def _taken(session: Session, name: str, sent: float) -> bool:
    """HOL has taken the text sent at `sent`: its compile ended, or the proof is checking again since."""
    entry = session.file.proofs.get(name)
    fresh = entry is not None and entry.status == "checking" and (entry.checking_since or 0.0) >= sent
    return session.phase != "compiling" or fresh


def _not_tried(tactic: str) -> m.TryCandidate:
    return m.TryCandidate(tactic=tactic, state="not_tried", message=(
        "Not tried: HOL had not taken an earlier candidate's text either (it was still stopping a looping "
        "check); call try again with this candidate."
    ))


def _compile_failure(session: Session, trial: str, span: _Span, tactic: str) -> m.TryCandidate | None:
    """The candidate as failed if its proof does not compile as written: a compile error
    HOL will never check it past, or a parse error HOL recovered from (Holmake fails on it)."""
    shift = len(tactic) - (span.end - span.start)
    info = textinfo.of(trial)  # prepared once per candidate's text
    lines, index = info.lines, info.index
    inside = []
    walks = set(session.walk_errors)  # a failed walk's diagnostic is the walk's news, not the text's
    for diag in session.file.diagnostics:
        if str(diag.get("message", "")).rstrip() in walks:
            continue
        rng = diag.get("range") or {}
        line, col = lines.from_lsp(rng.get("start", {}), session.encoding)
        if span.block.body_start <= index.start(line) + col - 1 < span.block.end + shift:
            inside.append(diag)
    entry = session.file.proofs.get(span.name)
    errors = [d for d in inside if hol.is_compile_error(d)]
    compiled = session.phase == "completed"
    if hol.did_not_compile(entry.status if entry else None, bool(errors), compiled):
        why = "does not compile, so HOL does not check its proof"
        diag = errors[0]
    else:
        parse = [d for d in inside if hol.is_parse_recovery(d)]
        if not parse or not compiled:
            return None
        why = ("has a parse error: HOL recovers from it and reports only a warning, but Holmake fails on it, "
               "so the proof is not proved as written")
        diag = parse[0]
    error = hol.readable(str(diag.get("message", "")).strip())[:proofs.MAX_MESSAGE_CHARS]
    failed = lines.lsp_range(diag.get("range", {}), session.encoding)
    own = _in_candidate(index, failed, span.start, tactic)
    return m.TryCandidate(
        tactic=tactic, state="failed", error=error, failed_range=failed, candidate_range=own,
        message=f"This candidate {why}: {error.splitlines()[0] if error else 'see error'} "
                f"(at {own.line}:{own.col} of the candidate).",
    )


def _in_candidate(index: LineIndex, rng: m.Range, start: int, tactic: str) -> m.Range:
    """`rng` (of the trial's text) in the candidate's own text, clamped to it: line 1 is its first."""
    def own(line: int, col: int) -> tuple[int, int]:
        at = min(max(index.start(line) + col - 1 - start, 0), len(tactic))
        first = tactic.rfind("\n", 0, at) + 1
        return tactic.count("\n", 0, at) + 1, at - first + 1

    (line, col), (end_line, end_col) = own(rng.line, rng.col), own(rng.end_line, rng.end_col)
    return m.Range(line, col, end_line, end_col)


def _verdict_in(session: Session, name: str) -> bool:
    entry = session.file.proofs.get(name)
    return session.phase != "compiling" and (entry is None or entry.status != "checking")


def _judged(
    out: m.TryCandidate, session: Session, trial: str, span: _Span, reply: goals.Reply,
    before: list[m.Goal], timeout: float,
) -> m.TryCandidate:
    entry = session.file.proofs.get(span.name)
    if entry is not None and session.phase != "compiling":
        blocks = proofs.Blocks(trial)
        diags = proofs.diagnostics(session.file, session.encoding, set(session.walk_errors))
        out.proof = proofs.proof(session.file, entry, session.clock(), blocks, proofs.parse_errors(blocks, diags))
    if session.phase == "blocked":
        return replace(out, state="failed", message=blocked_message(session))
    status = out.proof.status if out.proof is not None else "checking"
    walked = isinstance(reply, replies.GoalState) and not hol.walk_timed_out(reply)
    if not walked and (status == "checking" or out.time_s >= timeout):
        return replace(out, message=(
            f"Cut off after {timeout:g}s: this tactic loops or is far too slow. HOL may still be stopping its "
            "check: it lets go when the next text reaches it (the next candidate, or the file's own text at the "
            "end), which can take it a few seconds; the next candidate's time starts only once it has."
        ))
    if not isinstance(reply, replies.GoalState) or not walked:
        # HOL's walk gave up (its own budget) but the proof's check finished.
        state = "proved" if status == "proved" else "failed"
        return replace(out, state=state, message=f"HOL's goal-state walk timed out; the proof's status is {status}.")
    out.goals = goals.goals_of(reply)
    if reply.error:
        # HOL publishes a failed walk as a diagnostic until the next edit: not a compile error.
        session.walk_errors.append(reply.error.rstrip())
        failed = reply.failed_range
        out.error = hol.readable(reply.error.strip())[:proofs.MAX_MESSAGE_CHARS]
        out.failed_range = Text(trial).lsp_range(failed.as_lsp(), session.encoding) if failed else None
        if out.failed_range is not None:
            out.candidate_range = _in_candidate(textinfo.of(trial).index, out.failed_range, span.start, out.tactic)
        message = "This candidate fails (see error): goals are the state it was given."
        return replace(out, state="failed", message=message)
    out.diff = goaldiff.diff(before, out.goals)
    if status == "proved":
        # The pool's verdict is the truth: goals the walk shows here are closed by what follows.
        message = "This candidate proves the theorem." if not out.goals else (
            f"This candidate proves the theorem: the tactics after it close the {len(out.goals)} goal(s) it leaves."
        )
        return replace(out, state="proved", message=message)
    if out.goals:
        return replace(out, state="goals", message=out.diff.summary)
    detail = f": {out.proof.detail}" if out.proof is not None and out.proof.detail else ""
    return replace(out, state="proved_here", message=(
        f"No goals are left at this point, but the proof's status with it is {status}{detail}."
    ))


async def _restore(ctx: Context, session: Session, file: str) -> Script:
    """Give the server the disk text again and wait (bounded) for HOL to take it.

    The disk text is read afresh: if it changed during the trial, the newest
    one is what every later answer must be about.
    """
    now = await read(ctx, file)
    session.trials.doing("restoring the file's text")
    await session.sync(now.data, now.text, now.hash)
    await session.wait_until(lambda: session.phase != "compiling", ctx.settings.lookup_wait_s)
    return now


async def _shed(ctx: Context, session: Session, before: float | None) -> tuple[bool, str]:
    """Replace the server if the trial pushed it past the soft footprint (it was at
    `before` MB): first give the restored text's checks (and a loop HOL is still
    stopping) a few seconds to finish, so that the answer can say it is under way."""
    if before is not None and before > ctx.settings.soft_footprint_mb:
        return False, ""  # large before the trial: its own proofs did it, and a fresh server would grow the same
    footprint = session.footprint_mb()
    if footprint is not None and footprint > ctx.settings.soft_footprint_mb:
        await session.wait_until(lambda: pool.quiet(session), SHED_WAIT_S)
    return ctx.pool.shed_bloat(session, by_trial=True)


def _message(result: m.TryResult, before: goals.Reply, timeout: float) -> str:
    words = [f"Tried {len(result.candidates)} candidate(s) in place of {result.replaced!r} "
             f"({result.theorem}); the file on disk was not changed."]
    proved = [c.tactic for c in result.candidates if c.state == "proved"]
    if proved:
        words.append(f"Proves the theorem: {proved[0]!r}.")
    if isinstance(before, replies.GoalState) and before.error:
        words.append("An earlier tactic already fails, so the goals before are those at that failure.")
    slow = [(n, c) for n, c in enumerate(result.candidates, 1) if c.taken_s is not None and c.taken_s >= SLOW_RELEASE_S]
    if slow:
        words.append("HOL took " + ", ".join(f"{c.taken_s:.1f}s before candidate {n}" for n, c in slow)
                     + " to let go of the check before it; each candidate's time counts from when HOL took it.")
    tried = [(n, c) for n, c in enumerate(result.candidates, 1) if c.state != "not_tried"]
    if tried and tried[-1][1].state == "timed_out":  # no later candidate's text was taken: it may not have let go
        words.append(f"Candidate {tried[-1][0]} timed out: HOL may still be stopping its check for a few seconds "
                     "after this answer (the file's own text has been sent back, which stops it).")
    if result.changed_on_disk:
        words.append(
            "The file changed on disk during the trial: candidates were tried against the text it had "
            "when the trial began; call try again for the new text."
        )
    return " ".join(words)


# -- goalDiff -----------------------------------------------------------------


async def goal_diff(ctx: Context, req: m.GoalDiff, client: str) -> m.GoalDiffResult:
    """The goals at the first position (before the line's tactics when its column is
    omitted) against those at the second (after the line's tactics)."""
    first = await goals.goal_state(ctx, m.GoalState(req.file, req.line1, req.column1, wait=req.wait), client)
    second = await goals.goal_state(ctx, m.GoalState(req.file, req.line2, req.column2, wait=req.wait), client)
    for r in (first, second):
        if r.state not in ("goals", "proved_here", "failed"):
            raise BadRequest(f"no goals at line {r.line}: {r.message}")
    if first.theorem != second.theorem:
        raise BadRequest(
            f"line {req.line1} is in {first.theorem} and line {req.line2} in {second.theorem}: goalDiff "
            "compares two positions of one proof."
        )
    before = first.before if req.column1 is None and first.before is not None else first.goals
    after = second.goals
    diff = goaldiff.diff(before, after)
    warnings = [r.message for r in (first, second) if r.state == "failed"]
    changed = first.content_hash != second.content_hash
    return m.GoalDiffResult(
        file=first.file, content_hash=second.content_hash, theorem=first.theorem, before=before, after=after,
        diff=diff, server=second.server,
        # Not the summary again: `diff.summary` says it, and answers show both.
        message=" ".join(warnings + (["The file changed on disk between the two positions; ask again."]
                                     if changed else [])),
    )

