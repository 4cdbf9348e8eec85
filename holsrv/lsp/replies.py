"""HOL's replies as Structs, one import for callers: the index of the reply families.

Each family lives in its own module (all pure, testable without a server):
`shapes` (positions, ranges, diagnostics, URIs, the lenient converter),
`goalstates` (`$/hol/goalState`), `evalreports` (`$/eval`), `symbols` (hover,
definitions, symbols, search, completion) and `proofstates` (`$/proofStates`).
"""

from __future__ import annotations

from holsrv.lsp.evalreports import (
    CompilerOut,
    CompletedReport,
    ErrorReport,
    EvalReport,
    InterruptedReport,
    ProgressReport,
    ToplevelOut,
    UnknownReport,
    decode_eval_reports,
    eval_output,
)
from holsrv.lsp.goalstates import PENDING, Goal, GoalState, Pending, Segment, decode_goal_state
from holsrv.lsp.proofstates import TYPED_PARAMS, ProofState, ProofStates, StatePosition, proof_state
from holsrv.lsp.shapes import Diagnostic, Position, Range, Unsupported, path_of, uri_of
from holsrv.lsp.symbols import (
    CompletionItem,
    CompletionList,
    DocumentSymbol,
    Hover,
    Location,
    LocationLink,
    MarkupContent,
    SearchHit,
    SymbolInformation,
    Target,
    WorkspaceSymbol,
    decode_completion,
    decode_document_symbols,
    decode_hover,
    decode_locations,
    decode_search,
    decode_workspace_symbols,
)

__all__ = [
    "PENDING", "TYPED_PARAMS", "CompilerOut", "CompletedReport", "CompletionItem", "CompletionList",
    "Diagnostic", "DocumentSymbol", "ErrorReport", "EvalReport", "Goal", "GoalState", "Hover",
    "InterruptedReport", "Location", "LocationLink", "MarkupContent", "Pending", "Position",
    "ProgressReport", "ProofState", "ProofStates", "Range", "SearchHit", "Segment", "StatePosition",
    "SymbolInformation", "Target", "ToplevelOut", "UnknownReport", "Unsupported", "WorkspaceSymbol",
    "decode_completion", "decode_document_symbols", "decode_eval_reports", "decode_goal_state",
    "decode_hover", "decode_locations", "decode_search", "decode_workspace_symbols", "eval_output",
    "path_of", "proof_state", "uri_of",
]
