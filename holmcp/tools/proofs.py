"""The tools about a file's proofs: its verdict, the goals in a proof, candidates tried in place, goal diffs.

Names, parameter names and descriptions are a contract with the agents that call them:
change none of them by a character.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import Field

from holmcp import output
from holmcp.connection import Connection
from holmcp.tools.params import DeferAfter, ExpectHash, File, Line, default
from holsrv.errors import BadRequest, HolsrvError
from holsrv.rpc import limits, messages


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
        """Check a HOL4 script: compile it and replay every proof; call after each edit (it re-reads
        the file). Verdict: OK only if Holmake would build it; else FAILED (a proof fails), ERRORS (does
        not compile/parse), CHEATS (cheat, CHEAT_TAC, mk_thm), SUSPENDED, UNCHECKED, BLOCKED (an
        ancestor will not load: fix it, then retryCompile) or INCOMPLETE (wait ran out: call again; a
        SLOW or LOOPING proof is named: edit it). Lists unproved proofs, messages at line:column.
        STALE: a rebuilt ancestor, a fresh server is catching up; REBUILT: call restart. Next: goalState
        in the failing proof.
        """
        request = messages.Diagnostics(file=self.daemon.path(file), wait=wait, progress=True, expect_hash=expect_hash,
                                       defer_after=defer_after)
        return await self.daemon.ask(ctx, request)

    async def goalState(
        self,
        ctx: Context,
        file: File,
        line: Annotated[int | None, Field(ge=1, description="1-based line.")] = None,
        column: Annotated[
            int | None,
            Field(ge=1, description="1-based column, counting characters. Omit it for the whole line."),
        ] = None,
        wait: Annotated[
            float,
            Field(ge=0, description="Seconds to wait for the compile to reach the line."),
        ] = default(messages.GoalState, "wait"),
        expect_hash: ExpectHash = "",
        positions: Annotated[
            list[list[int]] | None,
            Field(description="[[line, column?], ...], up to 64."),
        ] = None,
    ) -> CallToolResult:
        """Show the goals in a proof (Proof...QED): at a column, before the tactic there (on the QED
        line: what is left); without one, before the line's first tactic and after its last. `state`: goals, proved_here
        (none left), cheated (closed only by cheat), failed (the tactic fails: error, range),
        not_in_proof, compiling or starting (call again), blocked, looping or unsupported (see message).
        positions: several in one call (state error: that one alone).
        """
        try:
            at = _positions(line, column, positions)
        except HolsrvError as err:
            raise ToolError(output.error_text(err)) from None
        request = messages.GoalState(file=self.daemon.path(file), line=line or 0, column=column, wait=wait,
                                     progress=True, expect_hash=expect_hash, positions=at)
        return await self.daemon.ask(ctx, request)

    async def holes(self, ctx: Context, file: File) -> CallToolResult:
        """Every unfinished proof (cheat, failed step, unchecked, resting on a cheated ancestor) with its
        line and the goals at its hole, in one call.
        """
        return await self.daemon.ask(ctx, messages.Holes(file=self.daemon.path(file), progress=True))

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
        apply: Annotated[
            bool, Field(description="Write the first proved one into the file, undone if its check fails.")
        ] = False,
        defer_after: DeferAfter = None,
    ) -> CallToolResult:
        """Try tactics in place of a proof line's tactic (on a Theorem/Proof line: whole proof; a
        Theorem...QED candidate may change the statement), file untouched unless apply. Each: state
        (proved, proved_here, goals, failed, timed_out, not_tried), goals or error, proof status, time,
        goal diff. At most 8.
        """
        request = messages.Try(
            file=self.daemon.path(file), line=line, column=column, tactics=tactics, timeout=timeout, progress=True,
            apply=apply,
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

    async def verify(
        self, ctx: Context, file: File,
        theorems: Annotated[list[str] | None, Field(description="Theorems to check; omit for all.")] = None,
    ) -> CallToolResult:
        """Before calling a proof done: VERIFIED, or NOT VERIFIED naming what failed: statements vs git
        HEAD, cheats, HOL's oracles and axioms, a Holmake build.
        """
        request = messages.Verify(file=self.daemon.path(file), theorems=theorems or [], progress=True)
        return await self.daemon.ask(ctx, request)


def _positions(line: int | None, column: int | None, positions: list[list[int]] | None) -> list | None:
    """goalState's `positions` as the wire has them, or None for one position; BadRequest
    (TooManyPositions past the bound) for what is neither."""
    if (line is None) == (positions is None) or (positions is not None and column is not None):
        raise BadRequest("goalState: give line (and column) for one position, or positions for several; "
                         "not both, and not neither. Nothing was run.")
    if positions is None:
        return None
    if not all(len(p) in (1, 2) for p in positions):
        raise BadRequest("goalState: each of positions is [line] or [line, column], e.g. [[12], [13, 5]]. "
                         "Nothing was run.")
    limits.check_positions(0, positions)
    return [(p[0], p[1] if len(p) > 1 else None) for p in positions]

