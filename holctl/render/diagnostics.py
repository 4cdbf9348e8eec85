"""The text of a diagnostics answer: verdict, tally, problems."""

from __future__ import annotations

from holctl.render.common import _BUCKET_WORDS, _TALLY_BUCKETS, _footer
from holsrv.rpc.messages import DiagnosticsResult, Proof, Tally


def _diagnostics(reply: DiagnosticsResult) -> list[str]:
    lines = [reply.headline, tally_line(reply.tally)]
    if reply.blocked is not None:
        lines.append(f"blocked: {reply.blocked.message}")
    lines += [f"warning: {w}" for w in reply.warnings]
    if reply.note:
        lines.append(f"note: {reply.note}")
    lines += [f"outstanding: {o}" for o in reply.outstanding]
    lines += [f"cheat at line {c.line}" + (f", in theorem {c.theorem}" if c.theorem else "") for c in reply.cheats]
    lines += [f"line {c.line}: {c.theorem} rests on cheated {', '.join(c.rests_on)}"
              + (f" (through {', '.join(c.through)})" if c.through else "") + " (linked by the names its proof uses)"
              for c in reply.inherited_cheats]
    for p in reply.proofs:
        if p.status != "proved":
            lines += [_proof(p), *([f"      hint: {p.hint}"] if p.hint else [])]
    for d in reply.diagnostics:
        first, *rest = d.message.splitlines() or [""]
        lines.append(f"{d.range.line}:{d.range.col} {d.severity}: {first}")
        lines += ["    " + line for line in rest]
        if d.note:
            lines.append(f"    ({d.note})")
    if reply.diagnostics_omitted:
        lines.append(f"… and {reply.diagnostics_omitted} more diagnostics (fix the first ones, then ask again)")
    return lines + _footer(reply.content_hash, reply.server, reply.cached, reply.complete)


def tally_line(tally: Tally) -> str:
    """`proofs: 3 proved, 1 failed (4 total)`; buckets that are zero are left out."""
    if tally.total == 0:
        return "proofs: none found"
    counts = [f"{getattr(tally, b)} {_BUCKET_WORDS.get(b, b)}" for b in _TALLY_BUCKETS if getattr(tally, b)]
    return f"proofs: {', '.join(counts)} ({tally.total} total)"


def _proof(proof: Proof) -> str:
    status = proof.status  # how long a proof has been checking is in `outstanding`
    detail = proof.detail.splitlines()[0] if proof.detail else ""
    return "  ".join(filter(None, [f"  line {proof.line}", proof.name, status, detail]))
