"""holmcp: the holsrv daemon's questions as MCP tools, over stdio.

Stateless: each tool call sends one request to the daemon (starting it if
needed) on a connection holmcp keeps (`connection`), and returns the reply
twice: as the text holctl prints and as structured content (the reply
struct, `output`).  The tools themselves are in `tools`; this module makes
them MCP tools and serves them.  Killing holmcp loses nothing; the warm HOL
servers live in the daemon.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import ValidationError

from holmcp import arguments, resources, schema, tools
from holmcp.connection import Connection
from holmcp.output import error_text
from holsrv import __version__
from holsrv.errors import HolsrvError
from holsrv.rpc.aclient import AsyncClient

INSTRUCTIONS = """\
HOL4 proof scripts, checked by warm HOL servers that the holsrv daemon keeps. \
The loop: edit the file with your own tools, call diagnostics, then goalState at \
a line inside the failing proof, edit, repeat. INCOMPLETE means still checking: \
call diagnostics again. After Holmake, STALE means a fresh server is catching up; \
call restart only if told REBUILT. \
Lines and columns are 1-based; columns count characters. A failed proof is an \
answer; a tool error names its code and what to do."""

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
    tool.fn_metadata.output_schema = tools.OUTPUT_SCHEMAS.get(name)
    return tool


def build_server(socket: Path | None = None, base_dir: Path | None = None, autostart: bool = True) -> MCPServer:
    """An MCP server whose tools ask the daemon on `socket` (default: the user's)."""
    daemon = AsyncClient(socket, name="holmcp", autostart=autostart)
    answering = tools.bodies(Connection(daemon, base_dir or Path.cwd()))

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[dict]:
        try:
            yield {}
        finally:
            await daemon.aclose()

    server = MCPServer(
        name="holmcp",
        version=__version__,
        instructions=INSTRUCTIONS,
        tools=[_tool(answering[name], name, hints) for name, hints in tools.TOOLS.items()],
        extensions=[resources.Skills()],
        lifespan=lifespan,
    )
    server.add_prompt(resources.prompt())
    return server


def main() -> None:
    parser = argparse.ArgumentParser(prog="holmcp", description="MCP stdio server for HOL4 proof scripts.")
    parser.add_argument("--socket", type=Path, default=None, help="the daemon's socket (default: $HOLSRV_SOCKET)")
    parser.add_argument("--no-start", action="store_true", help="do not start a daemon if none is running")
    args = parser.parse_args()
    build_server(args.socket, Path.cwd(), autostart=not args.no_start).run("stdio")
