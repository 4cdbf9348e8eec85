"""What an unsettled file is still doing: when it counts as settled, the work
outstanding, and the slow, looping and large-server warnings an answer carries."""

from __future__ import annotations

from collections.abc import Collection
from typing import assert_never

from holsrv.config.settings import Settings
from holsrv.lsp import quirks
from holsrv.lsp.proofstates import ProofStatus
from holsrv.rpc.words import duration, plural, size
from holsrv.text import stepping, textinfo
from holsrv.verdict import census, looping
from holsrv.verdict.census import Census
from holsrv.verdict.filestate import FileState, Phase, ProofEntry

# Proofs still checking that `outstanding` names one by one (the proofs list
# has them all): a file being checked may have thousands.
MAX_OUTSTANDING_PROOFS = 20
# The verdicts HOL follows up (`awaiting_hol`): a failure with its diagnostic, a suspended or
# diverged proof with one more pass.
_NEWS = frozenset({ProofStatus.FAILED, ProofStatus.DIVERGED, ProofStatus.SUSPENDED})


def large(footprint_mb: float | None, settings: Settings) -> list[str]:
    if footprint_mb is None or footprint_mb <= settings.soft_footprint_mb:
        return []
    return [
        f"SERVER LARGE: this file's HOL server uses {size(footprint_mb)}, above the soft "
        f"limit of {size(settings.soft_footprint_mb)}; restart it when convenient "
        "(nothing is stopped for this)."
    ]


def quiet_for(file: FileState, settings: Settings) -> float:
    """How long the server must have been quiet for the file to count as settled.

    No time at all once HOL's own signals say the pass is over: the compile of this
    version completed, every proof of the census has its final word for
    this pass (`census`), and no news of it is still to come.  After a
    failure HOL moves its diagnostic to the failing step once the pool is
    idle, and a suspended or diverged proof brings an extra pass: both come
    a moment after the verdict, so news of this pass waits up to `quiet_s`
    for them, as does a proof the census still lacks a word on.  A failure
    whose diagnostic has already moved, or that was reported before the last
    edit (HOL will not move it again), holds nothing up.  Where the census
    cannot be trusted, a short quiet period (`quiet_clean_s`) stands in.
    """
    if file.phase == Phase.COMPLETED:
        match census.judge(file):
            case Census.OVER:
                return settings.quiet_s if awaiting_hol(file) else 0.0
            case Census.PENDING:
                return settings.quiet_s
            case Census.UNTRUSTED:
                pass
            case never:
                assert_never(never)
    return settings.quiet_s if awaiting_hol(file) else min(settings.quiet_s, settings.quiet_clean_s)


def awaiting_hol(file: FileState) -> bool:
    """A verdict of this pass that HOL still follows up: a new failure whose
    diagnostic is not yet published since, or is still on its theorem's name,
    or a new suspended or diverged proof (an extra pass comes)."""
    news = [e for e in file.proofs.values()
            if e.status in _NEWS and e.changed_at >= file.last_edit]
    if any(e.status != ProofStatus.FAILED for e in news):
        return True
    if not news:
        return False
    failures = [line for line in map(_start_line, _proof_failures(file)) if line is not None]
    spans = textinfo.of(file.text).block_lines  # 1-based lines, once per text
    return any(not _moved(e, failures, spans.get(e.name), file.published_at) for e in news)


def _proof_failures(file: FileState) -> list[dict]:
    return [d for d in file.diagnostics if quirks.is_proof_failure(str(d.get("message", "")))]


def _start_line(diag: dict) -> int | None:
    start = diag.get("range", {}).get("start", {})
    return start.get("line") if isinstance(start, dict) else None


def _moved(entry: ProofEntry, failures: list[int], span: tuple[int, int, int] | None, published_at: float) -> bool:
    """HOL has moved `entry`'s failure off its theorem's name (0-based `failures` lines)."""
    if entry.line0 in failures:
        return False
    if span is None:  # not a proof of the text: moved if not on its name
        return True
    # The diagnostic HOL publishes with the verdict sits on the name, so only
    # a publish since the verdict, with it inside the proof's lines, says it moved.
    return published_at >= entry.changed_at and any(entry.line0 < line < span[2] for line in failures)


def complete_but_slow(file: FileState, now: float, settings: Settings, loops: Collection[str] = ()) -> bool:
    """The compile is done and quiet, and every proof still checking is far
    slower than the rest, past the looping threshold, or one of `loops` (known
    to loop as it is: `runaway.Loops`): waiting longer is unlikely to change
    the answer, so the caller gets it now (nothing is cancelled; calling again
    keeps waiting)."""
    checking = file.checking()
    return (
        file.phase == Phase.COMPLETED
        and bool(checking)
        and now - file.last_event >= quiet_for(file, settings)
        and all(e.name in loops or looping.suspicious(file, e, now, settings) for e in checking)
    )


def slow_warnings(
    file: FileState, proofs: list[ProofEntry], now: float, settings: Settings, footprint_mb: float | None
) -> stepping.Steps[list[str]]:
    """PROBABLY LOOPING and SLOW warnings for the proofs still checking, in steps (a file
    being checked may have thousands), at most MAX_OUTSTANDING_PROOFS of them named."""
    footprint = size(footprint_mb) if footprint_mb is not None else "unknown"
    # The thresholds are the file's, not the proof's: once per answer.
    looping_after, slow_after = looping.looping_threshold(file, settings), looping.slow_threshold(file, settings)
    warnings: list[str] = []
    more = 0
    checking = ProofStatus.CHECKING  # a local, per proof (see `filestate._CHECKING`)
    for chunk in stepping.chunks(proofs):
        yield
        for e in chunk:
            if e.status != checking:
                continue
            took_s = file.checking_for(e, now)
            if took_s <= min(looping_after, slow_after):
                continue
            if len(warnings) == MAX_OUTSTANDING_PROOFS:
                more += 1
                continue
            warnings.append(_slow_warning(file, e, took_s, took_s > looping_after, footprint))
    if more:
        warnings.append(f"… and {plural(more, 'more proof')} as slow (see outstanding and the proofs list)")
    return warnings


def _slow_warning(file: FileState, e: ProofEntry, took_s: float, probably_looping: bool, footprint: str) -> str:
    took = duration(took_s)
    if probably_looping:
        return (
            f"PROBABLY LOOPING: proof {e.name} (line {e.line0 + 1}) has been checking for {took}; "
            f"server footprint {footprint}. Edit that proof (or replace it with cheat for now): "
            "restarting the server would only run the same loop again. Nothing was cancelled."
        )
    return (
        f"SLOW: proof {e.name} (line {e.line0 + 1}) has been checking for {took}, far longer than "
        f"the slowest of the {file.finished} finished proofs ({duration(file.slowest_s)}); it may "
        "be looping. Edit that proof (or replace it with cheat for now) to move on: restarting "
        "would run it again. Nothing was cancelled."
    )


def outstanding(file: FileState, proofs: list[ProofEntry], now: float, settings: Settings) -> list[str]:
    items = []
    silent = now - file.last_event
    if file.phase == Phase.COMPILING and silent > settings.compile_silence_s:
        # Some attempts end without a word (docs/protocol.md#compile-lifecycle): waiting longer will not help.
        items.append(
            f"HOL has said nothing about this file for {duration(silent)} while compiling it; it may "
            "have abandoned the compile. If the next call says the same, call restart."
        )
    elif file.phase == Phase.COMPILING:
        items.append(f"the compile of the current text (version {file.version}) has not finished")
    slowest = f"; the slowest finished proof took {duration(file.slowest_s)}" if file.slowest_s else ""
    status = ProofStatus.CHECKING  # a local, per proof (see `filestate._CHECKING`)
    checking = [entry for entry in proofs if entry.status == status]
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
