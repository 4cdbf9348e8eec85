"""Plain text for every reply the daemon sends, written for an agent's context window.

holctl prints it and holmcp returns it as a tool's text content, so it must
stay importable with only the standard library and msgspec.  Every answer
about a file ends with a freshness line, `(about file content 0123456789ab)`:
the start of the hash of the bytes it describes, so a reader can tell an
answer about an older text from one about the current text.
"""

from __future__ import annotations

from typing import assert_never

from holctl.render.common import _footer, _freshness, _indented, _location, _noted, _server_lines
from holctl.render.diagnostics import _diagnostics, tally_line
from holctl.render.goals import _diff, _goal_state, _goal_states, _goals, _holes, _try
from holctl.render.lookups import _completion, _document_symbols, _references, _search, _uses, _workspace_symbols
from holctl.render.output import _eval, _holmake, _verify
from holctl.render.status import _status
from holsrv.rpc.messages import (
    CompletionResult,
    DefinitionResult,
    DiagnosticsResult,
    DocumentSymbolResult,
    ErrorReply,
    EvalResult,
    GoalDiffResult,
    GoalStateResult,
    GoalStatesResult,
    HolesResult,
    HolmakeResult,
    HoverResult,
    JobStarted,
    JobState,
    LogsResult,
    MetricsResult,
    Progress,
    ReferencesResult,
    Reply,
    RestartDaemonResult,
    RestartResult,
    Result,
    RetryCompileResult,
    SearchResult,
    ShutdownResult,
    StatusResult,
    StopResult,
    TryResult,
    UsesResult,
    VerifyResult,
    Welcome,
    WorkspaceSymbolResult,
)

__all__ = ["render", "tally_line"]


def render(reply: Reply) -> str:
    """The text a user or a model reads for `reply`."""
    match reply:
        case Welcome():
            lines = [f"holsrv {reply.daemon_version} (protocol {reply.protocol}, pid {reply.pid})"]
        case ErrorReply():
            lines = [f"{reply.code}: {reply.message}", *_indented(reply.detail)]
        case Progress():
            lines = [_progress(reply)]
        case _:
            lines = _result_lines(reply)
    return "\n".join(lines)


def _result_lines(reply: Result) -> list[str]:
    """Every answer to a request; exhaustive over `Result`, so a new one nobody renders is a type error."""
    match reply:
        case DiagnosticsResult():
            lines = _diagnostics(reply)
        case GoalStateResult():
            lines = _goal_state(reply)
        case GoalStatesResult():
            lines = _goal_states(reply)
        case HoverResult():
            status = [f"proof status: {reply.proof_status}"] if reply.proof_status else []
            said = [reply.text, *_noted(reply.message)] if reply.text else [reply.message or "nothing to show here"]
            lines = [*said, *status, *_noted(reply.note),
                     *_footer(reply.content_hash, reply.server)]
        case DefinitionResult():
            found = [_location(t) for t in reply.targets]
            found = [*found, *_noted(reply.message)] if found else [reply.message or "no definition found"]
            lines = [*found, *_noted(reply.note), *_footer(reply.content_hash, reply.server)]
        case ReferencesResult():
            lines = [*_references(reply), *_footer(reply.content_hash, reply.server)]
        case CompletionResult():
            lines = [*_completion(reply), *_noted(reply.note), *_footer(reply.content_hash, reply.server)]
        case DocumentSymbolResult():
            omitted = [f"… and {reply.omitted} more symbols, not listed"] if reply.omitted else []
            lines = [*_document_symbols(reply), *omitted, *_footer(reply.content_hash, reply.server)]
        case WorkspaceSymbolResult():
            lines = [*_workspace_symbols(reply), *_noted(reply.note), *_server_lines(reply.server)]
        case EvalResult():
            lines = _eval(reply)
        case RetryCompileResult():
            lines = [reply.message, *_footer(reply.content_hash, reply.server)]
        case RestartResult() | ShutdownResult() | StopResult() | RestartDaemonResult():
            lines = [reply.message]
        case StatusResult():
            lines = _status(reply)
        case MetricsResult():
            lines = reply.text.rstrip("\n").splitlines()
        case SearchResult():
            lines = [*_search(reply), *_noted(reply.note), *_server_lines(reply.server)]
        case HolmakeResult():
            lines = _holmake(reply)
        case TryResult():
            lines = _try(reply)
        case GoalDiffResult():
            lines = [f"theorem {reply.theorem}", *_diff(reply.diff), *_noted(reply.message)]
            lines += ["before:", *_goals(reply.before, "  "), "after:", *_goals(reply.after, "  ")]
            lines += _footer(reply.content_hash, reply.server) if reply.server else []
        case LogsResult():
            lines = [*reply.lines, f"({reply.message})"]
        case JobStarted():
            lines = [f"JOB {reply.id} started: {reply.message}"]
        case JobState():
            lines = [f"JOB {reply.id} {reply.state.upper()}: {reply.message}"]
        case UsesResult():
            lines = [*_uses(reply), *_server_lines(reply.server)]
        case VerifyResult():
            lines = _verify(reply)
        case HolesResult():
            lines = _holes(reply)
        case _:
            assert_never(reply)
    return lines + _freshness(reply)


def _progress(reply: Progress) -> str:
    """One live line: what the daemon is waiting for, and how far it got when it counts."""
    counted = f" ({reply.done}/{reply.total})" if reply.total else ""
    return f"… {reply.message}{counted}"
