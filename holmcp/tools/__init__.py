"""holmcp's tool table: every tool's name, annotations, output schema and body, in the order agents see them.

The bodies, grouped by family (`proofs`, `lookups`, `control`), carry the
parameter names and the descriptions.  Names, parameter names and their
meanings are a contract with the agents that call them: change none of
them by a character.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.types import ToolAnnotations

from holmcp import schema
from holmcp.connection import Connection
from holmcp.tools.control import ControlTools
from holmcp.tools.lookups import LookupTools
from holmcp.tools.proofs import ProofTools
from holsrv.rpc import messages


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
    "holes": ASKS,
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
    "uses": ASKS,
    # Writes build products (.hol/objs, .hol/logs) in the script's directory; never the scripts.
    "holmake": _hints(read_only=False),
    # Only the server's copy of the text changes, and it gets the file's text back, unless `apply`
    # asks for a proved candidate to replace the line's tactic in the file.
    "try": _hints(read_only=False, destructive=True, idempotent=False),
    "goalDiff": ASKS,
    # Runs Holmake (build products, as holmake) and loads the built theory in the file's server.
    "verify": _hints(read_only=False),
    # Waiting changes nothing; a cancel stops the job's work (a holmake's build).
    "job": _hints(read_only=False, destructive=True, idempotent=False),
}
# Tools whose name is a Python keyword.
METHODS = {"try": "try_"}
# Every tool returns its reply struct as structured content (the shape
# `holctl --json` prints), but only these two publish an output schema: their
# answers have the fields a caller branches on.  The others' schemas cost an
# agent's context thousands of characters for fields the text already shows.
OUTPUT_SCHEMAS = {
    # With defer_after, a diagnostics may answer a job handle instead.
    "diagnostics": schema.or_handle(schema.compact_output(messages.DiagnosticsResult, {
        "verdict": "OK, FAILED, ERRORS, CHEATS, SUSPENDED, UNCHECKED, BLOCKED or INCOMPLETE",
        "complete": "false: still checking (INCOMPLETE); call again",
    }), messages.JobStarted),
    # With positions the answer is a GoalStatesResult: one entry per position, each with its own state.
    "goalState": schema.either(
        schema.compact_output(messages.GoalStateResult, {
            "state": "goals, proved_here, cheated, failed, not_in_proof, compiling, starting, blocked, looping "
                     "or unsupported",
        }),
        schema.compact_output(messages.GoalStatesResult),
    ),
}


def bodies(daemon: Connection) -> dict[str, Callable[..., Any]]:
    """Tool name -> the method that answers it, asking `daemon`."""
    families = (ProofTools(daemon), LookupTools(daemon), ControlTools(daemon))

    def body(name: str) -> Callable[..., Any]:
        method = METHODS.get(name, name)
        return next(getattr(family, method) for family in families if hasattr(family, method))

    return {name: body(name) for name in TOOLS}
