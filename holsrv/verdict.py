"""Turn what a server said about a file into the diagnostics answer.

Pure: a `FileState`, the text on disk and the time in, a `DiagnosticsResult`
out.  The verdict is OK only when Holmake would build the file: never while
anything is unproved, failed, cheated, unchecked, still checking or parsed
only by HOL's error recovery, and "could not check" is never "no errors".
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Iterable

from holsrv import compileerrors, diagnosticlist, looping, proofs, stepping, tally
from holsrv.filestate import FileState, ProofEntry
from holsrv.lsp import hol, replies
from holsrv.proofblocks import Blocks
from holsrv.rpc import messages as m
from holsrv.rpc.words import duration, plural, size
from holsrv.settings import Settings

# Proofs still checking that `outstanding` names one by one (the proofs list
# has them all): a file being checked may have thousands.
MAX_OUTSTANDING_PROOFS = 20
# Proofs a headline names (the proofs list has them all).
MAX_NAMED_PROOFS = 20


def build_steps(
    file: FileState,
    text: str,
    content_hash: str,
    encoding: str,
    now: float,
    settings: Settings,
    server: m.ServerNote,
    footprint_mb: float | None,
    waited_s: float,
    walk_errors: Iterable[str] = (),
) -> stepping.Steps[m.DiagnosticsResult]:
    """The answer for `text`, in steps of about a millisecond (`script.run` takes them at
    once; `textinfo.sliced` with the loop free between them): a file of 30,000 proofs
    takes some 60 ms, which the event loop must not spend in one go while other
    clients wait.  `walk_errors` are the messages of failed goal-state walks, which
    HOL adds to the file's diagnostics but are not about the text.

    A notification may arrive between steps; each proof is listed as it was
    when its step ran, and the tally is that of the proofs listed.
    """
    complete = file.settled(now, quiet_for(file, settings))
    # While blocked (or before the server has the file) nothing of the current
    # text was checked: verdicts about an earlier text would mislead.
    unknown = file.phase == "blocked" or file.version == 0
    entries = [] if unknown else (yield from tally.visible_steps(file, text))
    diagnostics = yield from diagnosticlist.diagnostics_steps(file, encoding, set(walk_errors))
    blocks = Blocks(text)
    # Only a completed compile has said all it will about each declaration; every
    # error counts, listed or not.
    errors = (yield from compileerrors.compile_errors_steps(blocks, diagnostics)) if file.phase == "completed" else {}
    omitted = max(0, len(diagnostics) - diagnosticlist.MAX_DIAGNOSTICS)
    diagnostics = diagnostics[:diagnosticlist.MAX_DIAGNOSTICS]
    diagnosticlist.note_failures(blocks, diagnostics, complete)
    parse = diagnosticlist.parse_errors(blocks, diagnostics)
    listed = []
    for chunk in stepping.chunks(entries):
        listed += [proofs.proof(file, e, now, blocks, parse, errors) for e in chunk]
        yield
    listed += yield from _unreported(file, blocks, errors)
    listed.sort(key=_line)  # two runs in order, the pool's and the unreported: one merge
    yield
    cheats = []
    for some in stepping.chunks(blocks.cheats):
        cheats += [_cheat(blocks, c) for c in some]
        yield
    warnings = (yield from _slow_warnings(file, entries, now, settings, footprint_mb)) + _large(footprint_mb, settings)
    statuses = yield from _by_status(listed)
    result = m.DiagnosticsResult(
        file=replies.path_of(file.uri),
        content_hash=content_hash,
        verdict="",
        headline="",
        complete=complete,
        tally=tally.tally_of(statuses.elements()),
        proofs=listed,
        diagnostics=diagnostics,
        cheats=cheats,
        server=server,
        blocked=m.Blocked(**file.blocked) if file.phase == "blocked" and file.blocked else None,
        diagnostics_omitted=omitted,
        warnings=warnings,
        note=_compiled_note(statuses),
    )
    if not complete:
        result.outstanding = _outstanding(file, entries, now, settings)
    yield
    only_slow = complete_but_slow(file, now, settings)
    opened = tally.open_suspensions(file, entries)
    yield
    result.verdict, result.headline = _verdict(result, statuses, waited_s, opened, only_slow, file)
    return result


def _compiled_note(statuses: _Statuses) -> str:
    """Said once, not per proof: which proofs the compile checked, and how."""
    compiled = statuses.compiled
    if not compiled:
        return ""
    return f"{plural(len(compiled), 'proof')} ({_named(compiled)}) {proofs.COMPILED_NOTE}."


def _line(proof: m.Proof) -> int:
    return proof.line


class _Statuses(dict[str, list[tuple[int, str]]]):
    """The listed proofs' lines and names by status, in the list's order."""

    compiled: list[str]  # the proved ones the compile checked, not the pool

    def elements(self) -> Iterable[str]:
        """Each proof's status, as `tally_of` counts them."""
        for status, proofs_ in self.items():
            yield from itertools.repeat(status, len(proofs_))

    def names(self, *statuses: str) -> list[str]:
        """The names of the proofs with any of `statuses`, by line."""
        return [name for _, name in heapq.merge(*(self.get(status, []) for status in statuses))]


def _by_status(listed: list[m.Proof]) -> stepping.Steps[_Statuses]:
    statuses = _Statuses()
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


def _unreported(
    file: FileState, blocks: Blocks, errors: dict[str, m.Diagnostic]
) -> stepping.Steps[list[m.Proof]]:
    if file.phase == "blocked":
        why = "not checked: the file is blocked"
    elif file.version == 0:
        why = "not checked yet: the HOL server is starting"
    elif file.phase == "completed":
        return (yield from proofs.unreported_steps(file.proofs, blocks, errors))
    else:
        return []
    return (yield from proofs.unreported_steps({}, blocks, {}, why))


def _cheat(blocks: Blocks, cheat) -> m.CheatUse:
    line = blocks.index.line(cheat.offset)
    return m.CheatUse(theorem=cheat.theorem, line=line, col=cheat.offset - blocks.index.start(line) + 1)


def _large(footprint_mb: float | None, settings: Settings) -> list[str]:
    if footprint_mb is None or footprint_mb <= settings.soft_footprint_mb:
        return []
    return [
        f"SERVER LARGE: this file's HOL server uses {size(footprint_mb)}, above the soft "
        f"limit of {size(settings.soft_footprint_mb)}; restart it when convenient "
        "(nothing is stopped for this)."
    ]


def quiet_for(file: FileState, settings: Settings) -> float:
    """How long the server must have been quiet for the file to count as settled.

    After a failure HOL moves its diagnostic to the failing step once the pool
    is idle, and a suspended or diverged proof brings an extra pass: both come
    a moment after the verdict.  Without them nothing more is coming.
    """
    troubled = any(e.status in ("failed", "diverged", "suspended") for e in file.proofs.values())
    return settings.quiet_s if troubled else min(settings.quiet_s, settings.quiet_clean_s)


def complete_but_slow(file: FileState, now: float, settings: Settings) -> bool:
    """The compile is done and quiet, and every proof still checking is far
    slower than the rest or past the looping threshold: waiting longer is
    unlikely to change the answer, so the caller gets it now (nothing is
    cancelled; calling again keeps waiting)."""
    checking = file.checking()
    return (
        file.phase == "completed"
        and bool(checking)
        and now - file.last_event >= quiet_for(file, settings)
        and all(looping.suspicious(file, e, now, settings) for e in checking)
    )


def _slow_warnings(
    file: FileState, proofs: list[ProofEntry], now: float, settings: Settings, footprint_mb: float | None
) -> stepping.Steps[list[str]]:
    """PROBABLY LOOPING and SLOW warnings for the proofs still checking, in steps (a file
    being checked may have thousands), at most MAX_OUTSTANDING_PROOFS of them named."""
    footprint = size(footprint_mb) if footprint_mb is not None else "unknown"
    # The thresholds are the file's, not the proof's: once per answer.
    looping_after, slow_after = looping.looping_threshold(file, settings), looping.slow_threshold(file, settings)
    warnings: list[str] = []
    more = 0
    for chunk in stepping.chunks(proofs):
        yield
        for e in chunk:
            if e.status != "checking":
                continue
            took_s = file.checking_for(e, now)
            if took_s <= min(looping_after, slow_after):
                continue
            if len(warnings) == MAX_OUTSTANDING_PROOFS:
                more += 1
                continue
            took = duration(took_s)
            if took_s > looping_after:
                warnings.append(
                    f"PROBABLY LOOPING: proof {e.name} (line {e.line0 + 1}) has been checking for {took}; "
                    f"server footprint {footprint}. Edit that proof (or replace it with cheat for now): "
                    "restarting the server would only run the same loop again. Nothing was cancelled."
                )
            else:
                warnings.append(
                    f"SLOW: proof {e.name} (line {e.line0 + 1}) has been checking for {took}, far longer than "
                    f"the slowest of the {file.finished} finished proofs ({duration(file.slowest_s)}); it may "
                    "be looping. Edit that proof (or replace it with cheat for now) to move on: restarting "
                    "would run it again. Nothing was cancelled."
                )
    if more:
        warnings.append(f"… and {plural(more, 'more proof')} as slow (see outstanding and the proofs list)")
    return warnings


def _outstanding(file: FileState, proofs: list[ProofEntry], now: float, settings: Settings) -> list[str]:
    items = []
    silent = now - file.last_event
    if file.phase == "compiling" and silent > settings.compile_silence_s:
        # Some attempts end without a word (PROTOCOL.md §9.3): waiting longer will not help.
        items.append(
            f"HOL has said nothing about this file for {duration(silent)} while compiling it; it may "
            "have abandoned the compile. If the next call says the same, call restart."
        )
    elif file.phase == "compiling":
        items.append(f"the compile of the current text (version {file.version}) has not finished")
    slowest = f"; the slowest finished proof took {duration(file.slowest_s)}" if file.slowest_s else ""
    checking = [entry for entry in proofs if entry.status == "checking"]
    for entry in checking[:MAX_OUTSTANDING_PROOFS]:
        items.append(
            f"proof {entry.name} (line {entry.line0 + 1}) checking for "
            f"{duration(file.checking_for(entry, now))}{slowest}"
        )
    if len(checking) > MAX_OUTSTANDING_PROOFS:
        items.append(f"and {plural(len(checking) - MAX_OUTSTANDING_PROOFS, 'more proof')} checking")
    if not items:
        items.append("the server is still reporting; it should settle within a second or two")
    return items


def _verdict(
    r: m.DiagnosticsResult, statuses: _Statuses, waited_s: float, open_suspensions: list[str], only_slow: bool,
    file: FileState,
) -> tuple[str, str]:
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
        return "INCOMPLETE", _incomplete(r, statuses, waited_s, only_slow, file)
    wrong = statuses.names("failed", "diverged")
    if wrong:
        others = [e for e in errors if not hol.is_proof_diagnostic(e.message)]
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
    unchecked = statuses.names("unchecked", "unreported")
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


def _incomplete(r: m.DiagnosticsResult, statuses: _Statuses, waited_s: float, only_slow: bool, file: FileState) -> str:
    t = r.tally
    failed = statuses.names("failed", "diverged")
    failures = f" Already failed: {_named(failed)}." if failed else ""
    if only_slow:
        slow = [p for p in r.proofs if p.status == "checking"]
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
