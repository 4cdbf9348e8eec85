"""Lookups at a position or by name: hover, definition, references, completion, symbols.

Hover, definition and the symbol searches read the compiler's trees, so they
wait (up to the lookup wait) for the compile to get there, and say so when
it has not.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from holsrv import files, proofs
from holsrv.answers.common import Context, compiled, frontier_note, note, opened
from holsrv.errors import BadRequest
from holsrv.lsp import replies
from holsrv.pool import Lease
from holsrv.positions import Text
from holsrv.rpc import messages as m

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


@contextlib.asynccontextmanager
async def _at(ctx: Context, req: m.PositionRequest, client: str) -> AsyncIterator[tuple[files.Script, Lease, dict]]:
    """The file opened, its compile given time to reach here, and the request's LSP position."""
    async with opened(ctx, req.file, client) as (src, lease):
        position = Text(src.text).to_lsp(req.line, req.col, lease.session.encoding)
        await compiled(ctx, lease.session)
        yield src, lease, position


async def hover(ctx: Context, req: m.Hover, client: str) -> m.HoverResult:
    async with _at(ctx, req, client) as (src, lease, position):
        session = lease.session
        reply = await session.hol.hover(position)
        text = Text(src.text)
        word = text.word_at(req.line, req.col)
        return m.HoverResult(
            file=str(src.path), content_hash=src.hash, text=(reply.text or None) if reply else None,
            server=note(lease), note=frontier_note(session),
            range=text.lsp_range(reply.range.as_lsp(), session.encoding) if reply and reply.range else None,
            proof_status=proofs.theorem_status(session.file, src.text, session.encoding, word, ctx.clock()),
        )


async def definition(ctx: Context, req: m.Definition, client: str) -> m.DefinitionResult:
    async with _at(ctx, req, client) as (src, lease, position):
        targets = await lease.session.hol.definition(position)
        return m.DefinitionResult(
            file=str(src.path), content_hash=src.hash, server=note(lease), note=frontier_note(lease.session),
            targets=[_location(t, src, lease.session.encoding) for t in targets],
        )


async def references(ctx: Context, req: m.References, client: str) -> m.ReferencesResult:
    async with _at(ctx, req, client) as (src, lease, position):
        found = await lease.session.hol.references(position)
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
    async with _at(ctx, req, client) as (src, lease, position):
        items, incomplete = await lease.session.hol.completion(position)
        return m.CompletionResult(
            file=str(src.path), content_hash=src.hash, total=len(items), incomplete=incomplete,
            server=note(lease), note=frontier_note(lease.session),
            items=[
                m.CompletionItem(label=i.label, kind=COMPLETION_KINDS.get(i.kind or 0, "other"), detail=i.detail)
                for i in items[:m.MAX_COMPLETIONS]
            ],
        )


async def document_symbol(ctx: Context, req: m.DocumentSymbol, client: str) -> m.DocumentSymbolResult:
    async with opened(ctx, req.file, client) as (src, lease):
        # Parse-driven in the server: works on files that do not compile.
        tree = await lease.session.hol.document_symbol()
        symbols: list[m.Symbol] = []
        _flatten(tree, Text(src.text), lease.session.encoding, 0, symbols)
        return m.DocumentSymbolResult(file=str(src.path), content_hash=src.hash,
                                      symbols=symbols[:MAX_SYMBOLS], server=note(lease))


async def workspace_symbol(ctx: Context, req: m.WorkspaceSymbol, client: str) -> m.WorkspaceSymbolResult:
    if len(req.query.strip()) < 2:
        raise BadRequest("the query must have at least 2 characters (it is matched as a case-insensitive substring)")
    async with opened(ctx, req.file, client) as (src, lease):
        session = lease.session
        await compiled(ctx, session)
        found = await session.hol.workspace_symbol(req.query.strip())
        return m.WorkspaceSymbolResult(
            file=str(src.path), query=req.query, server=note(lease), note=frontier_note(session),
            symbols=[
                m.WorkspaceSymbolItem(
                    name=s.name, kind=SYMBOL_KINDS.get(s.kind, "other"), theory=s.container_name,
                    path=replies.path_of(s.location.uri), line=s.location.range.start.line + 1,
                )
                for s in found
            ],
        )


def _location(target: replies.Target, src: files.Script, encoding: str) -> m.Location:
    path = target.path
    text = Text(src.text if Path(path) == src.path else _read_quietly(path))
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
