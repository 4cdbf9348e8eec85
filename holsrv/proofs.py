"""Each proof's status as an answer states it: HOL's word, corrected by the text.

HOL's pool calls a proof proved when it ran; Holmake is stricter.  A proof
that uses cheat, or that HOL checked only after recovering from a parse
error in it, is not proved as written, and a proof the pool never reported
is not checked.  Also here: the diagnostics as answers carry them, and where
a failure still sits on its theorem's name.
"""

from __future__ import annotations

import bisect

from holsrv import stepping, tally, textinfo
from holsrv.filestate import FileState, ProofEntry
from holsrv.lsp import hol
from holsrv.positions import Text
from holsrv.rpc import messages as m
from holsrv.rpc.words import clip

_SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}
# Bounds on what one answer carries: an agent's context is not a log file.
MAX_DIAGNOSTICS = 200
MAX_MESSAGE_CHARS = 2000
PARSE_NOTE = "a parse error: HOL reports it as a warning and recovers, but Holmake fails on it"
_RAN = ("proved", "suspended")  # pool verdicts that a cheat or a parse error overrides
_HOVER_WORDS = {
    "failed": "its proof FAILED (see diagnostics); HOL binds the name anyway, but the statement is not proved",
    "diverged": "its proof gives a different theorem than its statement's elaboration (see diagnostics)",
    "suspended": "its proof leaves subgoals suspended for Resume blocks",
    "cheated": "its proof uses cheat: the statement is not proved",
    "parse_error": "its proof has a parse error (see diagnostics): it is not proved as written",
    "checking": "its proof is still being checked",
    "unchecked": "its proof has not been checked",
}


class Blocks:
    """The text's proof blocks by pool name, with their line spans and cheats."""

    def __init__(self, text: str) -> None:
        info = textinfo.of(text)  # computed once per text
        self.index = info.index
        self.names = info.names
        self.lines = info.block_lines  # (first line, line of the body's start, last line), 1-based
        self.cheats = info.cheats
        self.owner = info.owner  # the proof a line belongs to, by bisection
        self.cheat_line = info.cheat_line  # the line of the first cheat in a proof's block


def diagnostics(file: FileState, encoding: str, walk_errors: set[str]) -> list[m.Diagnostic]:
    """HOL's diagnostics for the file, sorted, parse recoveries made errors, walk failures left out.

    A failed goal-state walk is the walk's news, not a problem of the text:
    it must not change the verdict or appear twice.
    """
    return stepping.run(diagnostics_steps(file, encoding, walk_errors))


def diagnostics_steps(file: FileState, encoding: str, walk_errors: set[str]) -> stepping.Steps[list[m.Diagnostic]]:
    """`diagnostics` in steps: HOL may report thousands (a warning per theorem)."""
    lines = textinfo.of(file.text).lines  # split once per text, not per answer
    converted: list[m.Diagnostic] = []
    for chunk in stepping.chunks(file.diagnostics):
        converted += [_diagnostic(lines, d, encoding) for d in chunk
                      if str(d.get("message", "")).rstrip() not in walk_errors]
        yield
    converted.sort(key=_position)  # HOL sends them in order, mostly: a pass or two in C
    return converted


def _position(diag: m.Diagnostic) -> tuple[int, int]:
    return diag.range.line, diag.range.col


def _diagnostic(text: Text, diag: dict, encoding: str) -> m.Diagnostic:
    parse = hol.is_parse_recovery(diag)
    return m.Diagnostic(
        range=text.lsp_range(diag.get("range", {}), encoding),
        severity="error" if parse else _SEVERITY.get(diag.get("severity", 1), "error"),
        message=clip(hol.readable(str(diag.get("message", "")).rstrip()), MAX_MESSAGE_CHARS),
        note=PARSE_NOTE if parse else "",
    )


def note_failures(blocks: Blocks, diagnostics: list[m.Diagnostic], complete: bool) -> None:
    """Say where a failure still sits on its theorem's name instead of its failing step."""
    for diag in diagnostics:
        name = blocks.owner(diag.range.line) if hol.is_proof_failure(diag.message) else None
        if name is None or diag.range.line >= blocks.lines[name][1]:
            continue
        _, body, last = blocks.lines[name]
        diag.note = (
            "provisional location: HOL first reports a failure on the theorem's name and moves it to the "
            "failing tactic once its checks are done; call diagnostics again before editing"
            if not complete else
            f"HOL did not locate the failing tactic; call goalState on lines {body}-{last} to find it"
        )


def parse_errors(blocks: Blocks, diagnostics: list[m.Diagnostic]) -> dict[str, m.Diagnostic]:
    """The first parse recovery in each proof that has one, by pool name: once
    per answer, not once per proof."""
    found: dict[str, m.Diagnostic] = {}
    for diag in diagnostics:
        owner = blocks.owner(diag.range.line) if diag.note == PARSE_NOTE else None
        if owner is not None:
            found.setdefault(owner, diag)
    return found


def proof(file: FileState, entry: ProofEntry, now: float, blocks: Blocks, parse: dict[str, m.Diagnostic]) -> m.Proof:
    """`entry` as the answer lists it; `parse` from `parse_errors`."""
    detail = clip(hol.readable(entry.detail.strip()), MAX_MESSAGE_CHARS) if entry.detail else ""
    status = tally.answer_status(entry.status)
    if status == "unchecked":
        detail = (
            "HOL's pool dropped this check and has not run it since; if diagnostics settles like this, "
            "edit the proof or restart to check it"
        )
    elif status in _RAN:
        status, detail = _overridden(entry.name, status, detail, blocks, parse)
    listed = m.Proof(name=entry.name, line=entry.line0 + 1, status=status, detail=detail)
    if entry.status == "checking":
        listed.checking_s = round(file.checking_for(entry, now), 1)
    return listed


def _overridden(
    name: str, status: str, detail: str, blocks: Blocks, parse_errors: dict[str, m.Diagnostic]
) -> tuple[str, str]:
    """A proof HOL calls proved that Holmake would not accept: parse-recovered or cheated."""
    parse = parse_errors.get(name)
    if parse is not None:
        return "parse_error", (
            f"HOL recovered from a parse error at line {parse.range.line} ({parse.message}) and checked the "
            "recovered text; Holmake fails on this proof as written"
        )
    cheat = blocks.cheat_line(name)
    if cheat is not None:
        return "cheated", f"uses cheat at line {cheat}: HOL's pool counts it {status}, but it is not proved"
    return status, detail


def unreported(known: dict, blocks: Blocks, diagnostics: list[m.Diagnostic], why: str = "") -> list[m.Proof]:
    """Every proof in the text that is not in `known`, as unchecked.

    After a completed compile each proof should have a pool entry; one
    without (an interrupted pass that never handed it over, a tactic that
    did not compile) was not checked, and must not vanish from the tally.
    """
    return stepping.run(unreported_steps(known, blocks, diagnostics, why))


def unreported_steps(
    known: dict, blocks: Blocks, diagnostics: list[m.Diagnostic], why: str = ""
) -> stepping.Steps[list[m.Proof]]:
    """`unreported` in steps: before the server has the file, every proof is unreported."""
    errors = sorted(d.range.line for d in diagnostics if d.severity == "error")
    missing = []
    for chunk in stepping.chunks(blocks.names):
        for name in chunk:
            if name in known:
                continue
            first, _, last = blocks.lines[name]
            at = bisect.bisect_left(errors, first)
            error = errors[at] if at < len(errors) and errors[at] <= last else None
            reason = why or (
                f"not checked: its proof does not compile (error at line {error})" if error is not None
                else "HOL never reported checking it; edit the file or restart its server to check it"
            )
            missing.append(m.Proof(name, first, "unreported", reason))
        yield
    return missing


def theorem_status(file: FileState, text: str, encoding: str, name: str, now: float) -> str:
    """For hover: a word about `name`'s proof when it is a theorem of this file not proved."""
    blocks = Blocks(text)
    entry = file.proofs.get(name)
    if entry is None:
        return f"{name}: {_HOVER_WORDS['unchecked']}" if name in blocks.lines else ""
    listed = proof(file, entry, now, blocks, parse_errors(blocks, diagnostics(file, encoding, set())))
    words = _HOVER_WORDS.get(listed.status)
    return f"{name}: {words}" if words else ""
