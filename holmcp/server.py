"""holmcp: the holsrv daemon's questions as MCP tools, over stdio.

Stateless: each tool call sends one request to the daemon (starting it if
needed) on a connection holmcp keeps (`holsrv.rpc.aclient`), and returns
the reply twice: as the text holctl prints and as structured content (the
reply struct).  Killing holmcp loses nothing; the warm HOL servers live in
the daemon.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any

import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from holctl.render import render
from holmcp import arguments, schema
from holmcp.progress import ProgressRelay
from holsrv import __version__
from holsrv.errors import HolsrvError
from holsrv.rpc import messages
from holsrv.rpc.aclient import AsyncClient

INSTRUCTIONS = """\
HOL4 proof scripts, checked by warm HOL servers that the holsrv daemon keeps. \
The loop: edit the file with your own tools, call diagnostics, then goalState at \
a line inside the failing proof, edit, repeat. INCOMPLETE means still checking: \
call diagnostics again. After Holmake, STALE means a fresh server is catching up; \
call restart only if told REBUILT. \
Lines and columns are 1-based; columns count characters. A failed proof is an \
answer; a tool error names its code and what to do."""

File = Annotated[
    str,
    Field(description="Script path or file:// URI (relative to holmcp's start directory)."),
]
Line = Annotated[int, Field(ge=1, description="1-based line.")]
Column = Annotated[int, Field(ge=1, description="1-based column, counting characters.")]
LookupWait = Annotated[
    float | None,
    Field(ge=0, description="Seconds to wait for start and compile; 0: answer now. Default 25."),
]

ExpectHash = Annotated[
    str, Field(description="Hash from an earlier answer; the answer says if the file changed since.")
]

# Where an answer about the daemon's own text could leave an agent guessing:
# the step that works from an MCP host.  The daemon's message comes first.
NEXT_STEPS = {
    "servers_busy": "Call status to see which servers are busy, and stop (the stop tool) one you no longer "
    "need; or ask again later.",
    "server_starting": "Call again in a few seconds.",
    "server_timeout": "Call again; if it stays stuck, call restart for the file.",
    "server_stopped": "Call again.",
    "daemon_unreachable": "Call again; if it persists, the daemon's log says why.",
}


def _default(request_type: type[msgspec.Struct], field: str) -> Any:
    """A request field's wire default, so the schema an agent sees matches the daemon's."""
    return next(f.default for f in msgspec.structs.fields(request_type) if f.name == field)


class Tools:
    """The tool bodies: each builds one request and asks the daemon."""

    def __init__(self, daemon: AsyncClient, base_dir: Path) -> None:
        self.daemon = daemon
        self._base_dir = base_dir

    def _path(self, file: str) -> str:
        path = arguments.file_path(file)
        return os.path.abspath(os.path.join(self._base_dir, os.path.expanduser(path)))

    async def diagnostics(
        self,
        ctx: Context,
        file: File,
        wait: Annotated[
            float,
            Field(ge=0, description="Seconds to wait for compiling and checking; then INCOMPLETE with what "
                  "is known (nothing is cancelled)."),
        ] = _default(messages.Diagnostics, "wait"),
        expect_hash: ExpectHash = "",
    ) -> CallToolResult:
        """Check a HOL4 script: compile it and replay every proof; call it after each edit (it re-reads
        the file). Verdict: OK only if Holmake would build it; else FAILED (a proof fails), ERRORS (does
        not compile or parse), CHEATS (cheat, CHEAT_TAC, mk_thm), SUSPENDED, UNCHECKED, BLOCKED (an
        ancestor will not load: fix it, then retryCompile) or INCOMPLETE (wait ran out: call again; a
        SLOW or LOOPING proof is named: edit it). Lists unproved proofs and messages at line:column.
        STALE: a rebuilt ancestor, a fresh server is catching up; REBUILT: call restart. Next: goalState
        inside the failing proof.
        """
        request = messages.Diagnostics(file=self._path(file), wait=wait, progress=True, expect_hash=expect_hash)
        return await self._ask(ctx, request)

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
        ] = _default(messages.GoalState, "wait"),
        expect_hash: ExpectHash = "",
    ) -> CallToolResult:
        """Show the goals in a proof (Proof...QED): at a column, before the tactic there (on the QED
        line: what is left); without one, before the line's first tactic and after its last, to see
        what the line did. `state`: goals, proved_here (none left), failed (the tactic fails: error,
        range), not_in_proof, compiling or starting (call again), blocked.
        """
        request = messages.GoalState(file=self._path(file), line=line, column=column, wait=wait, progress=True,
                                     expect_hash=expect_hash)
        return await self._ask(ctx, request)

    async def hover(
        self, ctx: Context, file: File, line: Line, column: Column, wait: LookupWait = None
    ) -> CallToolResult:
        """The type of the term or constant at a position, or the theorem's statement (and, for this
        file's theorems, whether its proof is proved). Check a lemma's exact form before using it.
        """
        return await self._ask(ctx, messages.Hover(file=self._path(file), line=line, column=column, wait=wait))

    async def definition(
        self, ctx: Context, file: File, line: Line, column: Column, wait: LookupWait = None
    ) -> CallToolResult:
        """Where the name at a position is defined: path:line:column, here, in another script or in
        HOL's sources.
        """
        request = messages.Definition(file=self._path(file), line=line, column=column, wait=wait)
        return await self._ask(ctx, request)

    async def references(
        self, ctx: Context, file: File, line: Line, column: Column, wait: LookupWait = None
    ) -> CallToolResult:
        """Where the name at a position is used, as path:line:column. Some HOL servers cannot say; the
        answer then tells you to search the files.
        """
        request = messages.References(file=self._path(file), line=line, column=column, wait=wait)
        return await self._ask(ctx, request)

    async def completion(
        self, ctx: Context, file: File, line: Line, column: Column, wait: LookupWait = None
    ) -> CallToolResult:
        """Names in scope that complete the partial name just before a position: up to 50, and how
        many more. To search by any part of a name, use workspaceSymbol.
        """
        request = messages.Completion(file=self._path(file), line=line, column=column, wait=wait)
        return await self._ask(ctx, request)

    async def documentSymbol(self, ctx: Context, file: File, wait: LookupWait = None) -> CallToolResult:
        """Outline a script: its theorems, definitions and other declarations with their lines (up to
        500, and how many more): a proof's line without reading the file.
        """
        return await self._ask(ctx, messages.DocumentSymbol(file=self._path(file), wait=wait))

    async def workspaceSymbol(
        self,
        ctx: Context,
        file: File,
        query: Annotated[
            str, Field(description="Part of a name, 2 characters or more, any case: e.g. ADD_COMM.")
        ],
        limit: Annotated[int, Field(ge=1, le=200, description="Matches per page.")] = _default(
            messages.WorkspaceSymbol, "limit"
        ),
        page: Annotated[int, Field(ge=1, description="1-based page.")] = 1,
        wait: LookupWait = None,
    ) -> CallToolResult:
        """Find the theorems, definitions and constants a script can see (its own and its ancestors')
        by part of their name: `name: ⊢ statement`, theory and place, a page at a time with how many
        more.
        """
        request = messages.WorkspaceSymbol(
            file=self._path(file), query=query, limit=limit, page=page, wait=wait
        )
        return await self._ask(ctx, request)

    async def eval(
        self,
        ctx: Context,
        file: File,
        code: Annotated[str, Field(description="SML declarations or expressions, each ending with `;`.")],
        timeout: Annotated[
            float, Field(ge=0, description="Seconds the code may run before it is interrupted.")
        ] = _default(messages.Eval, "timeout"),
    ) -> CallToolResult:
        """Run SML in the script's HOL server, as the user (not read-only), after `open HolKernel Parse
        boolLib bossLib` and the script's ancestor theories (not its own theorems); a last expression's
        value is printed. No binding lasts to the next call; HOL's global state (libraries loaded,
        flags, definitions) does. Returns output, errors (line:column in your code), stderr; warnings
        are not errors. E.g. EVAL a term, DB.find, try prove.
        """
        return await self._ask(ctx, messages.Eval(file=self._path(file), code=code, timeout=timeout))

    async def retryCompile(self, ctx: Context, file: File) -> CallToolResult:
        """Compile a script again after fixing or building a theory it needs (verdict BLOCKED); edits
        to the script need none. Then call diagnostics.
        """
        return await self._ask(ctx, messages.RetryCompile(file=self._path(file)))

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
        return await self._ask(ctx, messages.Restart(file=self._path(file), max_heap_mb=max_heap_mb))

    async def stop(self, ctx: Context, file: File) -> CallToolResult:
        """Stop the script's HOL server, freeing its memory and its place (for servers_busy); checks in
        flight are lost. The next call about the file starts a new one.
        """
        return await self._ask(ctx, messages.Stop(file=self._path(file)))

    async def status(self, ctx: Context) -> CallToolResult:
        """The daemon, its settings, and each HOL server: file, pid, state, memory, proofs, waiting
        calls. Use it when calls are slow or servers_busy, to choose one to stop.
        """
        return await self._ask(ctx, messages.Status())

    async def search(
        self,
        ctx: Context,
        file: File,
        query: Annotated[str, Field(description='E.g. \'arithmetic\' "ADD" x + y = y + x')],
        limit: Annotated[int, Field(ge=1, le=200, description="Matches per page.")] = _default(
            messages.Search, "limit"
        ),
        page: Annotated[int, Field(ge=1, description="1-based page.")] = 1,
        expect_hash: ExpectHash = "",
    ) -> CallToolResult:
        """Search the theorems the script's HOL has loaded: "name fragment" in double quotes, 'theory'
        in single quotes, anything else a term pattern (variables match any term); each narrows. Gives
        name, kind, theory, statement, place, a page at a time; a theorem re-exported with the same
        statement is one hit, its other theories in also_in. An empty answer says why and what to relax.
        """
        request = messages.Search(file=self._path(file), query=query, limit=limit, page=page, expect_hash=expect_hash)
        return await self._ask(ctx, request)

    async def holmake(
        self,
        ctx: Context,
        file: File,
        target: Annotated[str, Field(description="Holmake target, e.g. fooTheory.uo; omit for the default.")] = "",
    ) -> CallToolResult:
        """Run Holmake in the script's directory with the servers' HOL, to build the theories it
        depends on. Returns success (and theories built with a cheat), or the failing theory with its
        log's tail, and the open files it unblocked (retried by itself). One run per directory: a
        second call joins it. Then diagnostics.
        """
        return await self._ask(ctx, messages.Holmake(file=self._path(file), target=target, progress=True))

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
    ) -> CallToolResult:
        """Try tactics in place of a proof line's tactic, file untouched. Per candidate: state (proved,
        goals, failed, timed_out…), goals or error, proof status, time, goal diff. At most 8.
        """
        request = messages.Try(
            file=self._path(file), line=line, column=column, tactics=tactics, timeout=timeout, progress=True
        )
        return await self._ask(ctx, request)

    async def goalDiff(
        self, ctx: Context, file: File, line1: Line, line2: Line,
        column1: Annotated[int | None, Field(ge=1, description="Omit: before line1.")] = None,
        column2: Annotated[int | None, Field(ge=1, description="Omit: after line2.")] = None,
    ) -> CallToolResult:
        """Goals closed and added, hypotheses added and removed, conclusions rewritten between two
        positions of one proof.
        """
        request = messages.GoalDiff(file=self._path(file), line1=line1, line2=line2, column1=column1, column2=column2)
        return await self._ask(ctx, request)

    async def _ask(self, ctx: Context, request: messages.Request) -> CallToolResult:
        relay = ProgressRelay(ctx.report_progress)
        try:
            async with relay.heartbeat():
                result, welcome = await self.daemon.call(request, on_progress=relay.frame)
        except HolsrvError as err:
            raise ToolError(error_text(err)) from None
        return answer(result, welcome.settings_warnings)


def answer(result: messages.Result, settings_warnings: list[str]) -> CallToolResult:
    """The reply as text and structured content, with the daemon's settings warnings once in each."""
    text = render(result)
    structured = msgspec.to_builtins(result)
    if settings_warnings:
        text += "".join(f"\nwarning: {w}" for w in settings_warnings)
        own = structured.get("warnings", [])
        structured["warnings"] = own + [w for w in settings_warnings if w not in own]
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def error_text(err: HolsrvError) -> str:
    """`code: message`, the detail, and the next step where the message may not give one for MCP."""
    lines = [f"{err.code}: {err}", *("    " + line for line in err.detail.splitlines())]
    if err.code in NEXT_STEPS:
        lines.append(f"Next: {NEXT_STEPS[err.code]}")
    return "\n".join(lines)


class HolTool(Tool):
    """A tool that refuses unknown arguments and reports bad ones in a line an agent can act on."""

    async def run(self, arguments_: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        accepted = list(self.parameters["properties"])
        try:
            arguments.refuse_unknown(self.name, arguments_, accepted)
            try:
                validated = self.fn_metadata.validate_arguments(arguments_)
            except ValidationError as err:
                raise arguments.invalid(self.name, err, accepted) from None
        except HolsrvError as err:
            raise ToolError(error_text(err)) from None
        assert self.context_kwarg is not None
        try:
            result = await self.fn_metadata.call_fn(self.fn, True, validated, {self.context_kwarg: context})
        except ToolError:
            raise
        except Exception as exc:
            # A bug: its text stays in holmcp's log, as the SDK does for its tools.
            raise UnexpectedToolError(f"Error executing tool {self.name}") from exc
        return self.fn_metadata.convert_result(result) if convert_result else result


def _hints(read_only: bool, destructive: bool = False, idempotent: bool = True, open_world: bool = False):
    # destructiveHint means something only when readOnlyHint is false (MCP spec): not sent on the others.
    return ToolAnnotations(
        read_only_hint=read_only, destructive_hint=None if read_only else destructive,
        idempotent_hint=idempotent, open_world_hint=open_world,
    )


# Questions: nothing changes but which HOL servers run and what they have checked.
ASKS = _hints(read_only=True)
# Tool name -> its annotations.
TOOLS: dict[str, ToolAnnotations] = {
    "diagnostics": ASKS,
    "goalState": ASKS,
    "hover": ASKS,
    "definition": ASKS,
    "references": ASKS,
    "completion": ASKS,
    "documentSymbol": ASKS,
    "workspaceSymbol": ASKS,
    # Arbitrary SML as the user: it may write files, and the HOL state it sets outlives the call.
    "eval": _hints(read_only=False, destructive=True, idempotent=False, open_world=True),
    # Re-queues a blocked file's compile; a second call does no more.
    "retryCompile": _hints(read_only=False),
    # Both end the checks in flight; a second restart throws away the first one's work.
    "restart": _hints(read_only=False, destructive=True, idempotent=False),
    "stop": _hints(read_only=False, destructive=True),
    "status": ASKS,
    "search": ASKS,
    # Writes build products (.hol/objs, .hol/logs) in the script's directory; never the scripts.
    "holmake": _hints(read_only=False),
    # Only the server's copy of the text changes, and it gets the file's text back.
    "try": ASKS,
    "goalDiff": ASKS,
}
# Tools whose name is a Python keyword.
METHODS = {"try": "try_"}
# Every tool returns its reply struct as structured content (the shape
# `holctl --json` prints), but only these two publish an output schema: their
# answers have the fields a caller branches on.  The others' schemas cost an
# agent's context thousands of characters for fields the text already shows.
OUTPUT_SCHEMAS = {
    "diagnostics": schema.compact_output(messages.DiagnosticsResult, {
        "verdict": "OK, FAILED, ERRORS, CHEATS, SUSPENDED, UNCHECKED, BLOCKED or INCOMPLETE",
        "complete": "false: still checking (INCOMPLETE); call again",
    }),
    "goalState": schema.compact_output(messages.GoalStateResult, {
        "state": "goals, proved_here, failed, not_in_proof, compiling, starting or blocked",
    }),
}


def _description(doc: str | None) -> str:
    """A docstring as tool copy: paragraphs kept, the source's line wrapping dropped."""
    return "\n\n".join(" ".join(p.split("\n")) for p in inspect.cleandoc(doc or "").split("\n\n"))


def _tool(fn: Callable[..., Any], name: str, hints: ToolAnnotations) -> Tool:
    tool = HolTool.from_function(
        fn, name=name, description=_description(fn.__doc__), annotations=hints, structured_output=False
    )
    tool.parameters = schema.compact_input(tool.parameters)
    # The reply struct is not a pydantic type, so the schema is set by hand;
    # the SDK advertises it and its client checks structured content with it.
    tool.fn_metadata.output_schema = OUTPUT_SCHEMAS.get(name)
    return tool


def build_server(socket: Path | None = None, base_dir: Path | None = None, autostart: bool = True) -> MCPServer:
    """An MCP server whose tools ask the daemon on `socket` (default: the user's)."""
    daemon = AsyncClient(socket, name="holmcp", autostart=autostart)
    tools = Tools(daemon, base_dir or Path.cwd())

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[dict]:
        try:
            yield {}
        finally:
            await daemon.aclose()

    return MCPServer(
        name="holmcp",
        version=__version__,
        instructions=INSTRUCTIONS,
        tools=[_tool(getattr(tools, METHODS.get(name, name)), name, hints) for name, hints in TOOLS.items()],
        lifespan=lifespan,
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="holmcp", description="MCP stdio server for HOL4 proof scripts.")
    parser.add_argument("--socket", type=Path, default=None, help="the daemon's socket (default: $HOLSRV_SOCKET)")
    parser.add_argument("--no-start", action="store_true", help="do not start a daemon if none is running")
    args = parser.parse_args()
    build_server(args.socket, Path.cwd(), autostart=not args.no_start).run("stdio")
