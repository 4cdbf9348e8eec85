"""Turn what a server said about a file into the diagnostics answer.

Pure: a `FileState`, the text on disk and the time in, a `DiagnosticsResult`
out.  The verdict is never OK while anything is unproved, failed, cheated,
unchecked or still checking, and "could not check" is never "no errors".
"""

from __future__ import annotations

import re

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


def lsp_range(text: Text, rng: dict, encoding: str) -> m.Range:
    line, col = text.from_lsp(rng.get("start", {}), encoding)
    end_line, end_col = text.from_lsp(rng.get("end", rng.get("start", {})), encoding)
    return m.Range(line, col, end_line, end_col)


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
) -> m.DiagnosticsResult:
    complete = file.settled(now, quiet_for(file, settings))
    lines = Text(file.text or text)
    # While blocked (or before the server has the file) nothing of the current
    # text was checked: verdicts about an earlier text would mislead.
    unknown = file.phase == "blocked" or file.version == 0
    proofs = [] if unknown else visible_proofs(file, text)
    tally = tally_of(proofs)
    diagnostics = sorted(
        (_diagnostic(lines, d, encoding) for d in file.diagnostics),
        key=lambda d: (d.range.line, d.range.col),
    )
    omitted = max(0, len(diagnostics) - MAX_DIAGNOSTICS)
    diagnostics = diagnostics[:MAX_DIAGNOSTICS]
    cheats = [_cheat(text, c) for c in script.cheats(text)]
    blocked = m.Blocked(**file.blocked) if file.phase == "blocked" and file.blocked else None
    result = m.DiagnosticsResult(
        file=str(file.uri.removeprefix("file://")),
        content_hash=content_hash,
        verdict="",
        headline="",
        complete=complete,
        tally=tally,
        proofs=[_proof(file, e, lines, now) for e in proofs],
        diagnostics=diagnostics,
        cheats=cheats,
        server=server,
        blocked=blocked,
        diagnostics_omitted=omitted,
    )
    if file.phase == "blocked":
        _add_unreported(result, {}, text, "not checked: the file is blocked")
    elif file.version == 0:
        _add_unreported(result, {}, text, "not checked yet: the HOL server is starting")
    elif file.phase == "completed":
        _add_unreported(result, file.proofs, text)
    open_suspensions = _open_suspensions(file, proofs)
    result.warnings = _looping_warnings(file, proofs, now, settings, footprint_mb)
    if footprint_mb is not None and footprint_mb > settings.soft_footprint_mb:
        result.warnings.append(
            f"SERVER LARGE: this file's HOL server uses {_size(footprint_mb)}, above the soft "
            f"limit of {_size(settings.soft_footprint_mb)}; restart it when convenient "
            "(nothing is stopped for this)."
        )
    if not complete:
        result.outstanding = _outstanding(file, proofs, now, settings)
    only_looping = complete_but_looping(file, now, settings)
    result.verdict, result.headline = _verdict(result, waited_s, open_suspensions, only_looping)
    return result


def quiet_for(file: FileState, settings: Settings) -> float:
    """How long the server must have been quiet for the file to count as settled.

    After a failure HOL moves its diagnostic to the failing step once the pool
    is idle, and a suspended or diverged proof brings an extra pass: both come
    a moment after the verdict.  Without them nothing more is coming.
    """
    troubled = any(e.status in ("failed", "diverged", "suspended") for e in file.proofs.values())
    return settings.quiet_s if troubled else min(settings.quiet_s, settings.quiet_clean_s)


def complete_but_looping(file: FileState, now: float, settings: Settings) -> bool:
    """The compile is done and quiet, and every proof still checking has run past
    `looping_after_s`: waiting longer is very unlikely to change the answer.

    Only the absolute threshold counts here: a proof that is merely ten times
    slower than its neighbours may well finish, so the caller's wait is kept.
    """
    checking = file.checking()
    return (
        file.phase == "completed"
        and bool(checking)
        and now - file.last_event >= quiet_for(file, settings)
        and all(file.checking_for(e, now) > settings.looping_after_s for e in checking)
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


def _add_unreported(result: m.DiagnosticsResult, known: dict, text: str, why: str = "") -> None:
    """Count as unchecked every proof in the text that is not in `known`.

    After a completed compile each proof should have a pool entry; one
    without (an interrupted pass that never handed it over, a tactic that
    did not compile) was not checked, and must not vanish from the tally.
    """
    lines = script.LineIndex(text)
    for name, block in script.pool_names(text):
        if name not in known:
            first, last = lines.line(block.start), lines.line(block.end)
            errors = [d.range.line for d in result.diagnostics
                      if d.severity == "error" and first <= d.range.line <= last]
            reason = why or (
                f"not checked: its proof does not compile (error at line {errors[0]})" if errors
                else "HOL never reported checking it; edit the file or restart its server to check it"
            )
            result.proofs.append(m.Proof(name, first, "unreported", reason))
            result.tally.unchecked += 1
    result.proofs.sort(key=lambda p: p.line)


def tally_of(proofs: list[ProofEntry]) -> m.Tally:
    tally = m.Tally()
    for entry in proofs:
        bucket = "unchecked" if entry.status == "cheated" else entry.status
        if hasattr(tally, bucket):
            setattr(tally, bucket, getattr(tally, bucket) + 1)
    return tally


def _diagnostic(text: Text, diag: dict, encoding: str) -> m.Diagnostic:
    return m.Diagnostic(
        range=lsp_range(text, diag.get("range", {}), encoding),
        severity=_SEVERITY.get(diag.get("severity", 1), "error"),
        message=clip(str(diag.get("message", "")).rstrip(), MAX_MESSAGE_CHARS),
    )


def _cheat(text: str, cheat: script.Cheat) -> m.CheatUse:
    line, col = script.line_col(text, cheat.offset)
    return m.CheatUse(theorem=cheat.theorem, line=line, col=col)


def _proof(file: FileState, entry: ProofEntry, text: Text, now: float) -> m.Proof:
    detail = clip(entry.detail.strip(), MAX_MESSAGE_CHARS)
    proof = m.Proof(name=entry.name, line=entry.line0 + 1, status=entry.status, detail=detail)
    if entry.status == "checking":
        proof.checking_s = round(file.checking_for(entry, now), 1)
    return proof


def _looping_warnings(
    file: FileState, proofs: list[ProofEntry], now: float, settings: Settings, footprint_mb: float | None
) -> list[str]:
    size = _size(footprint_mb) if footprint_mb is not None else "unknown"
    return [
        f"PROBABLY LOOPING: proof {e.name} (line {e.line0 + 1}) has been checking for "
        f"{_duration(file.checking_for(e, now))}; server footprint {size}. Cancel it or restart?"
        for e in proofs
        if e.status == "checking" and looping.probably_looping(file, e, now, settings)
    ]


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
    r: m.DiagnosticsResult, waited_s: float, open_suspensions: list[str], only_looping: bool
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
        failed = [p.name for p in r.proofs if p.status in ("failed", "diverged")]
        failures = f" Already failed: {', '.join(failed)}." if failed else ""
        if only_looping:
            loops = [f"{p.name} (line {p.line})" for p in r.proofs if p.status == "checking"]
            return "INCOMPLETE", (
                f"INCOMPLETE: everything else is done, but {', '.join(loops)} has been checking for "
                "minutes and is probably looping. Edit that proof (a tactic that does not terminate?); "
                f"nothing was cancelled.{failures}"
            )
        return "INCOMPLETE", (
            f"INCOMPLETE after {waited_s:.0f}s: {t.proved} proved, {t.checking} still checking, "
            f"{t.failed} failed. Nothing was cancelled; call diagnostics again to carry on.{failures}"
        )
    wrong = [p.name for p in r.proofs if p.status in ("failed", "diverged")]
    if wrong:
        proof_errors = [e for e in errors if not e.message.startswith("proof failed")]
        also = f", and {_plural(len(proof_errors), 'compile error')}" if proof_errors else ""
        return "FAILED", f"FAILED: {len(wrong)} of {t.total} proofs failed ({', '.join(wrong)}){also}"
    if errors:
        return "ERRORS", f"ERRORS: {_plural(len(errors), 'compile error')}"
    if r.cheats:
        owners = sorted({c.theorem or "top level" for c in r.cheats})
        verb = "uses" if len(owners) == 1 else "use"
        return "CHEATS", f"CHEATS: {_plural(len(owners), 'proof')} {verb} cheat ({', '.join(owners)})"
    if open_suspensions:
        return "SUSPENDED", (
            f"SUSPENDED: {', '.join(open_suspensions)} left subgoals suspended with no proved "
            "Resume block for them"
        )
    unchecked = [p.name for p in r.proofs if p.status in ("cheated", "unreported")]
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
