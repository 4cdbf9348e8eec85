"""Lookups at a position or by name: hover, definition, references, completion, symbols.

Hover, definition and the symbol searches read the compiler's trees, so they
wait (up to the lookup wait) for the compile to get there, and say so when
it has not.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from holsrv.answers import lacking
from holsrv.answers.common import Context, compiled, frontier_note, note, opened, position_check, within
from holsrv.disk import files
from holsrv.errors import BadRequest, LspError
from holsrv.lsp import replies
from holsrv.lsp.services import Service
from holsrv.lsp.theorydb import DbError
from holsrv.pool.pool import Lease
from holsrv.rpc import messages as m
from holsrv.server.session import Session
from holsrv.text import textinfo
from holsrv.text.positions import Text
from holsrv.verdict import proofs

COMPLETION_KINDS = {
    1: "text", 2: "method", 3: "function", 4: "constructor", 5: "field", 6: "value",
    7: "class", 8: "interface", 9: "structure", 10: "property", 12: "value", 13: "enum",
    14: "keyword", 15: "snippet", 21: "theorem", 22: "type", 25: "type parameter",
}
SYMBOL_KINDS = {
    2: "theory/structure", 5: "class", 6: "conjunct", 9: "constructor", 10: "datatype",
    11: "signature", 12: "definition", 13: "value", 14: "theorem", 23: "type", 25: "overload",
}
MAX_SYMBOLS = 500
MAX_SYMBOL_PAGE = 200
# How many database matches one workspaceSymbol asks for; reaching it means there may be more.
SEARCH_LIMIT = 2000


@contextlib.asynccontextmanager
async def _at(
    ctx: Context, req: m.PositionRequest, client: str
) -> AsyncIterator[tuple[files.Script, Lease, dict, float]]:
    """The file opened, its compile given time to reach here, the request's LSP
    position, and how long HOL may take to answer (what is left of the wait)."""
    deadline = ctx.clock() + (ctx.settings.lookup_wait_s if req.wait is None else max(0.0, req.wait))
    async with opened(ctx, req.file, client, req.wait, check=position_check(req.line, req.column)) as (src, lease):
        position = textinfo.of(src.text).lines.to_lsp(req.line, req.column, lease.session.encoding)
        await compiled(ctx, lease.session, req.wait)
        yield src, lease, position, within(ctx, deadline)


async def hover(ctx: Context, req: m.Hover, client: str) -> m.HoverResult:
    async with _at(ctx, req, client) as (src, lease, position, timeout):
        session = lease.session
        try:
            reply = await session.hol.hover(position, timeout=timeout)
        except LspError as err:
            lacking.learn_unknown(session, Service.HOVER, "textDocument/hover", err)
            reply = None
        text = textinfo.of(src.text).lines
        word = text.word_at(req.line, req.column)
        result = m.HoverResult(
            file=str(src.path), content_hash=src.hash, text=(reply.text or None) if reply else None,
            server=note(lease), note=frontier_note(session),
            range=text.lsp_range(reply.range.as_lsp(), session.encoding) if reply and reply.range else None,
            proof_status=proofs.theorem_status(session.file, src.text, session.encoding, word, ctx.clock()),
        )
        if result.text is None and word:
            await _without_hover(session, src.text, word, result, timeout)
        return result


async def _without_hover(session: Session, text: str, word: str, result: m.HoverResult, timeout: float) -> None:
    """An empty hover on a name, from a server found to have no hover: said, and a theorem's
    statement given from the theorem database instead."""
    lacks = await lacking.lacked(session, Service.HOVER, text, timeout)
    if lacks is None:
        return
    result.message = f"This HOL cannot hover: {lacks.why}. {lacking.HOVER_INSTEAD}"
    hit = await lacking.theorem_named(session, word)
    if hit is not None:
        result.text = f"{hit.theory}.{hit.name}: {_one_line(hit.statement)}"
        result.message += " The statement shown is the theorem database's, found by its name."


async def definition(ctx: Context, req: m.Definition, client: str) -> m.DefinitionResult:
    async with _at(ctx, req, client) as (src, lease, position, timeout):
        session = lease.session
        try:
            targets = await session.hol.definition(position, timeout=timeout)
        except LspError as err:
            lacking.learn_unknown(session, Service.DEFINITION, "textDocument/definition", err)
            targets = []
        result = m.DefinitionResult(
            file=str(src.path), content_hash=src.hash, server=note(lease), note=frontier_note(session),
            targets=[_location(t, src, session.encoding) for t in targets],
        )
        word = textinfo.of(src.text).lines.word_at(req.line, req.column)
        if not targets and word:
            await _without_definition(session, src, word, result, timeout)
        return result


async def _without_definition(
    session: Session, src: files.Script, word: str, result: m.DefinitionResult, timeout: float
) -> None:
    """No target, from a server found to have no definition backend: said, and a stored
    theorem's place given from the theorem database instead, where it has one."""
    lacks = await lacking.lacked(session, Service.DEFINITION, src.text, timeout)
    if lacks is None:
        return
    result.message = f"This HOL cannot find definitions: {lacks.why}. {lacking.DEFINITION_INSTEAD}"
    hit = await lacking.theorem_named(session, word)
    if hit is not None and hit.uri and hit.line:
        path = replies.path_of(hit.uri)
        result.targets = [m.Location(path=path, range=m.Range(hit.line, 1, hit.line, 1))]
        result.message += f" The place shown is where the theorem database says {hit.theory}.{hit.name} is stored."
    elif hit is not None:
        result.message += f" The name is {hit.theory}Theory's {hit.name}: {_one_line(hit.statement)}."


async def references(ctx: Context, req: m.References, client: str) -> m.ReferencesResult:
    async with _at(ctx, req, client) as (src, lease, position, timeout):
        found = await lease.session.hol.references(position, timeout=timeout)
        if isinstance(found, replies.Unsupported):
            supported, locations = False, []
            message = ("This HOL server does not support references (textDocument/references). "
                       "Use workspaceSymbol to find theorems by name, or definition to jump to one.")
        else:
            supported, locations = True, [_location(t, src, lease.session.encoding) for t in found]
            message = f"{len(locations)} references"
        return m.ReferencesResult(file=str(src.path), content_hash=src.hash, server=note(lease),
                                  supported=supported, locations=locations, message=message)


async def completion(ctx: Context, req: m.Completion, client: str) -> m.CompletionResult:
    async with _at(ctx, req, client) as (src, lease, position, timeout):
        session = lease.session
        try:
            raw, incomplete = await session.hol.completion(position, timeout=timeout)
        except LspError as err:
            lacking.learn_unknown(session, Service.COMPLETION, "textDocument/completion", err)
            raw, incomplete = [], False
        items = _once_each(raw)
        result = m.CompletionResult(
            file=str(src.path), content_hash=src.hash, total=len(items), incomplete=incomplete,
            server=note(lease), note=frontier_note(session), items=items[:m.MAX_COMPLETIONS],
        )
        prefix = _prefix(src.text, req.line, req.column)
        if not items and prefix:
            await _without_completion(session, src.text, prefix, result, timeout)
        return result


def _prefix(text: str, line: int, column: int) -> str:
    """The identifier characters just before (line, column), as HOL reads a completion's prefix
    (docs/protocol.md#completion)."""
    before = textinfo.of(text).lines.lines[line - 1][:column - 1]
    return before[len(before.rstrip(_NAME_CHARS)):]


_NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_'"


async def _without_completion(
    session: Session, text: str, prefix: str, result: m.CompletionResult, timeout: float
) -> None:
    """No completion, from a server found to have none: said, and the stored theorems whose
    name starts with the prefix given from the theorem database instead."""
    lacks = await lacking.lacked(session, Service.COMPLETION, text, timeout)
    if lacks is None:
        return
    result.message = f"This HOL cannot complete names: {lacks.why}. {lacking.COMPLETION_INSTEAD}"
    hits = await lacking.theorems_starting(session, prefix, MAX_SYMBOL_PAGE)
    if hits:
        result.items = [m.CompletionItem(label=h.name, kind="theorem", detail=f"{h.theory}Theory")
                        for h in hits][:m.MAX_COMPLETIONS]
        result.total = len(hits)
        result.message += " The theorems listed come from the theorem database, by the start of their name."


def _once_each(raw: list[replies.CompletionItem]) -> list[m.CompletionItem]:
    """Each name once: HOL offers a theorem both as an SML value and as a theorem; the theorem wins."""
    by_label: dict[str, m.CompletionItem] = {}
    for item in raw:
        kind = COMPLETION_KINDS.get(item.kind or 0, "other")
        known = by_label.get(item.label)
        if known is None:
            by_label[item.label] = m.CompletionItem(label=item.label, kind=kind, detail=item.detail)
        elif kind == "theorem" and known.kind != "theorem":
            known.kind, known.detail = kind, item.detail or known.detail
    return list(by_label.values())


async def document_symbol(ctx: Context, req: m.DocumentSymbol, client: str) -> m.DocumentSymbolResult:
    async with opened(ctx, req.file, client, req.wait) as (src, lease):
        # Parse-driven in the server: works on files that do not compile.
        tree = await lease.session.hol.document_symbol()
        symbols: list[m.Symbol] = []
        _flatten(tree, textinfo.of(src.text).lines, lease.session.encoding, 0, symbols)
        return m.DocumentSymbolResult(file=str(src.path), content_hash=src.hash, symbols=symbols[:MAX_SYMBOLS],
                                      omitted=max(0, len(symbols) - MAX_SYMBOLS), server=note(lease))


async def workspace_symbol(ctx: Context, req: m.WorkspaceSymbol, client: str) -> m.WorkspaceSymbolResult:
    query = req.query.strip()
    if len(query) < 2:
        raise BadRequest("the query must have at least 2 characters (it is matched as a case-insensitive substring)")
    if not 1 <= req.limit <= MAX_SYMBOL_PAGE or req.page < 1:
        raise BadRequest(f"limit must be 1..{MAX_SYMBOL_PAGE} and page 1 or more")
    async with opened(ctx, req.file, client, req.wait) as (src, lease):
        session = lease.session
        await compiled(ctx, session, req.wait)
        found, ancestors_named = await lacking.workspace_symbols(session, query)
        # workspace/symbol stops at 200 matches and has no statements; the
        # theorem database's search has both, for what the server has loaded
        # (through eval on a server without a search backend).
        said = []
        try:
            hits, via = await lacking.theorem_search(session, f'"{query}"', SEARCH_LIMIT, [], [query], "")
            said += [f"{via}."] if via else []
        except (lacking.Unanswerable, DbError) as err:
            hits = []
            if not ancestors_named:
                said.append(f"Only this file's names are listed: this HOL's workspace/symbol does not name the "
                            f"ancestors' theorems, and {err}")
        items = _symbol_items(found, hits, src, session.holdir)
        first = (req.page - 1) * req.limit
        page = items[first:first + req.limit]
        return m.WorkspaceSymbolResult(
            file=str(src.path), query=req.query, server=note(lease),
            note=" ".join(filter(None, [frontier_note(session), *said])),
            symbols=page, page=req.page, total=len(items), more=max(0, len(items) - first - len(page)),
            capped=len(hits) >= SEARCH_LIMIT,
        )


def _symbol_items(
    found: list[replies.WorkspaceSymbol], hits: list[replies.SearchHit], src: files.Script, holdir: str
) -> list[m.WorkspaceSymbolItem]:
    """Every match once: the server's symbols in its order, then database matches it cut off."""
    statements = {(h.name, h.theory): h.statement for h in hits}
    local = _local_statements(src.text)
    items, seen = [], set()
    for s in found:
        theory = s.container_name.removesuffix(" (not an ancestor)").removesuffix("Theory")
        statement = local.get(s.name, "") if s.container_name == "this file" else statements.get((s.name, theory), "")
        seen.add((s.name, theory))
        items.append(m.WorkspaceSymbolItem(
            name=s.name, kind=SYMBOL_KINDS.get(s.kind, "other"), theory=s.container_name,
            path=_short(replies.path_of(s.location.uri), src, holdir), line=s.location.range.start.line + 1,
            statement=_one_line(statement),
        ))
    for h in hits:
        if (h.name, h.theory) not in seen:
            items.append(m.WorkspaceSymbolItem(
                name=h.name, kind="definition" if h.class_ == "Def" else "theorem", theory=f"{h.theory}Theory",
                path=_short(replies.path_of(h.uri), src, holdir) if h.uri else "", line=h.line,
                statement=_one_line(h.statement),
            ))
    return items


def _local_statements(text: str) -> dict[str, str]:
    """`⊢ statement` of each theorem of the script, from its text (between `name:` and `Proof`)."""
    out = {}
    for block in textinfo.of(text).blocks:
        head = text[block.start:block.body_start]
        _, colon, rest = head.partition(":")
        statement = rest.rsplit("Proof", 1)[0] if colon else ""
        if statement.strip():
            out[block.name] = "⊢ " + statement.strip()
    return out


def _one_line(statement: str) -> str:
    return " ".join(statement.split())


def _short(path: str, src: files.Script, holdir: str) -> str:
    """`path` relative to the script's directory, or as `$HOLDIR/…`, where it lies under one."""
    for base, shown in ((str(src.path.parent), ""), (holdir, "$HOLDIR/")):
        if base and path.startswith(base.rstrip("/") + "/"):
            return shown + path[len(base.rstrip("/")) + 1:]
    return path


def _location(target: replies.Target, src: files.Script, encoding: str) -> m.Location:
    path = target.path
    text = textinfo.of(src.text).lines if Path(path) == src.path else Text(_read_quietly(path))
    return m.Location(path=path, range=text.lsp_range(target.selection_range.as_lsp(), encoding))


def _flatten(symbols: list[replies.DocumentSymbol], text: Text, encoding: str, depth: int, out: list[m.Symbol]) -> None:
    for sym in symbols:
        whole = text.lsp_range(sym.range.as_lsp(), encoding)
        start = text.lsp_range(sym.selection_range.as_lsp(), encoding)
        out.append(m.Symbol(
            name=sym.name, kind=SYMBOL_KINDS.get(sym.kind, "other"), line=start.line, col=start.col,
            end_line=whole.end_line, detail=sym.detail, depth=depth,
        ))
        _flatten(sym.children, text, encoding, depth + 1, out)


def _read_quietly(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(files.MAX_SCRIPT_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
