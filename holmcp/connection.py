"""holmcp's connection to the daemon: a tool's request asked, its progress relayed, its reply rendered.

One connection (`holsrv.rpc.aclient.AsyncClient`) serves every tool call;
the daemon is started if none runs.  Files are named to the daemon by
absolute path, resolved against holmcp's start directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult

from holmcp import arguments, output
from holmcp.progress import ProgressRelay
from holsrv.errors import DaemonUnreachable, HolsrvError
from holsrv.rpc import messages
from holsrv.rpc.aclient import AsyncClient


class Connection:
    """Asks the daemon one request per tool call."""

    def __init__(self, client: AsyncClient, base_dir: Path) -> None:
        self.client = client
        self._base_dir = base_dir

    def path(self, file: str) -> str:
        """A tool's `file` argument as the daemon takes it: an absolute path."""
        path = arguments.file_path(file)
        return os.path.abspath(os.path.join(self._base_dir, os.path.expanduser(path)))

    async def ask(self, ctx: Context, request: messages.Request) -> CallToolResult:
        """The daemon's reply as the tool's result; its error as a `ToolError` an agent can act on."""
        relay = ProgressRelay(ctx.report_progress)
        try:
            async with relay.heartbeat():
                result, welcome = await self.client.call(request, on_progress=relay.frame)
        except HolsrvError as err:
            raise ToolError(output.error_text(err)) from None
        except OSError as err:
            # Making the socket directory or the start's lock file can fail before any
            # daemon is involved (as in holctl): still "cannot reach the daemon", with why.
            raise ToolError(output.error_text(DaemonUnreachable(f"cannot reach or start the daemon: {err}"))) from None
        return output.answer(result, welcome.settings_warnings)
