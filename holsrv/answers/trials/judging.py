"""The answer about one `try` candidate, and the message of the whole trial.

Reads what the server said after the candidate's text (the file state, the
goal-state walk) and says what the candidate did: proved, goals, failed,
timed out.  Sends nothing to the server.
"""

from __future__ import annotations

from holsrv.answers.common import blocked_message, replace
from holsrv.answers.goals import goals
from holsrv.answers.states import CandidateState
from holsrv.answers.trials import goaldiff, placement
from holsrv.lsp import hol, replies
from holsrv.lsp.proofstates import ProofStatus
from holsrv.rpc import messages as m
from holsrv.server.session import Session
from holsrv.text import textinfo
from holsrv.text.positions import Text
from holsrv.verdict import proofs
from holsrv.verdict.filestate import Phase

# HOL takes a candidate about 0.3 s after it is sent (its debounce); longer
# means it was still stopping the check before, and the answer says so.
SLOW_RELEASE_S = 1.0


def compile_failure(session: Session, trial: str, span: placement.Span, tactic: str) -> m.TryCandidate | None:
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
        if span.first <= index.start(line) + col - 1 < span.block.end + shift:
            inside.append(diag)
    entry = session.file.proofs.get(span.name)
    errors = [d for d in inside if hol.is_compile_error(d)]
    compiled = session.phase == Phase.COMPLETED
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
    own = placement.in_candidate(index, failed, span.start, tactic)
    return m.TryCandidate(
        tactic=tactic, state=CandidateState.FAILED, error=error, failed_range=failed, candidate_range=own,
        message=f"This candidate {why}: {error.splitlines()[0] if error else 'see error'} "
                f"(at {own.line}:{own.col} of the candidate).",
    )


def judged(
    out: m.TryCandidate, session: Session, trial: str, span: placement.Span, reply: goals.Reply,
    before: list[m.Goal], timeout: float,
) -> m.TryCandidate:
    """What the candidate did: from the server's word on its proof and the goal-state walk at its end."""
    entry = session.file.proofs.get(span.name)
    if entry is not None and session.phase != Phase.COMPILING:
        blocks = proofs.Blocks(trial)
        diags = proofs.diagnostics(session.file, session.encoding, set(session.walk_errors))
        out.proof = proofs.proof(session.file, entry, session.clock(), blocks, proofs.parse_errors(blocks, diags))
    if session.phase == Phase.BLOCKED:
        return replace(out, state=CandidateState.FAILED, message=blocked_message(session))
    status = out.proof.status if out.proof is not None else ProofStatus.CHECKING
    walked = isinstance(reply, replies.GoalState) and not hol.walk_timed_out(reply)
    if not walked and (status == ProofStatus.CHECKING or out.time_s >= timeout):
        return replace(out, message=(
            f"Cut off after {timeout:g}s: this tactic loops or is far too slow. HOL may still be stopping its "
            "check: it lets go when the next text reaches it (the next candidate, or the file's own text at the "
            "end), which can take it a few seconds; the next candidate's time starts only once it has."
        ))
    if not isinstance(reply, replies.GoalState) or not walked:
        # HOL's walk gave up (its own budget) but the proof's check finished.
        state = CandidateState.PROVED if status == ProofStatus.PROVED else CandidateState.FAILED
        return replace(out, state=state, message=f"HOL's goal-state walk timed out; the proof's status is {status}.")
    out.goals = goals.goals_of(reply)
    if reply.error:
        return _walk_failed(out, session, trial, span, reply)
    out.diff = goaldiff.diff(before, out.goals)
    return _walked(out, status)


def _walk_failed(
    out: m.TryCandidate, session: Session, trial: str, span: placement.Span, reply: replies.GoalState
) -> m.TryCandidate:
    """A tactic of the candidate fails: its error, where, and the goals it was given."""
    # HOL publishes a failed walk as a diagnostic until the next edit: not a compile error.
    session.walk_errors.append(reply.error.rstrip())
    failed = reply.failed_range
    out.error = hol.readable(reply.error.strip())[:proofs.MAX_MESSAGE_CHARS]
    out.failed_range = Text(trial).lsp_range(failed.as_lsp(), session.encoding) if failed else None
    if out.failed_range is not None:
        index = textinfo.of(trial).index
        out.candidate_range = placement.in_candidate(index, out.failed_range, span.start, out.tactic)
    message = "This candidate fails (see error): goals are the state it was given."
    return replace(out, state=CandidateState.FAILED, message=message)


def _walked(out: m.TryCandidate, status: str) -> m.TryCandidate:
    """The candidate ran to its end: it proves the theorem, leaves goals, or closes them here only."""
    if status == ProofStatus.PROVED:
        # The pool's verdict is the truth: goals the walk shows here are closed by what follows.
        message = "This candidate proves the theorem." if not out.goals else (
            f"This candidate proves the theorem: the tactics after it close the {len(out.goals)} goal(s) it leaves."
        )
        return replace(out, state=CandidateState.PROVED, message=message)
    if out.goals:
        assert out.diff is not None
        return replace(out, state=CandidateState.GOALS, message=out.diff.summary)
    detail = f": {out.proof.detail}" if out.proof is not None and out.proof.detail else ""
    return replace(out, state=CandidateState.PROVED_HERE, message=(
        f"No goals are left at this point, but the proof's status with it is {status}{detail}."
    ))


# What a trial's message says of the file; `applying` takes it out once it writes the file.
UNTOUCHED = "; the file on disk was not changed."


def message(result: m.TryResult, before: goals.Reply, timeout: float, taken_back: bool = True,
            letgo_s: float = 10.0) -> str:
    """The trial's message; `taken_back`: HOL has taken the file's own text back (so it let go
    of the last candidate's check), or the server was replaced."""
    whole = "the whole proof " if result.whole_proof else ""
    words = [f"Tried {len(result.candidates)} candidate(s) in place of {whole}{result.replaced!r} "
             f"({result.theorem}){UNTOUCHED}"]
    changed = [n for n, c in enumerate(result.candidates, 1) if c.statement]
    if changed:
        which = (f"Candidate {changed[0]} changes" if len(changed) == 1
                 else f"Candidates {', '.join(map(str, changed))} change")
        words.append(f"{which} the theorem's statement (see each); verify will name it as changed.")
    proved = [c for c in result.candidates if c.state == CandidateState.PROVED]
    if proved:
        words.append(f"Proves the theorem: {proved[0].tactic!r}" + (
            f", a CHANGED STATEMENT: `{proved[0].statement}`." if proved[0].statement else "."))
    if isinstance(before, replies.GoalState) and before.error:
        words.append("An earlier tactic already fails, so the goals before are those at that failure.")
    slow = [(n, c) for n, c in enumerate(result.candidates, 1) if c.taken_s is not None and c.taken_s >= SLOW_RELEASE_S]
    if slow:
        words.append("HOL took " + ", ".join(f"{c.taken_s:.1f}s before candidate {n}" for n, c in slow)
                     + " to let go of the check before it; each candidate's time counts from when HOL took it.")
    tried = [(n, c) for n, c in enumerate(result.candidates, 1) if c.state != CandidateState.NOT_TRIED]
    if tried and tried[-1][1].state == CandidateState.TIMED_OUT and not taken_back:
        # No later text was taken: only what the daemon does next may be promised.
        words.append(f"Candidate {tried[-1][0]} timed out, and HOL had not yet taken the file's own text back "
                     "when this answer was given: it lets go of the candidate's check when it does; if it "
                     f"does not within {letgo_s:g}s, the daemon replaces the server with a fresh one.")
    if result.changed_on_disk:
        words.append(
            "The file changed on disk during the trial: candidates were tried against the text it had "
            "when the trial began; call try again for the new text."
        )
    return " ".join(words)
