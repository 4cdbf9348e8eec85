"""Turn what a server said about a file into the diagnostics answer.

Pure: a `FileState`, the text on disk and the time in, a `DiagnosticsResult`
out.  The verdict is OK only when Holmake would build the file: never while
anything is unproved, failed, cheated, unchecked, still checking or parsed
only by HOL's error recovery, and "could not check" is never "no errors".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from holsrv import looping, script
from holsrv.filestate import FileState, ProofEntry
from holsrv.positions import Text
from holsrv.rpc import messages as m
from holsrv.settings import Settings

_SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}
# Bounds on what one answer carries: an agent's context is not a log file.
MAX_DIAGNOSTICS = 200
MAX_MESSAGE_CHARS = 2000
_WORD = re.compile(r"[A-Za-z0-9_']+")
# HOL's parser recovers from these and reports them at severity 2 (PROTOCOL.md
# §8.1: parse errors containing "expected" or "unclosed quotation" are
# warnings), but Holmake fails the file on them.
_PARSE_RECOVERY = re.compile(r"\bexpected\b|\bunclosed quotation\b", re.IGNORECASE)
PARSE_NOTE = "a parse error: HOL reports it as a warning and recovers, but Holmake fails on it"
_UNPROVED = ("proved", "suspended")  # pool verdicts that a cheat or a parse error overrides


def lsp_range(text: Text, rng: dict, encoding: str) -> m.Range:
    line, col = text.from_lsp(rng.get("start", {}), encoding)
    end_line, end_col = text.from_lsp(rng.get("end", rng.get("start", {})), encoding)
    return m.Range(line, col, end_line, end_col)


def is_parse_recovery(diag: dict) -> bool:
    """A diagnostic HOL sent as a warning that is really a parse error."""
    return diag.get("severity") == 2 and bool(_PARSE_RECOVERY.search(str(diag.get("message", ""))))


def is_proof_diagnostic(message: str) -> bool:
    """One of the pool's own diagnostics about a failed proof (PROTOCOL.md §10.5)."""
    return message.startswith("proof failed") or message.startswith("end of the failing branch")


def build(
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
) -> m.DiagnosticsResult:
    """The answer for `text`; `walk_errors` are the messages of failed goal-state
    walks, which HOL adds to the file's diagnostics but are not about the text."""
    complete = file.settled(now, quiet_for(file, settings))
    lines = Text(file.text or text)
    # While blocked (or before the server has the file) nothing of the current
    # text was checked: verdicts about an earlier text would mislead.
    unknown = file.phase == "blocked" or file.version == 0
    entries = [] if unknown else visible_proofs(file, text)
    diagnostics = _diagnostics(file, lines, encoding, set(walk_errors))
    omitted = max(0, len(diagnostics) - MAX_DIAGNOSTICS)
    diagnostics = diagnostics[:MAX_DIAGNOSTICS]
    cheats = script.cheats(text)
    blocks = _Blocks(text)
    blocks.note_failures(diagnostics, complete)
    proofs = [_proof(file, e, now, blocks, diagnostics, cheats) for e in entries]
    result = m.DiagnosticsResult(
        file=str(file.uri.removeprefix("file://")),
        content_hash=content_hash,
        verdict="",
        headline="",
        complete=complete,
        tally=m.Tally(),
        proofs=proofs,
        diagnostics=diagnostics,
        cheats=[_cheat(text, c) for c in cheats],
        server=server,
        blocked=m.Blocked(**file.blocked) if file.phase == "blocked" and file.blocked else None,
        diagnostics_omitted=omitted,
    )
    if file.phase == "blocked":
        _add_unreported(result, {}, blocks, "not checked: the file is blocked")
    elif file.version == 0:
        _add_unreported(result, {}, blocks, "not checked yet: the HOL server is starting")
    elif file.phase == "completed":
        _add_unreported(result, file.proofs, blocks)
    result.tally = tally_of(p.status for p in result.proofs)
    result.warnings = _slow_warnings(file, entries, now, settings, footprint_mb)
    if footprint_mb is not None and footprint_mb > settings.soft_footprint_mb:
        result.warnings.append(
            f"SERVER LARGE: this file's HOL server uses {_size(footprint_mb)}, above the soft "
            f"limit of {_size(settings.soft_footprint_mb)}; restart it when convenient "
            "(nothing is stopped for this)."
        )
    if not complete:
        result.outstanding = _outstanding(file, entries, now, settings)
    only_slow = complete_but_slow(file, now, settings)
    result.verdict, result.headline = _verdict(result, waited_s, _open_suspensions(file, entries), only_slow, file)
    return result


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


def _open_suspensions(file: FileState, proofs: list[ProofEntry]) -> list[str]:
    """Suspended proofs with a subgoal that no proved `Resume thm[label]` finishes."""
    open_ = []
    for entry in proofs:
        if entry.status != "suspended":
            continue
        labels = [label.strip() for label in entry.detail.split(",") if label.strip()]
        resumed = [file.proofs.get(f"{entry.name}[{label}]") for label in labels]
        if not labels or any(r is None or r.status != "proved" for r in resumed):
            open_.append(entry.name)
    return open_


def visible_proofs(file: FileState, text: str) -> list[ProofEntry]:
    """Tally entries, minus those whose theorem no longer appears in the text.

    The census prunes deletions only after the next pass; until then an
    entry for a deleted theorem would look outstanding forever.
    """
    words = set(_WORD.findall(script.blank_comments_and_strings(text)))
    visible = [e for e in file.proofs.values() if e.name.split("#")[0].split("[")[0] in words]
    return sorted(visible, key=lambda e: e.line0)


def answer_status(pool_status: str) -> str:
    """The pool's status as answers name it: its `cheated` means dropped unchecked."""
    return "unchecked" if pool_status == "cheated" else pool_status


def tally_of(statuses: Iterable[str]) -> m.Tally:
    """Counts of answer statuses; `unreported` counts as unchecked."""
    tally = m.Tally()
    for status in statuses:
        bucket = "unchecked" if status == "unreported" else status
        if bucket in m.Tally.__struct_fields__:
            setattr(tally, bucket, getattr(tally, bucket) + 1)
    return tally


_HOVER_WORDS = {
    "failed": "its proof FAILED (see diagnostics); HOL binds the name anyway, but the statement is not proved",
    "diverged": "its proof gives a different theorem than its statement's elaboration (see diagnostics)",
    "suspended": "its proof leaves subgoals suspended for Resume blocks",
    "cheated": "its proof uses cheat: the statement is not proved",
    "parse_error": "its proof has a parse error (see diagnostics): it is not proved as written",
    "checking": "its proof is still being checked",
    "unchecked": "its proof has not been checked",
}


def theorem_status(file: FileState, text: str, encoding: str, name: str, now: float) -> str:
    """For hover: a word about `name`'s proof when it is a theorem of this file not proved."""
    blocks = _Blocks(text)
    entry = file.proofs.get(name)
    if entry is None:
        return f"{name}: {_HOVER_WORDS['unchecked']}" if name in blocks.lines else ""
    diagnostics = _diagnostics(file, Text(file.text or text), encoding, set())
    proof = _proof(file, entry, now, blocks, diagnostics, script.cheats(text))
    words = _HOVER_WORDS.get(proof.status)
    return f"{name}: {words}" if words else ""


class _Blocks:
    """The text's proof blocks by pool name, with their line spans."""

    def __init__(self, text: str) -> None:
        index = script.LineIndex(text)
        self.named = script.pool_names(text)
        # (first line, line of the body's start, last line), 1-based.
        self.lines = {
            name: (index.line(b.start), index.line(b.body_start), index.line(b.end)) for name, b in self.named
        }
        self.index = index

    def owner(self, line: int) -> str | None:
        """The proof a line belongs to; the earlier one where two meet (a missing QED)."""
        return next((name for name, (first, _, last) in self.lines.items() if first <= line <= last), None)

    def note_failures(self, diagnostics: list[m.Diagnostic], complete: bool) -> None:
        """Say where a failure still sits on its theorem's name instead of its failing step."""
        for diag in diagnostics:
            name = self.owner(diag.range.line) if diag.message.startswith("proof failed") else None
            if name is None or diag.range.line >= self.lines[name][1]:
                continue
            first, body, last = self.lines[name]
            diag.note = (
                "provisional location: HOL first reports a failure on the theorem's name and moves it to the "
                "failing tactic once its checks are done; call diagnostics again before editing"
                if not complete else
                f"HOL did not locate the failing tactic; call goalState on lines {body}-{last} to find it"
            )


def _diagnostics(file: FileState, lines: Text, encoding: str, walk_errors: set[str]) -> list[m.Diagnostic]:
    # A failed goal-state walk is the walk's news, not a problem of the text:
    # it must not change the verdict or appear twice.
    kept = [d for d in file.diagnostics if str(d.get("message", "")).rstrip() not in walk_errors]
    return sorted((_diagnostic(lines, d, encoding) for d in kept), key=lambda d: (d.range.line, d.range.col))


def _diagnostic(text: Text, diag: dict, encoding: str) -> m.Diagnostic:
    parse = is_parse_recovery(diag)
    return m.Diagnostic(
        range=lsp_range(text, diag.get("range", {}), encoding),
        severity="error" if parse else _SEVERITY.get(diag.get("severity", 1), "error"),
        message=clip(str(diag.get("message", "")).rstrip(), MAX_MESSAGE_CHARS),
        note=PARSE_NOTE if parse else "",
    )


def _add_unreported(result: m.DiagnosticsResult, known: dict, blocks: _Blocks, why: str = "") -> None:
    """Count as unchecked every proof in the text that is not in `known`.

    After a completed compile each proof should have a pool entry; one
    without (an interrupted pass that never handed it over, a tactic that
    did not compile) was not checked, and must not vanish from the tally.
    """
    for name, _ in blocks.named:
        if name not in known:
            first, _, last = blocks.lines[name]
            errors = [d.range.line for d in result.diagnostics
                      if d.severity == "error" and first <= d.range.line <= last]
            reason = why or (
                f"not checked: its proof does not compile (error at line {errors[0]})" if errors
                else "HOL never reported checking it; edit the file or restart its server to check it"
            )
            result.proofs.append(m.Proof(name, first, "unreported", reason))
    result.proofs.sort(key=lambda p: p.line)


def _cheat(text: str, cheat: script.Cheat) -> m.CheatUse:
    line, col = script.line_col(text, cheat.offset)
    return m.CheatUse(theorem=cheat.theorem, line=line, col=col)


def _proof(
    file: FileState, entry: ProofEntry, now: float, blocks: _Blocks,
    diagnostics: list[m.Diagnostic], cheats: list[script.Cheat],
) -> m.Proof:
    status, detail = answer_status(entry.status), clip(entry.detail.strip(), MAX_MESSAGE_CHARS)
    if status == "unchecked":
        detail = (
            "HOL's pool dropped this check and has not run it since; if diagnostics settles like this, "
            "edit the proof or restart to check it"
        )
    elif status in _UNPROVED:
        status, detail = _overridden(entry.name, status, detail, blocks, diagnostics, cheats)
    proof = m.Proof(name=entry.name, line=entry.line0 + 1, status=status, detail=detail)
    if entry.status == "checking":
        proof.checking_s = round(file.checking_for(entry, now), 1)
    return proof


def _overridden(
    name: str, status: str, detail: str, blocks: _Blocks, diagnostics: list[m.Diagnostic], cheats: list[script.Cheat]
) -> tuple[str, str]:
    """A proof HOL calls proved that Holmake would not accept: parse-recovered or cheated."""
    parse = next((d for d in diagnostics if d.note == PARSE_NOTE and blocks.owner(d.range.line) == name), None)
    if parse is not None:
        return "parse_error", (
            f"HOL recovered from a parse error at line {parse.range.line} ({parse.message}) and checked the "
            "recovered text; Holmake fails on this proof as written"
        )
    span = blocks.lines.get(name)
    used = [c for c in cheats if span and span[0] <= blocks.index.line(c.offset) <= span[2]]
    if used:
        return "cheated", (
            f"uses cheat at line {blocks.index.line(used[0].offset)}: HOL's pool counts it {status}, "
            "but it is not proved"
        )
    return status, detail


def _slow_warnings(
    file: FileState, proofs: list[ProofEntry], now: float, settings: Settings, footprint_mb: float | None
) -> list[str]:
    size = _size(footprint_mb) if footprint_mb is not None else "unknown"
    warnings = []
    for e in proofs:
        if e.status != "checking":
            continue
        took = _duration(file.checking_for(e, now))
        if looping.probably_looping(file, e, now, settings):
            warnings.append(
                f"PROBABLY LOOPING: proof {e.name} (line {e.line0 + 1}) has been checking for {took}; "
                f"server footprint {size}. Edit that proof (or replace it with cheat for now): restarting "
                "the server would only run the same loop again. Nothing was cancelled."
            )
        elif looping.far_slower(file, e, now, settings):
            warnings.append(
                f"SLOW: proof {e.name} (line {e.line0 + 1}) has been checking for {took}, far longer than "
                f"the slowest of the {file.finished} finished proofs ({_duration(file.slowest_s)}); it may "
                "be looping. Edit that proof (or replace it with cheat for now) to move on: restarting "
                "would run it again. Nothing was cancelled."
            )
    return warnings


def _outstanding(file: FileState, proofs: list[ProofEntry], now: float, settings: Settings) -> list[str]:
    items = []
    silent = now - file.last_event
    if file.phase == "compiling" and silent > settings.compile_silence_s:
        # Some attempts end without a word (PROTOCOL.md §9.3): waiting longer will not help.
        items.append(
            f"HOL has said nothing about this file for {_duration(silent)} while compiling it; it may "
            "have abandoned the compile. If the next call says the same, call restart."
        )
    elif file.phase == "compiling":
        items.append(f"the compile of the current text (version {file.version}) has not finished")
    slowest = f"; the slowest finished proof took {_duration(file.slowest_s)}" if file.slowest_s else ""
    for entry in proofs:
        if entry.status == "checking":
            items.append(
                f"proof {entry.name} (line {entry.line0 + 1}) checking for "
                f"{_duration(file.checking_for(entry, now))}{slowest}"
            )
    if not items:
        items.append("the server is still reporting; it should settle within a second or two")
    return items


def _verdict(
    r: m.DiagnosticsResult, waited_s: float, open_suspensions: list[str], only_slow: bool, file: FileState
) -> tuple[str, str]:
    t = r.tally
    errors = [d for d in r.diagnostics if d.severity == "error"]
    if r.blocked is not None:
        missing = _missing_modules(r.blocked)
        return "BLOCKED", (
            f"BLOCKED: not compiling: cannot load {', '.join(missing)}. Build "
            f"{'it' if len(missing) == 1 else 'them'} (Holmake), then call retryCompile."
        )
    if not r.complete:
        return "INCOMPLETE", _incomplete(r, waited_s, only_slow, file)
    wrong = [p.name for p in r.proofs if p.status in ("failed", "diverged")]
    if wrong:
        others = [e for e in errors if not is_proof_diagnostic(e.message)]
        also = f", and {_error_count(others)}" if others else ""
        return "FAILED", f"FAILED: {len(wrong)} of {t.total} proofs failed ({', '.join(wrong)}){also}"
    if errors:
        return "ERRORS", f"ERRORS: {_error_count(errors)}"
    if r.cheats:
        owners = sorted({c.theorem or "top level" for c in r.cheats})
        verb = "uses" if len(owners) == 1 else "use"
        return "CHEATS", f"CHEATS: {_plural(len(owners), 'proof')} {verb} cheat ({', '.join(owners)})"
    if open_suspensions:
        return "SUSPENDED", (
            f"SUSPENDED: {', '.join(open_suspensions)} left subgoals suspended with no proved "
            "Resume block for them"
        )
    unchecked = [p.name for p in r.proofs if p.status in ("unchecked", "unreported")]
    if unchecked:
        return "UNCHECKED", (
            f"UNCHECKED: {_plural(len(unchecked), 'proof')} not checked by HOL ({', '.join(unchecked)}); "
            "see each one's reason below"
        )
    if t.total == 0:
        return "OK", "OK: compiles with no errors; there are no proofs in this file"
    warnings = len(r.diagnostics)
    extra = f" ({_plural(warnings, 'warning')})" if warnings else ""
    done = "proved" if not t.suspended else f"proved ({t.suspended} finished by Resume blocks)"
    return "OK", f"OK: all {_plural(t.total, 'proof')} {done}, no errors{extra}"


def _incomplete(r: m.DiagnosticsResult, waited_s: float, only_slow: bool, file: FileState) -> str:
    t = r.tally
    failed = [p.name for p in r.proofs if p.status in ("failed", "diverged")]
    failures = f" Already failed: {', '.join(failed)}." if failed else ""
    if only_slow:
        slow = [p for p in r.proofs if p.status == "checking"]
        names = ", ".join(f"{p.name} (line {p.line}, {_duration(p.checking_s or 0.0)})" for p in slow)
        than = f" (the slowest of the others took {_duration(file.slowest_s)})" if file.finished else ""
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
    parse = sum(1 for e in errors if e.note == PARSE_NOTE)
    parts = [_plural(parse, "parse error")] if parse else []
    if len(errors) > parse:
        parts.append(_plural(len(errors) - parse, "compile error"))
    return " and ".join(parts)


def _missing_modules(blocked: m.Blocked) -> list[str]:
    """The modules the block message says could not load (the header lists them all)."""
    named = re.findall(r"cannot load ([^\s:;]+)", blocked.message)
    return list(dict.fromkeys(named)) or blocked.modules


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def _size(mb: float) -> str:
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB"


def clip(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with a note saying how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters cut)"


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
