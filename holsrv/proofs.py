"""Each proof's status as an answer states it: HOL's word, corrected by the text.

HOL's pool calls a proof proved when it ran; Holmake is stricter.  A proof
that uses cheat, or that HOL checked only after recovering from a parse
error in it, is not proved as written.  A theorem the pool never has (one inside
`local … in … end`, one whose declaration does not compile) was checked by the
compile: proved when its declaration compiled without error, failed with the
error otherwise.  Also here: the diagnostics as answers carry them, and where
a failure still sits on its theorem's name.
"""

from __future__ import annotations

import re

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
# A proved theorem's detail when the compile, not the pool, checked it.
COMPILED = "checked by HOL while compiling"
COMPILED_NOTE = (
    "checked by HOL while compiling, not by its proof pool (theorems inside local … in … end, and "
    "theorems whose declaration does not compile, never get a pool entry): proved when the "
    "declaration compiled without error"
)
# HOL's words when a theorem proved during the compile fails (inside `local … end`).
_FAILED_TO_PROVE = re.compile(r'Failed to prove theorem "?([A-Za-z0-9_\'#\[\]]+?)"?[.:\s]')
# The text of a HOL_ERR that a compile-time `Exception … raised` message carries.
_HOL_ERR_TEXT = re.compile(r'message =\s*"((?:[^"\\]|\\.)*)"')
_RAN = ("proved", "suspended")  # pool verdicts that a cheat or a parse error overrides
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
        self.locals = info.locals  # the `local … end` blocks, their lines and theorems
        self.text_lines = info.lines.lines
        self._info = info

    def declared_below(self, line: int) -> str | None:
        """The proof whose declaration follows `line` with only blank lines between."""
        return self._info.declared_below(line)


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


def proof(
    file: FileState, entry: ProofEntry, now: float, blocks: Blocks, parse: dict[str, m.Diagnostic],
    errors: dict[str, m.Diagnostic] | None = None,
) -> m.Proof:
    """`entry` as the answer lists it; `parse` from `parse_errors`; `errors` (from
    `compile_errors`, after a completed compile) fail a dropped proof that does not compile."""
    detail = clip(hol.readable(entry.detail.strip()), MAX_MESSAGE_CHARS) if entry.detail else ""
    status = tally.answer_status(entry.status)
    error = errors.get(entry.name) if errors and status == "unchecked" else None
    if error is not None:
        # After an edit a body that does not compile leaves its entry `cheated`
        # and never checked (transcript candidate-unbound-name).
        status, detail = "failed", does_not_compile(error)
    elif status == "unchecked":
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


def unreported(known: dict, blocks: Blocks, errors: dict[str, m.Diagnostic], why: str = "") -> list[m.Proof]:
    """Every proof in the text that is not in `known`.

    With `why` (nothing of the current text was checked) each is unreported
    for that reason.  Otherwise the compile completed, and HOL checked each
    one while compiling: inside `local … in … end` the compile proves it, and
    a declaration that does not compile never reaches the pool.  So each is
    failed with its compile error (`errors`, from `compile_errors` over every
    diagnostic), or proved (detail `COMPILED`).
    """
    return stepping.run(unreported_steps(known, blocks, errors, why))


def unreported_steps(
    known: dict, blocks: Blocks, errors: dict[str, m.Diagnostic], why: str = ""
) -> stepping.Steps[list[m.Proof]]:
    """`unreported` in steps (`errors` from `compile_errors`): before the server has
    the file, every proof is unreported."""
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
        return m.Proof(name, first, "unreported", why)
    if error is not None:
        return m.Proof(name, first, "failed", does_not_compile(error))
    return m.Proof(name, first, "proved", COMPILED)


def compile_errors(blocks: Blocks, diagnostics: list[m.Diagnostic]) -> dict[str, m.Diagnostic]:
    """Each theorem's first compile error, by pool name (once per answer, not per proof).

    An error belongs to the theorem it names (`Failed to prove theorem "x"`, which
    HOL reports on the `local` block), else to the theorem whose lines hold it,
    else, zero-width in the blank lines above a declaration (where HOL puts a
    statement that does not elaborate: transcript error-classes), to the theorem
    declared there, else, inside a `local … end` but in no theorem, to all of
    that block's theorems: none of them is bound if the block does not compile.
    """
    return stepping.run(compile_errors_steps(blocks, diagnostics))


def compile_errors_steps(blocks: Blocks, diagnostics: list[m.Diagnostic]) -> stepping.Steps[dict[str, m.Diagnostic]]:
    """`compile_errors` in steps: HOL may report thousands of diagnostics."""
    found: dict[str, m.Diagnostic] = {}
    for chunk in stepping.chunks(diagnostics):
        for diag in chunk:
            if diag.severity != "error" or hol.is_proof_diagnostic(diag.message):
                continue
            for name in error_owners(blocks, diag):
                found.setdefault(name, diag)
        yield
    return found


def error_owners(blocks: Blocks, diag: m.Diagnostic) -> list[str] | tuple[str, ...]:
    """The theorems compile error `diag` is about (see `compile_errors`); none for top-level code."""
    named = _FAILED_TO_PROVE.search(diag.message + " ")
    if named is not None and named.group(1) in blocks.lines:
        return [named.group(1)]
    line = diag.range.line
    owner = blocks.owner(line)
    if owner is not None:
        return [owner]
    zero_width = (diag.range.line, diag.range.col) == (diag.range.end_line, diag.range.end_col)
    below = blocks.declared_below(line) if zero_width else None
    if below is not None:
        return [below]
    for first, last, names in blocks.locals:
        if first <= line <= last or (zero_width and line < first and _blank_between(blocks, line, first)):
            return names
    return ()


def _blank_between(blocks: Blocks, line: int, first: int) -> bool:
    return not any(blocks.text_lines[between - 1].strip() for between in range(line + 1, first))


def does_not_compile(error: m.Diagnostic) -> str:
    """A proof's detail when its declaration does not compile: HOL's first words and where."""
    return f"does not compile: {error_summary(error.message)} (line {error.range.line}); see diagnostics"


def error_summary(message: str) -> str:
    """The first informative line of a HOL compile error: a bare `Exception … HOL_ERR`
    dump is read for the error's own text."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    if first == "Exception":
        carried = _HOL_ERR_TEXT.search(message)
        if carried is not None:
            text = carried.group(1).replace("\\n", "\n").replace('\\"', '"')
            said = [line.strip() for line in text.splitlines() if line.strip()]
            if said:
                return said[0]
    return first


def status_of(
    file: FileState, blocks: Blocks, diagnostics_: list[m.Diagnostic], name: str, now: float
) -> m.Proof | None:
    """Proof `name` as the diagnostics answer lists it for the same text, or None
    while nothing of the text was checked (blocked, starting, compiling, or not a proof)."""
    if name not in blocks.lines or file.phase == "blocked" or file.version == 0:
        return None
    completed = file.phase == "completed"
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
    errors = compile_errors(blocks, diags) if file.phase == "completed" else {}
    if entry is None:
        if file.phase != "completed":
            return f"{name}: {_HOVER_WORDS['unchecked']}"
        return f"{name}: {_HOVER_WORDS['compile_failed']}" if name in errors else ""
    listed = proof(file, entry, now, blocks, parse_errors(blocks, diags), errors)
    words = _HOVER_WORDS.get(listed.status)
    return f"{name}: {words}" if words else ""
