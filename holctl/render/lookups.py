"""The text of lookups: references, completions, a file's symbols, workspace symbols, search hits."""

from __future__ import annotations

from holctl.render.common import _location
from holsrv.rpc.messages import (
    MAX_COMPLETIONS,
    CompletionResult,
    DocumentSymbolResult,
    ReferencesResult,
    SearchResult,
    UsedTheorem,
    UsesResult,
    WorkspaceSymbolResult,
)


def _references(reply: ReferencesResult) -> list[str]:
    found = [_location(loc) for loc in reply.locations]
    if not found:
        return [reply.message or "no references found"]
    return found + ([reply.message] if reply.message else [])


def _completion(reply: CompletionResult) -> list[str]:
    shown = reply.items[:MAX_COMPLETIONS]
    if not shown:
        return [reply.message or "no completions here"]
    lines = ["  ".join(filter(None, [i.label, f"({i.kind})", i.detail])) for i in shown]
    lines += [f"note: {reply.message}"] if reply.message else []
    more = max(reply.total, len(reply.items)) - len(shown)
    if more > 0 or reply.incomplete:
        lines.append(f"{more} more; type more of the name to narrow the list" if more > 0
                     else "the list is incomplete; type more of the name to narrow it")
    return lines


def _document_symbols(reply: DocumentSymbolResult) -> list[str]:
    if not reply.symbols:
        return ["no symbols in this file"]
    return [
        "  " * s.depth + "  ".join(filter(None, [str(s.line), s.kind, s.name, s.detail]))
        for s in reply.symbols
    ]


def _workspace_symbols(reply: WorkspaceSymbolResult) -> list[str]:
    if not reply.symbols:
        return [f"no symbols match {reply.query!r}" + (f" on page {reply.page}" if reply.page > 1 else "")]
    lines = []
    for s in reply.symbols:
        where = f"{s.path}:{s.line}" if s.path and s.line else s.path
        place = ", ".join(filter(None, [s.kind, s.theory, where]))
        statement = " ".join(s.statement.split())
        lines.append(f"{s.name}: {statement}  ({place})" if statement else f"{s.name}  ({place})")
    if reply.more:
        lines.append(
            f"page {reply.page}: {len(reply.symbols)} of {reply.total} matches; {reply.more} more on "
            f"page {reply.page + 1} and after; a longer query narrows the list"
        )
    if reply.capped:
        lines.append("HOL stops at a fixed number of matches, so there may be more than these: narrow the query")
    return lines


def _search(reply: SearchResult) -> list[str]:
    via = [f"({reply.via})"] if reply.via else []
    if not reply.hits:
        return [reply.message or f"nothing matches {reply.query!r}", *via]
    lines = []
    for h in reply.hits:
        where = f"{h.path}:{h.line}" if h.path and h.line else h.path
        place = ", ".join(filter(None, [h.kind, h.theory, where]))
        also = f"; also in {', '.join(h.also_in)}, the same statement" if h.also_in else ""
        lines.append(f"{h.name}: {h.statement}  ({place}{also})")
    if reply.more or reply.page > 1:
        lines.append(f"page {reply.page}: {len(reply.hits)} of {reply.total} matches"
                     + (f"; {reply.more} more: ask for page {reply.page + 1}" if reply.more else "; the last page"))
    if reply.outside:
        listed = ", ".join(f"{theory} ({n})" for theory, n in reply.outside.items())
        lines.append(f"also matching in theories this script does not build on: {listed}; scope \"all\" lists them")
    if reply.capped:
        lines.append("HOL stopped at the daemon's cap, so there may be more: narrow the query")
    return lines + via


def _uses(reply: UsesResult) -> list[str]:
    def named(t: UsedTheorem) -> str:
        if t.path:
            return f"{t.name} ({t.path}:{t.line})" if t.line else f"{t.name} ({t.path})"
        return f"{t.theory}.{t.name}" if t.theory and "#" not in t.name else t.name
    source = {"tags": "by HOL's dependency tags", "text": "named in its proof text"}.get(reply.depends_from, "")
    about = f"{reply.theory}.{reply.name.rpartition('.')[2]}" if reply.theory else reply.name
    lines = [f"{about} depends on ({source}): " + (", ".join(map(named, reply.depends_on)) or "nothing known")]
    lines.append("used by (proofs in the open scripts): " + (", ".join(map(named, reply.used_by)) or "none"))
    return lines + ([reply.message] if reply.message else [])
