"""The tools about a file's proofs: its verdict, the goals in a proof, candidates tried in place, goal diffs.

Names, parameter names and descriptions are a contract with the agents that call them:
change none of them by a character.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from holmcp.connection import Connection
from holmcp.tools.params import DeferAfter, ExpectHash, File, Line, default
from holsrv.rpc import messages


class ProofTools:
    """Each builds one request and asks the daemon."""

    def __init__(self, daemon: Connection) -> None:
        self.daemon = daemon

    async def diagnostics(
        self,
        ctx: Context,
        file: File,
        wait: Annotated[
            float,
            Field(ge=0, description="Seconds to wait for compiling and checking; then INCOMPLETE with what "
                  "is known (nothing is cancelled)."),
        ] = default(messages.Diagnostics, "wait"),
        expect_hash: ExpectHash = "",
        defer_after: DeferAfter = None,
    ) -> CallToolResult:
        """Check a HOL4 script: compile it and replay every proof; call it after each edit (it re-reads
        the file). Verdict: OK only if Holmake would build it; else FAILED (a proof fails), ERRORS (does
        not compile or parse), CHEATS (cheat, CHEAT_TAC, mk_thm), SUSPENDED, UNCHECKED, BLOCKED (an
        ancestor will not load: fix it, then retryCompile) or INCOMPLETE (wait ran out: call again; a
        SLOW or LOOPING proof is named: edit it). Lists unproved proofs and messages at line:column.
        STALE: a rebuilt ancestor, a fresh server is catching up; REBUILT: call restart. Next: goalState
        inside the failing proof.
        """
        request = messages.Diagnostics(file=self.daemon.path(file), wait=wait, progress=True, expect_hash=expect_hash,
                                       defer_after=defer_after)
        return await self.daemon.ask(ctx, request)

    async def goalState(
        self,
        ctx: Context,
        file: File,
        line: Line,
        column: Annotated[
            int | None,
            Field(ge=1, description="1-based column, counting characters. Omit it for the whole line."),
        ] = None,
        wait: Annotated[
            float,
            Field(ge=0, description="Seconds to wait for the compile to reach the line."),
        ] = default(messages.GoalState, "wait"),
        expect_hash: ExpectHash = "",
    ) -> CallToolResult:
        """Show the goals in a proof (Proof...QED): at a column, before the tactic there (on the QED
        line: what is left); without one, before the line's first tactic and after its last, to see
        what the line did. `state`: goals, proved_here (none left), failed (the tactic fails: error,
        range), not_in_proof, compiling or starting (call again), blocked.
        """
        request = messages.GoalState(file=self.daemon.path(file), line=line, column=column, wait=wait, progress=True,
                                     expect_hash=expect_hash)
        return await self.daemon.ask(ctx, request)

    async def try_(
        self,
        ctx: Context,
        file: File,
        line: Line,
        tactics: Annotated[list[str], Field(min_length=1, description="Tried in order.")],
        column: Annotated[
            int | None, Field(ge=1, description="Replace from here; omit: the line's tactic.")
        ] = None,
        timeout: Annotated[
            float | None, Field(ge=0, description="Seconds per candidate (default 30).")
        ] = None,
        defer_after: DeferAfter = None,
    ) -> CallToolResult:
        """Try tactics in place of a proof line's tactic, file untouched. Per candidate: state (proved,
        proved_here, goals, failed, timed_out, not_tried), goals or error (with its range in the candidate),
        proof status, time, goal diff. At most 8.
        """
        request = messages.Try(
            file=self.daemon.path(file), line=line, column=column, tactics=tactics, timeout=timeout, progress=True,
            defer_after=defer_after,
        )
        return await self.daemon.ask(ctx, request)

    async def goalDiff(
        self, ctx: Context, file: File, line1: Line, line2: Line,
        column1: Annotated[int | None, Field(ge=1, description="Omit: before line1.")] = None,
        column2: Annotated[int | None, Field(ge=1, description="Omit: after line2.")] = None,
    ) -> CallToolResult:
        """Goals closed and added, hypotheses added and removed, conclusions rewritten between two
        positions of one proof.
        """
        request = messages.GoalDiff(
            file=self.daemon.path(file), line1=line1, line2=line2, column1=column1, column2=column2
        )
        return await self.daemon.ask(ctx, request)
