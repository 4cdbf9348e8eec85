"""try --apply: the first proved candidate written into the file, checked there, and undone if it fails.

The trial has ended (the server has the disk text back) when this runs.
The write is `filewrite`'s, and happens only while the file still has the
bytes the trial ran on.  The check is the normal one: the diagnostics of the
new text, as any caller would ask for them, within the trial's wait.  If
they do not say the theorem is proved, the trial's bytes go back, and only
over the bytes written here.
"""

from __future__ import annotations

import asyncio
import logging

from holsrv.answers import diagnostics
from holsrv.answers.common import Context, Report
from holsrv.answers.states import AppliedState, CandidateState
from holsrv.answers.trials import judging, placement
from holsrv.disk import filewrite
from holsrv.disk.files import Script
from holsrv.errors import FileChanged, HolsrvError
from holsrv.lsp.proofstates import ProofStatus
from holsrv.rpc import messages as m
from holsrv.text import textinfo

log = logging.getLogger(__name__)

# The states a theorem's check can still be in: no verdict yet, rather than a wrong one.
_UNDECIDED = frozenset({ProofStatus.CHECKING, ProofStatus.UNREPORTED})


async def apply(
    ctx: Context, req: m.Try, client: str, result: m.TryResult, src: Script, span: placement.Span,
    report: Report | None = None,
) -> m.TryResult:
    """`result` with `applied` and its message, the file written (or not) as they say."""
    chosen = next((c for c in result.candidates if c.state == CandidateState.PROVED), None)
    if chosen is None:
        result.message += " Nothing was written (--apply): no candidate proved the theorem."
        return result
    span = placement.for_candidate(src.text, span, chosen.tactic)  # a whole Theorem: its declaration's
    index = textinfo.of(src.text).index
    rng = m.Range(*index.line_col(span.start), *index.line_col(span.end))
    applied = m.Applied(state=AppliedState.REFUSED, reason="", range=rng, text=chosen.tactic, content_hash="")
    result.applied = applied
    if report is not None:
        await report(m.Progress(f"applying {chosen.tactic[:60]!r}, then checking {src.path.name}"))
    # Once the file may be written, the check and any rollback must run to their end even if
    # the caller hangs up (which cancels its call): shielded, and its own errors logged.
    work = asyncio.ensure_future(_written_and_checked(ctx, req, client, applied, src, span))
    work.add_done_callback(_logged)
    await asyncio.shield(work)
    if applied.content_hash:
        result.message = result.message.replace(judging.UNTOUCHED, ".", 1)
    result.message += f" {applied.message}"
    return result


async def _written_and_checked(
    ctx: Context, req: m.Try, client: str, applied: m.Applied, src: Script, span: placement.Span
) -> None:
    try:
        applied.content_hash = await asyncio.to_thread(
            filewrite.replace, src.path, src.hash, span.put(src.text, applied.text).encode("utf-8")
        )
    except HolsrvError as err:
        applied.reason, applied.message = err.code, f"Nothing was written: {err}"
        return
    log.info("try --apply wrote %s (content %s)", src.path, applied.content_hash)
    await _checked(ctx, req, client, applied, src, span)
    log.info("try --apply on %s: %s %s", src.path, applied.state, applied.reason)


def _logged(task: asyncio.Future) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("try --apply failed", exc_info=task.exception())


async def _checked(
    ctx: Context, req: m.Try, client: str, applied: m.Applied, src: Script, span: placement.Span
) -> None:
    """Check the written file; keep the edit if it proves the theorem, else put the old bytes back."""
    rng = applied.range
    where = f"line {rng.line}" if rng.line == rng.end_line else f"lines {rng.line}-{rng.end_line}"
    try:
        check = await diagnostics.answer(ctx, m.Diagnostics(file=req.file, wait=max(0.0, req.wait)), client)
    except HolsrvError as err:  # the server died, is starting again…: no verdict, so the old bytes go back
        await _rolled_back(applied, src, where, f"its check could not be made ({err.code}: {err})", "no_verdict")
        return
    if check.content_hash != applied.content_hash:
        applied.state, applied.reason = AppliedState.ROLLBACK_SKIPPED, "file_changed"
        applied.message = (f"Wrote {applied.text!r} in place of {src.text[span.start:span.end]!r} ({where}), "
                           "but the file changed again before its check, so it was neither checked nor restored: "
                           "call diagnostics.")
        return
    proof = next((p for p in check.proofs if p.name == span.name), None)
    applied.status = proof.status if proof is not None else "missing"
    if applied.status == ProofStatus.PROVED:
        applied.state = AppliedState.KEPT
        applied.message = (f"Applied: wrote {applied.text!r} in place of {src.text[span.start:span.end]!r} "
                           f"({where}); the file's check proves {span.name} (verdict {check.verdict}).")
        if placement.statement_change(src.text, span, applied.text) is not None:
            applied.message += f" The statement of {span.block.name} in the file has CHANGED: verify will name it."
        return
    undecided = applied.status in _UNDECIDED and not check.complete
    why = (f"its check gave no verdict on {span.name} within {req.wait:g}s (the trial's wait)" if undecided
           else f"the file's check says {span.name} is {applied.status}")
    await _rolled_back(applied, src, where, why, "no_verdict" if undecided else "not_proved")


async def _rolled_back(applied: m.Applied, src: Script, where: str, why: str, reason: str) -> None:
    """The trial's bytes back in place of those written, unless the file changed again since."""
    applied.reason = reason
    try:
        await asyncio.to_thread(filewrite.replace, src.path, applied.content_hash, src.data)
    except FileChanged:
        applied.state = AppliedState.ROLLBACK_SKIPPED
        applied.message = (f"Wrote {applied.text!r} ({where}), but {why}; the file changed again since, so the "
                           "old text was not put back: check the file.")
        return
    except HolsrvError as err:
        applied.state = AppliedState.ROLLBACK_SKIPPED
        applied.message = f"Wrote {applied.text!r} ({where}), but {why}, and putting the old text back failed: {err}"
        return
    applied.state = AppliedState.ROLLED_BACK
    applied.message = (f"Rolled back: wrote {applied.text!r} ({where}), but {why}, so the file's previous bytes "
                       f"are back (content {src.hash[:12]}).")
