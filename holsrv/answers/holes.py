"""holes: every unfinished proof of a file, each with the goals at its hole, in one call.

The holes are read off the file's settled verdict (`diagnostics.answer`, so
its cache and its wait apply): a cheat, a failed proof's failing step, a
proof HOL did not check or that did not end as Holmake wants, a proof
resting on a cheated ancestor theorem (`inheritedcheats`).  Their goals are
asked as a goal-state batch is (`goalbatch.Walk`: each position cached as a
single goalState's, a file state said once), so the runaway rules apply: a
proof the daemon thinks loops is listed with the reason, never walked.  At
most `limits.MAX_POSITIONS` holes are walked; the rest are listed without
goals, and the answer says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from holsrv.answers import diagnostics
from holsrv.answers.common import Context, Report, note, opened
from holsrv.answers.goals import goals
from holsrv.answers.goals.goalbatch import Walk
from holsrv.answers.states import PositionState
from holsrv.lsp import quirks
from holsrv.lsp.proofstates import ProofStatus
from holsrv.rpc import limits
from holsrv.rpc import messages as m
from holsrv.rpc.words import plural
from holsrv.text import textinfo

# Proofs with no hole to walk to: HOL has not checked the text yet (blocked, starting).
_UNREPORTED = ("HOL has not checked this text yet (see the verdict), so there are no goals to show: "
               "call holes again once diagnostics has a verdict.")
_CHECKING = ("Still being checked: its goals are not asked while HOL checks it (a walk would run its "
             "tactics again); call holes again once diagnostics has its verdict.")


@dataclass
class Found:
    """A hole before its goals are asked: `walk` False when they are not to be asked."""

    hole: m.Hole
    walk: bool = True


async def holes(ctx: Context, req: m.Holes, client: str, report: Report | None = None) -> m.HolesResult:
    """The file's unfinished proofs, each with the goals at its hole, within one `req.wait`."""
    deadline = ctx.clock() + max(0.0, req.wait)
    verdict = await diagnostics.answer(ctx, m.Diagnostics(req.file, wait=req.wait, progress=req.progress),
                                       client, report)
    async with opened(ctx, req.file, client, max(0.0, deadline - ctx.clock()), tolerate_start=True) as (src, lease):
        result = m.HolesResult(
            file=str(src.path), content_hash=verdict.content_hash, verdict=verdict.verdict,
            headline=verdict.headline, complete=verdict.complete, holes=[], server=note(lease),
        )
        found = find(verdict, textinfo.of(src.text) if src.hash == verdict.content_hash else None)
        result.holes = [f.hole for f in found]
        if src.hash != verdict.content_hash:
            result.message = ("The file changed on disk after its verdict, so no goals were asked (the holes' "
                              "positions are the older text's): call holes again.")
            return result
        walk = Walk(ctx, src, lease, deadline)
        session = lease.session
        for f in found:
            hole = f.hole
            if not f.walk:
                continue
            refusal = goals.not_walked(ctx, session, src, hole.line)
            if refusal:  # a proof the daemon thinks loops: the reason, and no walk
                hole.unwalked = refusal
            elif result.walked >= limits.MAX_POSITIONS:
                hole.unwalked = f"Past the {limits.MAX_POSITIONS} holes one call walks: ask goalState here."
            elif hole.kind == ProofStatus.CHECKING:  # a hole's kind is its proof's status, but for cheats
                hole.unwalked = _CHECKING
            else:
                result.walked += 1
                if report is not None:
                    await report(m.Progress(f"goals at {hole.theorem}'s hole, line {hole.line}", result.walked,
                                            min(limits.MAX_POSITIONS, sum(f.walk for f in found))))
                entry = await walk.entry(hole.line, hole.column)
                if entry.state == PositionState.LOOPING:  # found to loop meanwhile (`walk_refusal`)
                    hole.unwalked = entry.message
                else:
                    hole.goals = entry
        result.message = _message(result)
        return result


def find(verdict: m.DiagnosticsResult, info: textinfo.TextInfo | None) -> list[Found]:
    """The holes of `verdict`, in the text's order; `info` the facts of the text it is about
    (None: another text now, so the holes are listed without a place to walk to). Pure."""
    blocks = dict(info.named) if info is not None else {}
    cheats: dict[str, list[m.CheatUse]] = {}
    for cheat in verdict.cheats:
        cheats.setdefault(cheat.theorem, []).append(cheat)
    found: list[Found] = []
    for proof in verdict.proofs:
        if proof.status == ProofStatus.PROVED:
            continue
        block = blocks.get(proof.name)
        qed = info.index.line(block.body_end) if info is not None and block is not None else proof.line

        def hole(kind: str, line: int = qed, column: int | None = None, p: m.Proof = proof, why: str = "") -> m.Hole:
            return m.Hole(theorem=p.name, line=line, column=column, kind=kind, theorem_line=p.line, detail=p.detail,
                          unwalked=why)

        if proof.status == ProofStatus.CHEATED:
            at = cheats.get(proof.name) or []
            found += [Found(hole("cheat", c.line, c.col)) for c in at] or [Found(hole("cheat"))]
        elif proof.status == ProofStatus.FAILED:
            line, column = _failing_step(verdict, info, proof.name) or (qed, None)
            found.append(Found(hole(ProofStatus.FAILED, line, column)))
        elif proof.status == ProofStatus.UNREPORTED:
            found.append(Found(hole(ProofStatus.UNREPORTED, why=_UNREPORTED), walk=False))
        else:
            found.append(Found(hole(proof.status)))
        if block is None:
            for f in found:
                if f.hole.theorem == proof.name and f.walk:
                    f.walk, f.hole.unwalked = False, "Its proof is not in the text as it is now: call holes again."
    for rests in verdict.inherited_cheats:
        via = f" (through {', '.join(rests.through)})" if rests.through else ""
        found.append(Found(m.Hole(
            theorem=rests.theorem, line=rests.line, column=None, kind="inherited_cheat", theorem_line=rests.line,
            detail=f"rests on {', '.join(rests.rests_on)}{via}",
            unwalked="Its own proof is complete: the hole is in the cheated ancestor theorem(s) it rests on; "
                     "prove them in their own theory.",
        ), walk=False))
    return sorted(found, key=lambda f: (f.hole.line, f.hole.column or 0))


def _failing_step(verdict: m.DiagnosticsResult, info: textinfo.TextInfo | None, name: str) -> tuple[int, int] | None:
    """Where the verdict has located `name`'s failure on its failing step (not still on its name)."""
    if info is None:
        return None
    for d in verdict.diagnostics:
        if quirks.is_proof_failure(d.message) and not d.note and info.owner(d.range.line) == name:
            return d.range.line, d.range.col
    return None


def _message(result: m.HolesResult) -> str:
    """What the answer leaves out, said once."""
    words = []
    past = sum(1 for h in result.holes if h.unwalked.startswith("Past the"))
    if past:
        words.append(f"{plural(past, 'hole')} past the first {limits.MAX_POSITIONS} walked "
                     f"{'is' if past == 1 else 'are'} listed without goals: ask goalState at their lines, or fix "
                     "the first ones and call holes again.")
    if not result.complete:
        words.append("The verdict is not settled (see headline): proofs still checking may yet fail; call "
                     "holes again.")
    return " ".join(words)
