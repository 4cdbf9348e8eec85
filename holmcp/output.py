"""A tool's result as an agent reads it: the text holctl prints, the reply struct, and errors with their next step."""

from __future__ import annotations

import msgspec
from mcp.types import CallToolResult, TextContent

from holctl.render import render
from holsrv.errors import HolsrvError
from holsrv.rpc import messages

# Where an answer about the daemon's own text could leave an agent guessing:
# the step that works from an MCP host.  The daemon's message comes first.
NEXT_STEPS = {
    "servers_busy": "Call status to see which servers are busy, and stop (the stop tool) one you no longer "
    "need; or ask again later.",
    "server_starting": "Call again in a few seconds.",
    "server_timeout": "Call again; if it stays stuck, call restart for the file.",
    "server_stopped": "Call again.",
    "server_runaway": "Call again: a fresh server is answering; do not run the looping tactic again as it is.",
    "daemon_unreachable": "Call again; if it persists, the daemon's log says why.",
}


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
