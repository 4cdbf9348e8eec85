"""The text of answers that are a run's output: an eval, a Holmake."""

from __future__ import annotations

from holctl.render.common import _indented, _server_lines
from holsrv.rpc.messages import EvalResult, HolmakeResult, VerifyResult


def _eval(reply: EvalResult) -> list[str]:
    lines = reply.output.rstrip("\n").splitlines()
    hints = reply.hints + [""] * (len(reply.errors) - len(reply.hints))
    for err, hint in zip(reply.errors, hints, strict=False):
        first, *rest = err.splitlines() or [""]
        lines += [f"error: {first}", *("    " + line for line in rest)]
        if hint:
            lines.append(f"    hint: {hint}")
    for warning in reply.warnings:
        first, *rest = warning.splitlines() or [""]
        lines += [f"warning: {first}", *("    " + line for line in rest)]
    if reply.stderr.strip():
        lines += ["stderr:", *_indented(reply.stderr.rstrip("\n"))]
    if reply.timed_out:
        lines.append(
            "TIMED OUT: the code did not finish in time and was cancelled "
            "(restart the file's server if it stays busy)"
        )
    if not lines:
        lines = ["(no output)"]
    shared = [f"shared: {reply.shared_state}"] if reply.shared_state else []
    return lines + shared + _server_lines(reply.server)


def _verify(reply: VerifyResult) -> list[str]:
    """The verdict, then each check: its status, its summary, its evidence indented."""
    lines = [reply.headline]
    if reply.reference:
        lines.append(f"reference: {reply.reference}")
    for check in reply.checks:
        lines.append(f"{check.status.upper():9} {check.name}: {check.summary}")
        lines += [f"    {line}" for line in check.evidence[:_EVIDENCE]]
        if len(check.evidence) > _EVIDENCE:
            lines.append(f"    … and {len(check.evidence) - _EVIDENCE} more")
    lines.append(f"({reply.elapsed_s:.1f}s; about file content {reply.content_hash[:12]})")
    return lines


_EVIDENCE = 40  # lines of evidence shown per check; --json has them all


def _holmake(reply: HolmakeResult) -> list[str]:
    lines = [("OK: " if reply.ok else "FAILED: ") + reply.message]
    if reply.failed:
        lines.append(f"failed: {reply.failed}")
    if reply.cheated:
        lines.append(f"cheated: {', '.join(reply.cheated)} (built, but a proof in each is a cheat)")
    lines += [f"unblocked: {file}" for file in reply.unblocked]
    if reply.log_tail:
        lines += ["log tail:", *_indented(reply.log_tail)]
    return lines
