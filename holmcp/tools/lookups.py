"""The tools that look names up in a file's HOL: types, definitions, uses, completions, outlines, search.

Names, parameter names and descriptions are a contract with the agents that call them:
change none of them by a character.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from holmcp.connection import Connection
from holmcp.tools.params import Column, ExpectHash, File, Line, LookupWait, default
from holsrv.rpc import messages


class LookupTools:
    """Each builds one request and asks the daemon."""

    def __init__(self, daemon: Connection) -> None:
        self.daemon = daemon

    async def hover(
        self, ctx: Context, file: File, line: Line, column: Column, wait: LookupWait = None
    ) -> CallToolResult:
        """The type of the term or constant at a position, or the theorem's statement (and, for this
        file's theorems, whether its proof is proved). Check a lemma's exact form before using it.
        """
        request = messages.Hover(file=self.daemon.path(file), line=line, column=column, wait=wait)
        return await self.daemon.ask(ctx, request)

    async def definition(
        self, ctx: Context, file: File, line: Line, column: Column, wait: LookupWait = None
    ) -> CallToolResult:
        """Where the name at a position is defined: path:line:column, here, in another script or in
        HOL's sources.
        """
        request = messages.Definition(file=self.daemon.path(file), line=line, column=column, wait=wait)
        return await self.daemon.ask(ctx, request)

    async def references(
        self, ctx: Context, file: File, line: Line, column: Column, wait: LookupWait = None
    ) -> CallToolResult:
        """Where the name at a position is used, as path:line:column. Some HOL servers cannot say; the
        answer then tells you to search the files.
        """
        request = messages.References(file=self.daemon.path(file), line=line, column=column, wait=wait)
        return await self.daemon.ask(ctx, request)

    async def completion(
        self, ctx: Context, file: File, line: Line, column: Column, wait: LookupWait = None
    ) -> CallToolResult:
        """Names in scope that complete the partial name just before a position: up to 50, and how
        many more. To search by any part of a name, use workspaceSymbol.
        """
        request = messages.Completion(file=self.daemon.path(file), line=line, column=column, wait=wait)
        return await self.daemon.ask(ctx, request)

    async def documentSymbol(self, ctx: Context, file: File, wait: LookupWait = None) -> CallToolResult:
        """Outline a script: its theorems, definitions and other declarations with their lines (up to
        500, and how many more): a proof's line without reading the file.
        """
        return await self.daemon.ask(ctx, messages.DocumentSymbol(file=self.daemon.path(file), wait=wait))

    async def workspaceSymbol(
        self,
        ctx: Context,
        file: File,
        query: Annotated[
            str, Field(description="Part of a name, 2 characters or more, any case: e.g. ADD_COMM.")
        ],
        limit: Annotated[int, Field(ge=1, le=200, description="Matches per page.")] = default(
            messages.WorkspaceSymbol, "limit"
        ),
        page: Annotated[int, Field(ge=1, description="1-based page.")] = 1,
        wait: LookupWait = None,
    ) -> CallToolResult:
        """Find the theorems, definitions and constants a script can see (its own; its ancestors' where
        HOL lists them) by part of their name: `name: ⊢ statement`, theory and place, a page at a time
        with how many more.
        """
        request = messages.WorkspaceSymbol(
            file=self.daemon.path(file), query=query, limit=limit, page=page, wait=wait
        )
        return await self.daemon.ask(ctx, request)

    async def search(
        self,
        ctx: Context,
        file: File,
        query: Annotated[str, Field(description='E.g. \'arithmetic\' "ADD" x + y = y + x')] = "",
        limit: Annotated[int, Field(ge=1, le=200, description="Matches per page.")] = default(
            messages.Search, "limit"
        ),
        page: Annotated[int, Field(ge=1, description="1-based page.")] = 1,
        expect_hash: ExpectHash = "",
        scope: Annotated[
            str | list[str], Field(description='"ancestors" (the script\'s), "all", or theory names.')
        ] = "ancestors",  # messages.Search's default
        kind: Annotated[
            Literal["theorem", "definition", "axiom", "any"], Field(description="Keep only this kind.")
        ] = "any",
        conclusion: Annotated[str, Field(description="Pattern in the conclusion.")] = "",
        hypothesis: Annotated[str, Field(description="Pattern in a hypothesis.")] = "",
    ) -> CallToolResult:
        """Search the theorems the script's HOL has loaded: "name fragment" in double quotes, 'theory'
        in single quotes, anything else a term pattern (variables match any term); each narrows. Gives
        name, kind, theory, statement, place, a page at a time; a theorem re-exported with the same
        statement is one hit, its other theories in also_in. An empty answer says why and what to relax;
        without HOL's search, eval does it (`via`).
        """
        request = messages.Search(
            file=self.daemon.path(file), query=query, limit=limit, page=page, expect_hash=expect_hash,
            scope=scope, kind="" if kind == "any" else kind, conclusion=conclusion, hypothesis=hypothesis,
        )
        return await self.daemon.ask(ctx, request)

    async def uses(
        self, ctx: Context, file: File, name: Annotated[str, Field(description="NAME or theory.NAME.")]
    ) -> CallToolResult:
        """What a theorem's proof depends on (HOL's tags; for this script's, the theorems its proof
        names) and which proofs of the open scripts mention it.
        """
        return await self.daemon.ask(ctx, messages.Uses(file=self.daemon.path(file), name=name))
