"""The MCP SDK's own cost: a stdio server whose one tool returns a prebuilt result.

The benchmark captures what holmcp answered to a cached `goalState` (its
text, its structured content and the output schema holmcp advertises) and
starts this server with it, so a call to it costs everything an MCP tool
call costs (stdio, JSON-RPC, argument validation, the client's check of
structured content against the schema) except holmcp's own work.

    python bench/mcpfloor.py RESULT_JSON
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent


def build(captured: dict[str, Any]) -> MCPServer:
    result = CallToolResult(
        content=[TextContent(type="text", text=captured["text"])],
        structured_content=captured["structured"],
    )

    async def goal_state(file: str, line: int, column: int | None = None) -> CallToolResult:
        """The prebuilt answer, whatever is asked."""
        return result

    tool = Tool.from_function(goal_state, name="goalState", structured_output=False)
    # As holmcp does: the schema is advertised, and the client checks structured content against it.
    tool.fn_metadata.output_schema = captured.get("output_schema")
    return MCPServer(name="floor", tools=[tool])


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        build(json.load(f)).run("stdio")


if __name__ == "__main__":
    main()
