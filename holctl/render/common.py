"""What the renderers of every kind share: the footer and freshness lines, server notes, places, tallies.

Names here and in the other modules of the package keep their leading
underscore: they are the package's own; holctl and holmcp use `render`.
"""

from __future__ import annotations

from holsrv.rpc.messages import (
    DocumentSymbolResult,
    EvalResult,
    Freshness,
    Location,
    Range,
    ReferencesResult,
    Result,
    RetryCompileResult,
    ServerNote,
)
from holsrv.rpc.words import duration

_TALLY_BUCKETS = ("proved", "failed", "cheated", "parse_error", "checking", "suspended", "diverged", "unchecked")
_BUCKET_WORDS = {"parse_error": "with a parse error"}


def _footer(content_hash: str, server: ServerNote, cached: bool = False, complete: bool = True) -> list[str]:
    """Which text of the file the answer is about, and whether this call had to start a server."""
    marks = [f"about file content {content_hash[:12]}"]
    if cached:
        marks.append("cached")
    if not complete:
        marks.append("not settled yet")
    return [f"({'; '.join(marks)})", *_server_lines(server)]


def _server_lines(server: ServerNote) -> list[str]:
    lines = []
    if server.note:  # says why this call had to start one, and names it
        lines.append(f"{server.note} (pid {server.pid})")
    elif server.start == "started":
        lines.append(f"started a new HOL server (pid {server.pid})")
    elif server.start == "restarted":
        lines.append(f"restarted the HOL server (now pid {server.pid})")
    if server.stderr_tail:
        lines.append("its last words on stderr:")
        lines.extend(_indented(server.stderr_tail))
    return lines


def _noted(note: str) -> list[str]:
    return [f"note: {note}"] if note else []


def _location(loc: Location) -> str:
    return f"{loc.path}:{loc.range.line}:{loc.range.col}"


def _range(r: Range) -> str:
    return f"{r.line}:{r.col}-{r.end_line}:{r.end_col}"


def _indented(text: str, prefix: str = "    ") -> list[str]:
    return [prefix + line for line in text.splitlines()]


# Answers whose own text does not already say that they may still change.
_SILENT_WHEN_UNSETTLED = (ReferencesResult, DocumentSymbolResult, EvalResult, RetryCompileResult)


def _freshness(reply: Result) -> list[str]:
    """A line only when the answer may be stale or is not settled: most answers need none."""
    fresh: Freshness | None = getattr(reply, "freshness", None)
    if fresh is None:
        return []
    said = set(getattr(reply, "warnings", ()))  # diagnostics lists a rebuilt ancestor among its warnings
    lines = [f"MAY BE STALE: {reason}" for reason in fresh.reasons if reason not in said]
    if not fresh.settled and isinstance(reply, _SILENT_WHEN_UNSETTLED):
        lines.append("not settled: the file is still compiling, so this may change; ask again")
    if fresh.age_s >= 60 and lines:
        lines.append(f"(answer computed {duration(fresh.age_s)} ago)")
    return lines
