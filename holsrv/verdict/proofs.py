"""Each proof's status as an answer states it: HOL's word, corrected by the text.

HOL's pool calls a proof proved when it ran; Holmake is stricter.  A proof
that uses cheat, or that HOL checked only after recovering from a parse
error in it, is not proved as written.  A theorem the pool never has (one inside
`local … in … end`, one whose declaration does not compile) was checked by the
compile: proved when its declaration compiled without error, failed with the
error otherwise.  The diagnostics themselves are `diagnosticlist`'s, the
attribution of a compile error to its theorems `compileerrors`'s.
"""

from __future__ import annotations

from holsrv.lsp import quirks
from holsrv.lsp.proofstates import ProofStatus
from holsrv.rpc import messages as m
from holsrv.rpc.words import clip
from holsrv.text import stepping
from holsrv.text.textinfo import Blocks
from holsrv.verdict import hints, tally
from holsrv.verdict.compileerrors import compile_errors, does_not_compile, proved_after, stops_before
from holsrv.verdict.compileerrors import first_error as compile_errors_first
from holsrv.verdict.diagnosticlist import MAX_MESSAGE_CHARS, diagnostics, parse_errors
from holsrv.verdict.filestate import FileState, Phase, ProofEntry

# What other modules read here besides the statuses (answers.trials).
__all__ = ["COMPILED", "COMPILED_NOTE", "MAX_MESSAGE_CHARS", "Blocks", "diagnostics", "parse_errors", "proof",
           "status_of", "theorem_status", "unreported_steps"]

# A proved theorem's detail when the compile, not the pool, checked it.
COMPILED = "checked by HOL while compiling"
COMPILED_NOTE = (
    "checked by HOL while compiling, not by its proof pool (theorems inside local … in … end, and "
    "theorems whose declaration does not compile, never get a pool entry): proved when the "
    "declaration compiled without error"
)
_RAN = frozenset({ProofStatus.PROVED, ProofStatus.SUSPENDED})  # pool verdicts that a cheat or a parse error overrides
_WRONG = frozenset({ProofStatus.FAILED, ProofStatus.DIVERGED, ProofStatus.PARSE_ERROR})  # statuses with a hint
# Global names of members compared per proof (see `filestate._CHECKING`).
_UNCHECKED, _CHECKING = ProofStatus.UNCHECKED, ProofStatus.CHECKING
_HOVER_WORDS = {
    "failed": "its proof FAILED (see diagnostics); HOL binds the name anyway, but the statement is not proved",
    "compile_failed": "its declaration does not compile (see diagnostics): the statement is not proved",
    "diverged": "its proof gives a different theorem than its statement's elaboration (see diagnostics)",
    "suspended": "its proof leaves subgoals suspended for Resume blocks",
    "cheated": "its proof uses cheat: the statement is not proved",
    "parse_error": "its proof has a parse error (see diagnostics): it is not proved as written",
    "checking": "its proof is still being checked",
    "unchecked": "its proof has not been checked",
}


def proof(
    file: FileState, entry: ProofEntry, now: float, blocks: Blocks, parse: dict[str, m.Diagnostic],
    errors: dict[str, m.Diagnostic] | None = None,
) -> m.Proof:
    """`entry` as the answer lists it; `parse` from `parse_errors`; `errors` (from
    `compile_errors`, after a completed compile) fail a dropped proof that does not compile."""
    detail = clip(quirks.readable(entry.detail.strip()), MAX_MESSAGE_CHARS) if entry.detail else ""
    status = tally.answer_status(entry.status)
    error = errors.get(entry.name) if errors and status == _UNCHECKED else None
    if error is not None:
        # After an edit a body that does not compile leaves its entry `cheated`
        # and never checked (transcript candidate-unbound-name).
        status, detail = ProofStatus.FAILED, does_not_compile(error)
    elif status == _UNCHECKED:
        detail = (
            "HOL's pool dropped this check and has not run it since; if diagnostics settles like this, "
            "edit the proof or restart to check it"
        )
    elif status in _RAN:
        status, detail = _overridden(entry.name, status, detail, blocks, parse)
    said = error.message if error is not None else detail
    # A hint names a line goalState accepts: the proof's QED line (what is left at its end),
    # not the Theorem line its entry is at.
    spans = blocks.lines.get(entry.name)
    listed = m.Proof(name=entry.name, line=entry.line0 + 1, status=status, detail=detail,
                     hint=hint_for(status, said, spans[2] if spans else entry.line0 + 1))
    if entry.status == _CHECKING:
        listed.checking_s = round(file.checking_for(entry, now), 1)
    return listed


def _overridden(
    name: str, status: str, detail: str, blocks: Blocks, parse_errors: dict[str, m.Diagnostic]
) -> tuple[str, str]:
    """A proof HOL calls proved that Holmake would not accept: parse-recovered or cheated."""
    parse = parse_errors.get(name)
    if parse is not None:
        return ProofStatus.PARSE_ERROR, (
            f"HOL recovered from a parse error at line {parse.range.line} ({parse.message}) and checked the "
            "recovered text; Holmake fails on this proof as written"
        )
    cheat = blocks.cheat_line(name)
    if cheat is not None:
        return ProofStatus.CHEATED, f"uses cheat at line {cheat}: HOL's pool counts it {status}, but it is not proved"
    return status, detail


def after_first_error_steps(
    listed: list[m.Proof], blocks: Blocks, diagnostics_: list[m.Diagnostic]
) -> stepping.Steps[None]:
    """Say of each proof HOL proved past the file's first error (where Holmake stops) that
    it did: status `proved` is HOL's word, and the detail tells Holmake's.  goalState says
    the same sentence (`answers.goalagreement`)."""
    first = compile_errors_first(diagnostics_)
    if first is None:
        return
    proved = ProofStatus.PROVED  # a local, per proof (see `filestate._CHECKING`)
    for chunk in stepping.chunks(listed):
        for p in chunk:
            if p.status == proved and stops_before(blocks, first, p.name):
                p.detail = "; ".join(filter(None, [proved_after(first), p.detail]))
        yield


def unreported_steps(
    known: dict, blocks: Blocks, errors: dict[str, m.Diagnostic], why: str = ""
) -> stepping.Steps[list[m.Proof]]:
    """Every proof in the text that is not in `known`, in steps.

    With `why` (nothing of the current text was checked) each is unreported
    for that reason: before the server has the file, every proof is.
    Otherwise the compile completed, and HOL checked each one while
    compiling: inside `local … in … end` the compile proves it, and a
    declaration that does not compile never reaches the pool.  So each is
    failed with its compile error (`errors`, from `compile_errors` over every
    diagnostic), or proved (detail `COMPILED`).
    """
    missing = []
    for chunk in stepping.chunks(blocks.names):
        for name in chunk:
            if name in known:
                continue
            missing.append(_without_entry(name, blocks.lines[name][0], errors.get(name), why))
        yield
    return missing


def _without_entry(name: str, first: int, error: m.Diagnostic | None, why: str) -> m.Proof:
    if why:
        return m.Proof(name, first, ProofStatus.UNREPORTED, why)
    if error is not None:
        return m.Proof(name, first, ProofStatus.FAILED, does_not_compile(error),
                       hint=hint_for(ProofStatus.FAILED, error.message, first))
    return m.Proof(name, first, ProofStatus.PROVED, COMPILED)


def hint_for(status: str, said: str, line: int) -> str:
    """A wrong proof's hint from HOL's words (`said`); a diverged one's from its status."""
    if status not in _WRONG:
        return ""
    return hints.hint(said if status == ProofStatus.FAILED else f"diverged: {said}", hints.Context(line=line))


def status_of(
    file: FileState, blocks: Blocks, diagnostics_: list[m.Diagnostic], name: str, now: float
) -> m.Proof | None:
    """Proof `name` as the diagnostics answer lists it for the same text, or None
    while nothing of the text was checked (blocked, starting, compiling, or not a proof)."""
    if name not in blocks.lines or file.phase == Phase.BLOCKED or file.version == 0:
        return None
    completed = file.phase == Phase.COMPLETED
    errors = compile_errors(blocks, diagnostics_) if completed else {}
    entry = file.proofs.get(name)
    if entry is not None:
        return proof(file, entry, now, blocks, parse_errors(blocks, diagnostics_), errors)
    if not completed:
        return None
    return _without_entry(name, blocks.lines[name][0], errors.get(name), "")


def theorem_status(file: FileState, text: str, encoding: str, name: str, now: float) -> str:
    """For hover: a word about `name`'s proof when it is a theorem of this file not proved."""
    blocks = Blocks(text)
    entry = file.proofs.get(name)
    if name not in blocks.lines and entry is None:
        return ""
    diags = diagnostics(file, encoding, set())
    errors = compile_errors(blocks, diags) if file.phase == Phase.COMPLETED else {}
    if entry is None:
        if file.phase != Phase.COMPLETED:
            return f"{name}: {_HOVER_WORDS['unchecked']}"
        return f"{name}: {_HOVER_WORDS['compile_failed']}" if name in errors else ""
    listed = proof(file, entry, now, blocks, parse_errors(blocks, diags), errors)
    words = _HOVER_WORDS.get(listed.status)
    return f"{name}: {words}" if words else ""
