"""holmcp: the holsrv daemon's questions as MCP tools, over stdio.

Stateless: every tool call connects to the daemon (starting it if needed),
sends one request and returns the reply twice, as structured content whose
schema is the reply struct's and as the text holctl prints.  Killing holmcp
loses nothing; the warm HOL servers live in the daemon.
"""

from __future__ import annotations

import argparse
import inspect
import os
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import anyio
import msgspec
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from holctl.render import render
from holsrv import __version__
from holsrv.errors import HolsrvError
from holsrv.rpc import client, messages

INSTRUCTIONS = """\
Tools for HOL4 proof scripts (*Script.sml), answered by warm HOL language servers
that the holsrv daemon keeps across sessions. Start with `diagnostics` after each
edit; use `goalState` inside a failing proof; `hover`, `definition`,
`workspaceSymbol` and `completion` to find theorems; `eval` to experiment.
Positions are 1-based lines and 1-based columns counted in characters."""

File = Annotated[
    str,
    Field(
        description="The HOL4 proof script (a ...Script.sml file): an absolute path, "
        "or a path relative to the directory holmcp was started in."
    ),
]
Line = Annotated[int, Field(ge=1, description="Line number, 1-based: the first line of the file is 1.")]
Col = Annotated[
    int,
    Field(
        ge=1,
        description="Column, 1-based, counting Unicode characters (∀, ⇒ and ‘ each count as one), not bytes.",
    ),
]


def _default(request_type: type[msgspec.Struct], field: str) -> Any:
    """A request field's wire default, so the schema an agent sees matches the daemon's."""
    return next(f.default for f in msgspec.structs.fields(request_type) if f.name == field)


class Tools:
    """The tool bodies: each builds one request and asks the daemon."""

    def __init__(self, socket: Path | None, base_dir: Path, autostart: bool) -> None:
        self._socket = socket
        self._base_dir = base_dir
        self._autostart = autostart

    def _path(self, file: str) -> str:
        return os.path.abspath(os.path.join(self._base_dir, os.path.expanduser(file)))

    async def diagnostics(
        self,
        file: File,
        wait: Annotated[
            float,
            Field(
                ge=0,
                description="Seconds to wait for compiling and proof checking to finish before answering "
                "with what is known so far. Nothing is cancelled when the wait runs out: call again "
                "to pick up where this call stopped.",
            ),
        ] = _default(messages.Diagnostics, "wait"),
    ) -> CallToolResult:
        """Compile a HOL4 script and check every proof in it; call it after every edit.

        Returns a verdict: OK only when Holmake would build the file: every
        proof proved, nothing cheated, no errors (HOL's parse recoveries,
        which it reports as warnings, count as errors); otherwise FAILED (a
        proof failed), ERRORS (the script does not compile or does not
        parse), CHEATS (a proof uses cheat, CHEAT_TAC or mk_thm), SUSPENDED
        (subgoals left without a proved Resume block), UNCHECKED (HOL did not
        check some proofs; each says why), BLOCKED (a theory it needs could not
        be loaded) or INCOMPLETE (still checking when the wait ran out; a
        proof far slower than the rest or probably looping is named: edit it).
        Also: a tally of proofs (proved, failed, cheated, parse_error,
        checking, …), each proof that is not proved (line, name, status,
        reason), and compiler messages at 1-based line:col; a failure still
        on a theorem's name is marked provisional (HOL moves it to the
        failing tactic a moment later).
        The file is re-read from disk on each call. A failed proof is an
        answer, not a tool error.
        Next: for a failed proof, call goalState at a line inside its
        Proof...QED block; for INCOMPLETE, call again (and heed any SLOW or
        PROBABLY LOOPING warning: edit that proof; restart would not help);
        for BLOCKED, fix the dependency, then retryCompile.
        """
        return await self._ask(messages.Diagnostics(file=self._path(file), wait=wait))

    async def goalState(
        self,
        file: File,
        line: Line,
        col: Col,
        wait: Annotated[
            float,
            Field(
                ge=0,
                description="Seconds to wait for the script to compile up to this position. "
                "If it runs out, the answer says the file is still compiling: call again.",
            ),
        ] = _default(messages.GoalState, "wait"),
    ) -> CallToolResult:
        """Show the goals at a position inside a Proof...QED block.

        Returns the theorem, the tactic step reached, every remaining goal with
        its numbered assumptions above a rule and the goal below it, and the
        error if the tactic there fails. Use it to see what is left to prove
        before writing the next tactic, or why a tactic fails; use diagnostics
        for a verdict on the whole file.
        If the position is not inside a proof the answer says so; if the file
        is still compiling the answer is marked provisional or compiling: call
        again. "no goals" means the proof is finished at that point.
        """
        return await self._ask(messages.GoalState(file=self._path(file), line=line, col=col, wait=wait))

    async def hover(self, file: File, line: Line, col: Col) -> CallToolResult:
        """Show what HOL knows about the name at a position: a term's type, a
        constant's type, or a theorem's statement. For a theorem of this
        file whose proof is not proved (failed, cheated, unchecked, still
        checking) it also says so: its statement is then not a theorem yet.

        Use it to check a theorem's exact statement before using it in a
        tactic. Use definition to find where a name is defined, and
        workspaceSymbol to search for a name you do not have in the file.
        """
        return await self._ask(messages.Hover(file=self._path(file), line=line, col=col))

    async def definition(self, file: File, line: Line, col: Col) -> CallToolResult:
        """Find where the name at a position is defined.

        Returns path:line:col for each definition site, in this script or in
        another script or HOL's own sources. Read the file there to see the
        definition; use hover when the statement alone is enough.
        """
        return await self._ask(messages.Definition(file=self._path(file), line=line, col=col))

    async def references(self, file: File, line: Line, col: Col) -> CallToolResult:
        """Find the places that use the name at a position.

        Returns path:line:col for each use. Some HOL servers cannot find
        references; the answer then says so, and searching the files for the
        name is the fallback.
        """
        return await self._ask(messages.References(file=self._path(file), line=line, col=col))

    async def completion(self, file: File, line: Line, col: Col) -> CallToolResult:
        """List completions for the partial name just before a position:
        theorems, constants, tactics and other names in scope.

        Returns up to 50 as `label (kind) detail` and a count of the rest. Use
        it when you know how a name starts; use workspaceSymbol to search by
        any part of a name.
        """
        return await self._ask(messages.Completion(file=self._path(file), line=line, col=col))

    async def documentSymbol(self, file: File) -> CallToolResult:
        """Outline a HOL4 script: its theorems, definitions and other top-level
        declarations, with their 1-based lines, nested by depth.

        Cheaper than reading the whole file when you need a theorem's line,
        e.g. to call goalState inside its proof.
        """
        return await self._ask(messages.DocumentSymbol(file=self._path(file)))

    async def workspaceSymbol(
        self,
        file: File,
        query: Annotated[str, Field(description="Part of a name to search for, e.g. `ADD_COMM` or `LENGTH_`.")],
    ) -> CallToolResult:
        """Search the theorems, definitions and constants visible from a script
        (its own and its ancestor theories') by name.

        Returns name, kind, theory and where each is defined. Use it to find a
        lemma you need; then hover over it (or eval `DB.find`) for its exact
        statement.
        """
        return await self._ask(messages.WorkspaceSymbol(file=self._path(file), query=query))

    async def eval(
        self,
        file: File,
        code: Annotated[
            str,
            Field(
                description="SML to evaluate, ending with a semicolon, e.g. "
                "`EVAL ``LENGTH [1;2;3]``;` or `DB.find \"ADD_COMM\";`."
            ),
        ],
        timeout: Annotated[
            float,
            Field(ge=0, description="Seconds the code may run; past that it is cancelled and the answer says so."),
        ] = _default(messages.Eval, "timeout"),
    ) -> CallToolResult:
        """Evaluate SML in the HOL server of a script, where the script's
        ancestor theories are loaded (it does not see the script's own
        declarations).

        Returns what PolyML.print printed, the errors, and what the server
        wrote to stderr meanwhile (plain `print` goes there). Bindings such as
        `val x = ...;` are not echoed: wrap a value in PolyML.print to see it.
        Use it to experiment: EVAL or type-check a term, search with DB.find or
        DB.match, try a tactic with prove. It never changes the file. If it
        times out it is cancelled and the answer says so; use restart if the
        server stays stuck.
        """
        return await self._ask(messages.Eval(file=self._path(file), code=code, timeout=timeout))

    async def retryCompile(self, file: File) -> CallToolResult:
        """Compile a script again after fixing a theory it depends on (a
        diagnostics verdict of BLOCKED).

        Edits to the script itself need no retry: diagnostics re-reads the
        file on every call. Returns what was done; then call diagnostics.
        """
        return await self._ask(messages.RetryCompile(file=self._path(file)))

    async def restart(
        self,
        file: File,
        max_heap_mb: Annotated[
            int | None,
            Field(
                ge=0,
                description="Heap cap in MB for the new HOL server; 0 for no cap. Leave out to keep the current cap.",
            ),
        ] = None,
    ) -> CallToolResult:
        """Stop the HOL server for a script and start a fresh one, optionally
        with a different heap cap.

        Use it when the server is stuck (a looping proof or eval), died, ran
        out of memory (raise max_heap_mb), or after rebuilding the script's
        ancestor theories with Holmake (a running server never reloads them).
        The new server re-checks the whole file, which takes time, so do not
        use it routinely. For a file that no longer exists it only stops the
        server, freeing its place.
        """
        return await self._ask(messages.Restart(file=self._path(file), max_heap_mb=max_heap_mb))

    async def status(self) -> CallToolResult:
        """Show the holsrv daemon and every HOL server it runs: file, pid,
        state, uptime, idle time, memory, heap cap, proof tally, waiting calls
        and clients.

        Use it to see which scripts are warm, or to find out why calls are slow
        or failing with servers_busy before using restart.
        """
        return await self._ask(messages.Status())

    async def _ask(self, request: messages.Request) -> CallToolResult:
        # The client helper blocks; abandoning its thread on cancel lets a
        # cancelled tool call return at once while the socket timeout (sized
        # from the daemon's limits) bounds it.
        reply = await anyio.to_thread.run_sync(partial(self._call, request), abandon_on_cancel=True)
        return CallToolResult(
            content=[TextContent(type="text", text=render(reply))],
            structured_content=msgspec.to_builtins(reply),
        )

    def _call(self, request: messages.Request) -> messages.Result:
        try:
            with client.connect(self._socket, name="holmcp", autostart=self._autostart) as conn:
                return conn.call(request)
        except HolsrvError as err:
            raise ToolError("\n".join(filter(None, [f"{err.code}: {err}", err.detail]))) from None
        except OSError as err:
            raise ToolError(f"daemon_unreachable: {err}") from None


# Tool name -> the reply struct its structured content follows.
REPLY_TYPES: dict[str, type[msgspec.Struct]] = {
    "diagnostics": messages.DiagnosticsResult,
    "goalState": messages.GoalStateResult,
    "hover": messages.HoverResult,
    "definition": messages.DefinitionResult,
    "references": messages.ReferencesResult,
    "completion": messages.CompletionResult,
    "documentSymbol": messages.DocumentSymbolResult,
    "workspaceSymbol": messages.WorkspaceSymbolResult,
    "eval": messages.EvalResult,
    "retryCompile": messages.RetryCompileResult,
    "restart": messages.RestartResult,
    "status": messages.StatusResult,
}
_CHANGES_STATE = {"retryCompile", "restart"}


def output_schema(reply_type: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON schema of a reply struct, with the root inlined: MCP wants an object at the top."""
    schema = msgspec.json.schema(reply_type)
    defs = schema["$defs"]
    root = defs.pop(reply_type.__name__)
    return {**root, "$defs": defs} if defs else root


def _description(doc: str) -> str:
    """A docstring as tool copy: paragraphs kept, the source's line wrapping dropped."""
    return "\n\n".join(" ".join(p.split("\n")) for p in inspect.cleandoc(doc).split("\n\n"))


def _tool(tools: Tools, name: str, reply_type: type[msgspec.Struct]) -> Tool:
    fn = getattr(tools, name)
    read_only = name not in _CHANGES_STATE
    tool = Tool.from_function(
        fn,
        name=name,
        description=_description(fn.__doc__),
        annotations=ToolAnnotations(read_only_hint=read_only, destructive_hint=False, open_world_hint=False),
        structured_output=False,
    )
    # The reply struct is not a pydantic type, so the schema is published by
    # hand; the SDK advertises it and the client checks structured content.
    tool.fn_metadata.output_schema = output_schema(reply_type)
    return tool


def build_server(socket: Path | None = None, base_dir: Path | None = None, autostart: bool = True) -> MCPServer:
    """An MCP server whose tools ask the daemon on `socket` (default: the user's)."""
    tools = Tools(socket, base_dir or Path.cwd(), autostart)
    return MCPServer(
        name="holmcp",
        version=__version__,
        instructions=INSTRUCTIONS,
        tools=[_tool(tools, name, reply_type) for name, reply_type in REPLY_TYPES.items()],
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="holmcp", description="MCP stdio server for HOL4 proof scripts.")
    parser.add_argument("--socket", type=Path, default=None, help="the daemon's socket (default: $HOLSRV_SOCKET)")
    parser.add_argument("--no-start", action="store_true", help="do not start a daemon if none is running")
    args = parser.parse_args()
    build_server(args.socket, Path.cwd(), autostart=not args.no_start).run("stdio")
