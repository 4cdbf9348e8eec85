"""HOL's diagnostics as answers carry them: sorted, bounded, parse recoveries made
errors, and a note where a failure still sits on its theorem's name."""

from __future__ import annotations

from holsrv.lsp import quirks
from holsrv.rpc import messages as m
from holsrv.rpc.words import clip
from holsrv.text import stepping, textinfo
from holsrv.text.positions import Text
from holsrv.text.textinfo import Blocks
from holsrv.verdict.filestate import FileState

_SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}
# Bounds on what one answer carries: an agent's context is not a log file.
MAX_DIAGNOSTICS = 200
MAX_MESSAGE_CHARS = 2000
PARSE_NOTE = "a parse error: HOL reports it as a warning and recovers, but Holmake fails on it"


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
    parse = quirks.is_parse_recovery(diag)
    return m.Diagnostic(
        range=text.lsp_range(diag.get("range", {}), encoding),
        severity="error" if parse else _SEVERITY.get(diag.get("severity", 1), "error"),
        message=clip(quirks.readable(str(diag.get("message", "")).rstrip()), MAX_MESSAGE_CHARS),
        note=PARSE_NOTE if parse else "",
    )


def note_failures(blocks: Blocks, diagnostics: list[m.Diagnostic], complete: bool) -> None:
    """Say where a failure still sits on its theorem's name instead of its failing step."""
    for diag in diagnostics:
        name = blocks.owner(diag.range.line) if quirks.is_proof_failure(diag.message) else None
        if name is None or diag.range.line >= blocks.lines[name][1]:
            continue
        _, body, last = blocks.lines[name]
        diag.note = (
            "provisional location: HOL first reports a failure on the theorem's name and moves it to the "
            "failing tactic once its checks are done; call diagnostics again before editing"
            if not complete else
            f"HOL did not locate the failing tactic; call goalState on lines {body}-{last} to find it"
        )


def holder(blocks: Blocks, diag: m.Diagnostic) -> str | None:
    """The proof whose lines hold `diag`, but for a parse recovery at the very start of a
    declaration: HOL reports what a declaration left unfinished (`expected 'End'`,
    `expected 'QED'`) on the first token after it, the next declaration's keyword, and
    that is about the one before, not the next (whose layout is fine).  Where the one
    before is a proof, the two blocks meet there and `owner` already names it."""
    owner = blocks.owner(diag.range.line)
    at_keyword = owner is not None and diag.range.col == 1 and blocks.lines[owner][0] == diag.range.line
    return None if at_keyword and diag.note == PARSE_NOTE else owner


def parse_errors(blocks: Blocks, diagnostics: list[m.Diagnostic]) -> dict[str, m.Diagnostic]:
    """The first parse recovery in each proof that has one, by pool name: once
    per answer, not once per proof."""
    found: dict[str, m.Diagnostic] = {}
    for diag in diagnostics:
        owner = holder(blocks, diag) if diag.note == PARSE_NOTE else None
        if owner is not None:
            found.setdefault(owner, diag)
    return found
