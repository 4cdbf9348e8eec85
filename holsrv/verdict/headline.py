"""The verdict word and headline of a diagnostics answer, from the proofs it lists.

The verdict is OK only when Holmake would build the file: never while
anything is unproved, failed, cheated, unchecked, still checking or parsed
only by HOL's error recovery, and "could not check" is never "no errors".
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Collection, Iterable

from holsrv.lsp import quirks
from holsrv.lsp.proofstates import ProofStatus
from holsrv.rpc import messages as m
from holsrv.rpc.words import duration, plural
from holsrv.text import stepping
from holsrv.verdict import diagnosticlist, proofs
from holsrv.verdict.filestate import FileState

# Proofs a headline names (the proofs list has them all).
MAX_NAMED_PROOFS = 20


class Statuses(dict[str, list[tuple[int, str]]]):
    """The listed proofs' lines and names by status, in the list's order."""

    compiled: list[str]  # the proved ones the compile checked, not the pool

    def elements(self) -> Iterable[str]:
        """Each proof's status, as `tally_of` counts them."""
        for status, proofs_ in self.items():
            yield from itertools.repeat(status, len(proofs_))

    def names(self, *statuses: str) -> list[str]:
        """The names of the proofs with any of `statuses`, by line."""
        return [name for _, name in heapq.merge(*(self.get(status, []) for status in statuses))]


def by_status(listed: list[m.Proof]) -> stepping.Steps[Statuses]:
    statuses = Statuses()
    statuses.compiled = []
    for chunk in stepping.chunks(listed):
        for p in chunk:
            statuses.setdefault(p.status, []).append((p.line, p.name))
            if p.detail == proofs.COMPILED:
                statuses.compiled.append(p.name)
        yield
    return statuses


def _named(names: list[str]) -> str:
    """`names` for a headline: the first MAX_NAMED_PROOFS, then how many more."""
    shown = ", ".join(names[:MAX_NAMED_PROOFS])
    return shown if len(names) <= MAX_NAMED_PROOFS else f"{shown} and {len(names) - MAX_NAMED_PROOFS} more"


def compiled_note(statuses: Statuses) -> str:
    """Said once, not per proof: which proofs the compile checked, and how."""
    compiled = statuses.compiled
    if not compiled:
        return ""
    return f"{plural(len(compiled), 'proof')} ({_named(compiled)}) {proofs.COMPILED_NOTE}."


def verdict(
    r: m.DiagnosticsResult, statuses: Statuses, waited_s: float, open_suspensions: list[str], only_slow: bool,
    file: FileState, loops: Collection[str] = (),
) -> tuple[str, str]:
    """The verdict word and headline; `loops`: the proofs known to loop as they are (`runaway.Loops`)."""
    t = r.tally
    errors = [d for d in r.diagnostics if d.severity == "error"]
    if r.blocked is not None:
        missing = _missing_modules(r.blocked)
        return "BLOCKED", (
            f"BLOCKED: not compiling: cannot load {', '.join(missing)}. Build "
            f"{'it' if len(missing) == 1 else 'them'} (holmake): the daemon then retries this file's compile by "
            "itself. Call retryCompile only if it stays BLOCKED after the build."
        )
    if not r.complete:
        return "INCOMPLETE", _incomplete(r, statuses, waited_s, only_slow, file, loops)
    wrong = statuses.names(ProofStatus.FAILED, ProofStatus.DIVERGED)
    if wrong:
        others = [e for e in errors if not quirks.is_proof_diagnostic(e.message)]
        also = f", and {_error_count(others)}" if others else ""
        return "FAILED", f"FAILED: {len(wrong)} of {t.total} proofs failed ({_named(wrong)}){also}"
    if errors:
        return "ERRORS", f"ERRORS: {_error_count(errors)}"
    if r.cheats:
        owners = sorted({c.theorem or "top level" for c in r.cheats})
        verb = "uses" if len(owners) == 1 else "use"
        return "CHEATS", f"CHEATS: {plural(len(owners), 'proof')} {verb} cheat ({_named(owners)})"
    if open_suspensions:
        return "SUSPENDED", (
            f"SUSPENDED: {_named(open_suspensions)} left subgoals suspended with no proved "
            "Resume block for them"
        )
    unchecked = statuses.names(ProofStatus.UNCHECKED, ProofStatus.UNREPORTED)
    if unchecked:
        return "UNCHECKED", (
            f"UNCHECKED: {plural(len(unchecked), 'proof')} not checked by HOL ({_named(unchecked)}); "
            "see each one's reason below"
        )
    if t.total == 0:
        return "OK", "OK: compiles with no errors; there are no proofs in this file"
    warnings = len(r.diagnostics)
    extra = f" ({plural(warnings, 'warning')})" if warnings else ""
    done = "proved" if not t.suspended else f"proved ({t.suspended} finished by Resume blocks)"
    return "OK", f"OK: all {plural(t.total, 'proof')} {done}, no errors{extra}"


def _incomplete(
    r: m.DiagnosticsResult, statuses: Statuses, waited_s: float, only_slow: bool, file: FileState,
    loops: Collection[str] = (),
) -> str:
    t = r.tally
    failed = statuses.names(ProofStatus.FAILED, ProofStatus.DIVERGED)
    failures = f" Already failed: {_named(failed)}." if failed else ""
    checking = ProofStatus.CHECKING  # a local, per proof (see `filestate._CHECKING`)
    looping = [p for p in r.proofs if p.status == checking and p.name in loops]
    if only_slow and looping:
        names = _named([f"{p.name} (line {p.line})" for p in looping])
        return (
            f"INCOMPLETE: everything else is done, but {names} {'loops' if len(looping) == 1 else 'loop'} as "
            "written (see the LOOPS warning): its check runs the same loop on every server. Edit that proof or "
            f"replace it with cheat for now.{failures}"
        )
    if only_slow:
        slow = [p for p in r.proofs if p.status == checking]
        names = _named([f"{p.name} (line {p.line}, {duration(p.checking_s or 0.0)})" for p in slow])
        than = f" (the slowest of the others took {duration(file.slowest_s)})" if file.finished else ""
        return (
            f"INCOMPLETE: everything else is done, but {names} {'is' if len(slow) == 1 else 'are'} still "
            f"checking, far longer than the rest{than}, and probably looping. Edit that proof (a tactic that "
            "does not terminate?) or replace it with cheat for now; restarting would run it again. Nothing "
            f"was cancelled: call diagnostics again to keep waiting.{failures}"
        )
    return (
        f"INCOMPLETE after {waited_s:.0f}s: {t.proved} proved, {t.checking} still checking, "
        f"{t.failed} failed. Nothing was cancelled; call diagnostics again to carry on.{failures}"
    )


def _error_count(errors: list[m.Diagnostic]) -> str:
    parse = sum(1 for e in errors if e.note == diagnosticlist.PARSE_NOTE)
    parts = [plural(parse, "parse error")] if parse else []
    if len(errors) > parse:
        parts.append(plural(len(errors) - parse, "compile error"))
    return " and ".join(parts)


def _missing_modules(blocked: m.Blocked) -> list[str]:
    """The modules the block message says could not load (the header lists them all)."""
    named = re.findall(r"cannot load ([^\s:;]+)", blocked.message)
    return list(dict.fromkeys(named)) or blocked.modules
