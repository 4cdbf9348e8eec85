"""A goal-state answer that says nothing the file's diagnostics contradict for the
same text: a compile error at or before the position, a cheat, a proved QED line."""

from __future__ import annotations

from holsrv.answers.common import replace
from holsrv.answers.goals.goalcolumns import Where
from holsrv.answers.states import PositionState
from holsrv.lsp import quirks
from holsrv.lsp.proofstates import ProofStatus
from holsrv.rpc import messages as m
from holsrv.server.session import Session
from holsrv.text.textinfo import Blocks
from holsrv.verdict import compileerrors, diagnosticlist, proofs

QED_NOTE = "This is the QED line: goals is what is left at the end of the proof."
# What the QED line says when the diagnostics answer for the same text has a verdict.
_QED_SAYS = {
    "proved": "This is the QED line: diagnostics reports {name} proved, so nothing is left at the end of the proof.",
    "failed": "This is the QED line: diagnostics reports {name} failed (see diagnostics); goals is what is "
              "left at the end of the proof.",
    "diverged": "This is the QED line: diagnostics reports that {name}'s proof gives a different theorem than "
                "its statement (see diagnostics).",
    "parse_error": "This is the QED line: HOL recovered from a parse error in {name} and checked what it "
                   "recovered; Holmake fails on it as written (see diagnostics).",
    "suspended": "This is the QED line: {name} leaves subgoals suspended for Resume blocks.",
}


def agreeing(result: m.GoalStateResult, session: Session, text: str, where: Where) -> m.GoalStateResult:
    """`result` with no sentence the file's diagnostics contradict at the same text: a
    compile error at or before the position first, a cheat named as a cheat, the QED
    line of a proof diagnostics calls proved said to be proved."""
    blocks = Blocks(text)
    name = blocks.owner(result.line)
    if name is None:
        return result
    diagnostics = diagnosticlist.diagnostics(session.file, session.encoding, set(session.walk_errors))
    listed = proofs.status_of(session.file, blocks, diagnostics, name, session.clock())
    status = listed.status if listed is not None else ""
    first = compileerrors.first_error(diagnostics)
    if status == ProofStatus.PROVED and compileerrors.stops_before(blocks, first, name):
        assert first is not None
        return _proved_after(_as_listed(result, blocks, name, status, where), first, name)
    error = _compile_error(blocks, diagnostics, name, result.line)
    if error is not None:
        return _with_compile_error(result, error, name, blocks)
    return _as_listed(result, blocks, name, status, where)


def _as_listed(result: m.GoalStateResult, blocks: Blocks, name: str, status: str, where: Where) -> m.GoalStateResult:
    """`result` agreeing with diagnostics' `status` for proof `name`: a cheat named as a
    cheat, the QED line of a proved proof said to be proved."""
    cheat = blocks.cheat_line(name)
    if where.kind == "qed" and result.state != PositionState.FAILED:  # a failed walk already says where it failed
        if status == ProofStatus.CHEATED and cheat is not None:
            return _cheated_qed(result, name, cheat)
        if status in _QED_SAYS:
            said = _QED_SAYS[status].format(name=name)
        else:
            return result
        if status == ProofStatus.PROVED:
            # HOL's walk at QED can show the goal the proof started from.
            return replace(result, state=PositionState.PROVED_HERE, goals=[], before=None, message=said)
        return replace(result, message=" ".join([said, *_without(result.message, QED_NOTE)]))
    if result.state == PositionState.PROVED_HERE and cheat is not None and cheat <= result.line:
        return replace(result, state=PositionState.CHEATED, message=(
            f"No goals are left here only because of cheat (line {cheat}): the goal is not proved, and "
            f"diagnostics counts {name} as a cheat."
        ))
    return result


def _cheated_qed(result: m.GoalStateResult, name: str, cheat: int) -> m.GoalStateResult:
    """The QED line of a proof that uses cheat: never `proved_here`, and no sentence
    saying the tactics prove the goal (the walk's words are about cheat's "proof")."""
    said = f"This is the QED line: {name} is not proved: it uses cheat at line {cheat}."
    if result.state != PositionState.PROVED_HERE:
        return replace(result, message=" ".join([said, *_without(result.message, QED_NOTE)]))
    return replace(result, state=PositionState.CHEATED, goals=[], before=None, message=(
        f"{said} No goals are left at the end of the proof only because of cheat: diagnostics counts "
        f"{name} as a cheat."
    ))


def _proved_after(result: m.GoalStateResult, first: m.Diagnostic, name: str) -> m.GoalStateResult:
    """A proof diagnostics lists proved past the file's first error: the same sentence as
    its detail there, before what the walk says (HOL's goals are those it proved)."""
    said = f"Diagnostics reports {name} {compileerrors.proved_after(first)}: fix line {first.range.line} first."
    return replace(result, message=" ".join(filter(None, [said, result.message])))


def _without(message: str, sentence: str) -> list[str]:
    rest = message.replace(sentence, "").strip()
    return [rest] if rest else []


def _compile_error(blocks: Blocks, diagnostics: list[m.Diagnostic], name: str, line: int) -> m.Diagnostic | None:
    """The first compile error at or before `line` that is about proof `name` (its lines,
    or its statement) or about no proof and before it."""
    first = blocks.lines[name][0]
    for diag in diagnostics:
        if diag.range.line > line:
            break
        if diag.severity != "error" or quirks.is_proof_diagnostic(diag.message):
            continue
        owners = compileerrors.error_owners(blocks, diag)
        if name in owners or (not owners and diag.range.line < first):
            return diag
    return None


def _with_compile_error(
    result: m.GoalStateResult, error: m.Diagnostic, name: str, blocks: Blocks
) -> m.GoalStateResult:
    where = "before this proof" if error.range.line < blocks.lines[name][0] else f"in {name}"
    said = (
        f"HOL reports a compile error {where}, at line {error.range.line}, column {error.range.col}: "
        f"{compileerrors.error_summary(error.message)}. Until it is fixed the goals here are not those of the "
        "text as written, and diagnostics does not count this proof proved."
    )
    if result.error:
        return replace(result, message=" ".join([said, result.message]))
    return replace(result, state=PositionState.FAILED, error=error.message, failed_range=error.range, message=said)
