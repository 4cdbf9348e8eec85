"""The tools that act on a file's HOL server or the daemon: eval, retry, restart, stop, status, Holmake.

Names, parameter names and descriptions are a contract with the agents that call them:
change none of them by a character.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from holmcp.connection import Connection
from holmcp.tools.params import DeferAfter, File, default
from holsrv.rpc import messages


class ControlTools:
    """Each builds one request and asks the daemon."""

    def __init__(self, daemon: Connection) -> None:
        self.daemon = daemon

    async def eval(
        self,
        ctx: Context,
        file: File,
        code: Annotated[str, Field(description="SML declarations or expressions, each ending with `;`.")],
        timeout: Annotated[
            float, Field(ge=0, description="Seconds the code may run before it is interrupted.")
        ] = default(messages.Eval, "timeout"),
    ) -> CallToolResult:
        """Run SML in the script's HOL server, as the user (not read-only), after `open HolKernel Parse
        boolLib bossLib` and the script's ancestor theories (not its own theorems); only the last
        expression's value is printed (PolyML.print others). No binding lasts to the next call; HOL's
        global state (theories loaded, flags, grammar, definitions) does, for every agent on this file,
        until its server restarts. Returns output, errors (line:column in your code), stderr; warnings
        are not errors. E.g. EVAL a term, DB.find, try prove.
        """
        return await self.daemon.ask(ctx, messages.Eval(file=self.daemon.path(file), code=code, timeout=timeout))

    async def retryCompile(self, ctx: Context, file: File) -> CallToolResult:
        """Compile a script again after fixing or building a theory it needs (verdict BLOCKED); edits
        to the script need none. Then call diagnostics.
        """
        return await self.daemon.ask(ctx, messages.RetryCompile(file=self.daemon.path(file)))

    async def restart(
        self,
        ctx: Context,
        file: File,
        max_heap_mb: Annotated[
            int | None, Field(ge=0, description="Heap cap in MB for the new server; 0: none. Default: keep it.")
        ] = None,
    ) -> CallToolResult:
        """Replace the script's HOL server with a new one, which checks the file from scratch (checks
        in flight are lost): after rebuilding an ancestor theory (a server never reloads one), or when
        it is stuck or out of memory (raise max_heap_mb). Not routinely.
        """
        return await self.daemon.ask(ctx, messages.Restart(file=self.daemon.path(file), max_heap_mb=max_heap_mb))

    async def stop(self, ctx: Context, file: File) -> CallToolResult:
        """Stop the script's HOL server, freeing its memory and its place (for servers_busy); checks in
        flight are lost. The next call about the file starts a new one.
        """
        return await self.daemon.ask(ctx, messages.Stop(file=self.daemon.path(file)))

    async def status(self, ctx: Context) -> CallToolResult:
        """The daemon, its settings, and each HOL server: file, pid, state, memory, proofs, waiting
        calls. Use it when calls are slow or servers_busy, to choose one to stop.
        """
        return await self.daemon.ask(ctx, messages.Status())

    async def holmake(
        self,
        ctx: Context,
        file: File,
        target: Annotated[str, Field(description="Holmake target, e.g. fooTheory.uo; omit for the default.")] = "",
        defer_after: DeferAfter = None,
    ) -> CallToolResult:
        """Run Holmake in the script's directory with the servers' HOL, to build the theories it
        depends on. Returns success (and theories built with a cheat), or the failing theory with its
        log's tail, and the open files it unblocked (retried by itself). One run per directory: a
        second call joins it. Then diagnostics.
        """
        request = messages.Holmake(file=self.daemon.path(file), target=target, progress=True, defer_after=defer_after)
        return await self.daemon.ask(ctx, request)

    async def job(
        self,
        ctx: Context,
        id: Annotated[str, Field(description="From a defer_after call's answer.")],
        wait: Annotated[
            float, Field(ge=0, description="Seconds to wait for the answer.")
        ] = default(messages.Job, "wait"),
        cancel: Annotated[bool, Field(description="Stop the job instead.")] = False,
    ) -> CallToolResult:
        """The answer of a diagnostics, try or holmake that outran defer_after, or that it still runs.
        cancel: try restores the server's text, holmake is killed.
        """
        return await self.daemon.ask(ctx, messages.Job(id=id, wait=wait, cancel=cancel))
