"""Running `try` candidates on a file's server: each candidate's text in, the disk text back.

The server is the trial's alone while these run (`TrialGate.exclusive`).
What a candidate's outcome means is `judging`'s; where it goes in the text
is `placement`'s.
"""

from __future__ import annotations

from holsrv.answers.common import Context, blocked_message, read, replace
from holsrv.answers.goals import goals
from holsrv.answers.states import CandidateState
from holsrv.answers.trials import judging, placement
from holsrv.disk.files import Script
from holsrv.errors import RanAway, ServerTimeout
from holsrv.lsp import hol
from holsrv.lsp.proofstates import ProofStatus
from holsrv.pool import admission
from holsrv.rpc import limits
from holsrv.rpc import messages as m
from holsrv.server import runaway
from holsrv.server.session import Session
from holsrv.text import textinfo
from holsrv.text.positions import Text
from holsrv.verdict import hints
from holsrv.verdict.filestate import Phase

# How long a trial that bloated its server waits for it to go quiet, to replace it.
SHED_WAIT_S = 5.0


async def compiled(ctx: Context, session: Session, deadline: float) -> None:
    """Wait for the disk text's compile: the goals before the candidates need it.
    A blocked file is the caller's to answer (`blocked`), as goalState answers it."""
    await session.wait_until(lambda: session.phase != Phase.COMPILING, deadline - ctx.clock())
    if session.phase == Phase.COMPILING:
        raise ServerTimeout(
            f"{session.path.name} is still compiling, so no candidate was tried; call try again in a few "
            "seconds (or call diagnostics, which waits for the compile)."
        )


async def goals_at(ctx: Context, session: Session, text: Text, offset: int, deadline: float) -> goals.Reply:
    """HOL's goal state at `offset` of the server's text: the goals before the tactic there;
    None where the daemon asks no walk (a proof that loops: `runaway.walk_refusal`)."""
    line, col = textinfo.of(text.text).index.line_col(offset)
    loops = ctx.pool.loops.known(session.path, text.text)
    if runaway.walk_refusal(session.file, text.text, line, loops, ctx.clock(), ctx.settings):
        return None
    position = text.to_lsp(line, col, session.encoding)
    while True:
        timeout = max(0.1, min(ctx.settings.request_timeout_s, deadline - ctx.clock()))
        reply = await session.hol.goal_state(position, timeout=timeout)
        if not hol.is_pending(reply) or ctx.clock() >= deadline:
            return reply
        await session.wait_change(min(1.0, deadline - ctx.clock()))


async def run(
    ctx: Context, session: Session, text: str, span: placement.Span, tactic: str, before: list[m.Goal], timeout: float
) -> m.TryCandidate:
    """One candidate in place: its goals, its proof's verdict, its time, its diff.

    Its time starts when HOL has taken its text, not when it was sent: HOL
    first stops the check of the candidate before, which for a looping one
    took a real HOL about 2 s (transcript candidate-loops).
    """
    trial = span.put(text, tactic)
    # A runaway while HOL had not taken the text: the candidate before would
    # not let go; this one was not tried, and is tried on the fresh server.
    out = await _sent(session, trial, span.name, tactic, timeout)
    if out.state == CandidateState.NOT_TRIED:
        return out
    try:
        return hinted(await _checked(ctx, session, trial, span, out, before, timeout), hint_lines(trial, span))
    except RanAway as ran:
        raise Looped(ran_away(tactic, ran), ran) from None


class Looped(Exception):
    """The server was replaced as a runaway while it ran this candidate: the candidate loops."""

    def __init__(self, candidate: m.TryCandidate, ran: RanAway) -> None:
        super().__init__(str(ran))
        self.candidate, self.ran = candidate, ran


def hint_lines(trial: str, span: placement.Span) -> tuple[int, int]:
    """(the proof body's first line, the candidate's first line) in `trial`: the lines a
    hint may send goalState to, since up to the candidate's first line the file has them too."""
    index = textinfo.of(trial).index
    return index.line(span.block.body_start), index.line(span.start)


def hinted(out: m.TryCandidate, lines: tuple[int, int] | None = None) -> m.TryCandidate:
    """A failed or timed-out candidate with its hint, chosen by HOL's words (or the timeout).

    A hint that names a line names one goalState accepts in the file (`lines`, from
    `hint_lines`): the failure's, when it is in the proof body up to the candidate's
    first line; else the candidate's own line.  HOL puts a proof's failure (`unsolved
    goals`) on the theorem's name, the `Theorem` line, which goalState refuses."""
    match out.state:
        case CandidateState.FAILED:
            said = "\n".join(filter(None, [out.error, out.proof.detail if out.proof else ""]))
        case CandidateState.TIMED_OUT:
            said = "timed out"
        case _:
            return out
    line = out.failed_range.line if out.failed_range is not None else None
    if lines is not None:
        body, own = lines
        line = line if line is not None and body <= line <= own else own
    out.hint = hints.hint(said, hints.Context(line=line))
    return out


async def _sent(session: Session, trial: str, name: str, tactic: str, timeout: float) -> m.TryCandidate:
    """Send the candidate's text and wait (bounded) for HOL to take it; not tried if it did not."""
    await textinfo.prepare(trial)
    sent = session.clock()
    await session.sync(trial.encode(), trial)
    out = m.TryCandidate(tactic=tactic, state=CandidateState.TIMED_OUT)
    # A text HOL does not take within letgo_s makes the server a runaway, replaced
    # meanwhile (`runaway`): the wait outlasts that, and ends in `RanAway` then.
    release = max(limits.try_release_s(timeout), runaway.noticed_within(session.settings))
    taken = await session.wait_until(lambda: has_taken(session, name, sent), release)
    out.taken_s = round(session.clock() - sent, 3)
    if not taken:
        return replace(out, state=CandidateState.NOT_TRIED, message=(
            f"Not tried: HOL had not taken this candidate's text {release:g}s after it was sent, because it was "
            "still stopping the check of the candidate before; the file's own text was sent back to it at the end."
        ))
    return out


async def _checked(
    ctx: Context, session: Session, trial: str, span: placement.Span, out: m.TryCandidate, before: list[m.Goal],
    timeout: float,
) -> m.TryCandidate:
    """The candidate HOL has taken, once compiled and checked (within `timeout`), judged."""
    started = ctx.clock()
    deadline = started + timeout
    reply: goals.Reply = None
    try:
        if await session.wait_until(lambda: session.phase != Phase.COMPILING, deadline - ctx.clock()):
            failure = judging.compile_failure(session, trial, span, out.tactic)
            if failure is not None:
                failure.time_s, failure.taken_s = round(ctx.clock() - started, 3), out.taken_s
                return failure
            # The verdict first, and the goals only once the check has ended: a
            # walk of a tactic that loops never ends on some HOL builds, and holds
            # the whole server (transcript walk-of-a-loop).  A candidate still
            # checking at its deadline is cut off unwalked.
            if await session.wait_until(lambda: verdict_in(session, span.name), deadline - ctx.clock()):
                reply = await goals_at(ctx, session, Text(trial), span.goals_offset(out.tactic), deadline)
    except ServerTimeout:
        pass  # a walk HOL did not answer in time: the candidate is cut off like a loop
    out.time_s = round(ctx.clock() - started, 3)
    return judging.judged(out, session, trial, span, reply, before, timeout)


def has_taken(session: Session, name: str, sent: float) -> bool:
    """HOL has taken the text sent at `sent`: its compile ended, or the proof is checking again since."""
    entry = session.file.proofs.get(name)
    fresh = entry is not None and entry.status == ProofStatus.CHECKING and (entry.checking_since or 0.0) >= sent
    return session.phase != Phase.COMPILING or fresh


def stated(text: str, span: placement.Span, out: m.TryCandidate) -> m.TryCandidate:
    """`out`, saying plainly when the candidate changes the theorem's statement."""
    change = placement.statement_change(text, span, out.tactic)
    if change is None:
        return out
    was, now = change
    out.statement = now
    said = (f"This candidate CHANGES THE STATEMENT of {span.block.name}: was `{was}`, now `{now}`; a proof of "
            "another statement is not a proof of the file's (verify names the theorem as changed).")
    return replace(out, message=" ".join(filter(None, [said, out.message])))


def blocked(session: Session, result: m.TryResult, tactics: list[str]) -> m.TryResult:
    """`result` for a blocked file: a result, not an error, with every candidate not tried."""
    why = blocked_message(session)
    said = session.file.blocked or {}
    result.blocked = m.Blocked(modules=list(said.get("modules", [])), message=str(said.get("message", "")))
    result.candidates = [m.TryCandidate(tactic=t, state=CandidateState.NOT_TRIED, message=f"Not tried: {why}")
                         for t in tactics]
    result.message = f"No candidate was tried: {why}"
    return result


def not_tried(tactic: str) -> m.TryCandidate:
    return m.TryCandidate(tactic=tactic, state=CandidateState.NOT_TRIED, message=(
        "Not tried: HOL had not taken an earlier candidate's text either (it was still stopping a looping "
        "check); call try again with this candidate."
    ))


def ran_away(tactic: str, ran: RanAway) -> m.TryCandidate:
    """The candidate the server was on when it was replaced as a runaway: it loops."""
    return hinted(m.TryCandidate(tactic=tactic, state=CandidateState.TIMED_OUT, message=(
        f"This candidate loops: {ran} The next candidates are tried there; do not run this one again as it is."
    )))


def verdict_in(session: Session, name: str) -> bool:
    entry = session.file.proofs.get(name)
    return session.phase != Phase.COMPILING and (entry is None or entry.status != ProofStatus.CHECKING)


async def restore(ctx: Context, session: Session, file: str) -> Script:
    """Give the server the disk text again and wait (bounded) for HOL to take it.

    The disk text is read afresh: if it changed during the trial, the newest
    one is what every later answer must be about.
    """
    now = ctx.pool.texts.over(await read(ctx, file))  # an editor's buffer is never overwritten
    if session.server.runaway is not None:
        return now  # killed: its fresh server opened the file's text itself
    session.trials.doing("restoring the file's text")
    try:
        await session.sync(now.data, now.text, now.hash)
        await session.wait_until(lambda: session.phase != Phase.COMPILING, ctx.settings.lookup_wait_s)
    except RanAway:
        pass  # it would not let go of the last candidate: its fresh server opened the file's text
    return now


async def shed(ctx: Context, session: Session, before: float | None) -> tuple[bool, str]:
    """Replace the server if the trial pushed it past the soft footprint (it was at
    `before` MB): first give the restored text's checks (and a loop HOL is still
    stopping) a few seconds to finish, so that the answer can say it is under way."""
    if before is not None and before > ctx.settings.soft_footprint_mb:
        return False, ""  # large before the trial: its own proofs did it, and a fresh server would grow the same
    footprint = session.footprint_mb()
    if footprint is not None and footprint > ctx.settings.soft_footprint_mb:
        await session.wait_until(lambda: admission.quiet(session), SHED_WAIT_S)
    return ctx.pool.shed_bloat(session, by_trial=True)
