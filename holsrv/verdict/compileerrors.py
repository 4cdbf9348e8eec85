"""Which theorems a compile error is about, and what a proof whose declaration
does not compile says about it."""

from __future__ import annotations

import re

from holsrv.lsp import quirks
from holsrv.rpc import messages as m
from holsrv.text import stepping
from holsrv.text.textinfo import Blocks
from holsrv.verdict import diagnosticlist

# HOL's words when a theorem proved during the compile fails (inside `local … end`).
_FAILED_TO_PROVE = re.compile(r'Failed to prove theorem "?([A-Za-z0-9_\'#\[\]]+?)"?[.:\s]')
# The text of a HOL_ERR that a compile-time `Exception … raised` message carries.
_HOL_ERR_TEXT = re.compile(r'message =\s*"((?:[^"\\]|\\.)*)"')


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
            if diag.severity != "error" or quirks.is_proof_diagnostic(diag.message):
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
    owner = diagnosticlist.holder(blocks, diag)
    if owner is not None:
        return [owner]
    if blocks.owner(line) is not None:
        return ()  # what the declaration before this one left unfinished (`holder`): no proof's
    zero_width = (diag.range.line, diag.range.col) == (diag.range.end_line, diag.range.end_col)
    below = blocks.declared_below(line) if zero_width else None
    if below is not None:
        return [below]
    for first, last, names in blocks.locals:
        if first <= line <= last or (zero_width and line < first and _blank_between(blocks, line, first)):
            return names
    return ()


def first_error(diagnostics: list[m.Diagnostic]) -> m.Diagnostic | None:
    """The file's first compile or parse error (`diagnostics` sorted): where Holmake stops."""
    return next((d for d in diagnostics
                 if d.severity == "error" and not quirks.is_proof_diagnostic(d.message)), None)


def stops_before(blocks: Blocks, error: m.Diagnostic | None, name: str) -> bool:
    """Whether Holmake stops at `error` before it reaches proof `name`: the error is not
    `name`'s own and lies at or above its declaration."""
    return (error is not None and name in blocks.lines and error.range.line <= blocks.lines[name][0]
            and name not in error_owners(blocks, error))


def proved_after(error: m.Diagnostic) -> str:
    """What both diagnostics and goalState say of a proof HOL proved past an earlier error."""
    return (f"proved by HOL, which carried on past an earlier error at line {error.range.line} "
            f"({error_summary(error.message)}); Holmake stops at that first error and never reaches it")


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
