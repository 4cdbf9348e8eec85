"""Typed HOL calls: the requests `hol lsp` answers (docs/protocol.md#requests, #goal-states, #eval).

`HolCalls` sends requests about one open script through the two functions it
is given and decodes the answers with the reply families of `replies`.  HOL's
quirks, the named predicates, are `quirks`'s; they are named here too, so that
`hol.is_pending` and the rest read as one HOL layer at the call sites.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from holsrv.errors import LspError
from holsrv.lsp.evalreports import ErrorReport, EvalReport, ToplevelOut, UnknownReport, decode_eval_reports
from holsrv.lsp.goalstates import GoalState, Pending, decode_goal_state
from holsrv.lsp.quirks import (
    UNKNOWN_METHOD,
    did_not_compile,
    is_compile_error,
    is_eval_failure,
    is_failing_branch_end,
    is_holdep_noise,
    is_not_compiling_notice,
    is_parse_recovery,
    is_parse_report,
    is_pending,
    is_proof_diagnostic,
    is_proof_failure,
    is_provisional,
    is_settled,
    is_unknown_method,
    readable,
    sml_string,
    sml_unquote,
    strip_ansi,
    walk_timed_out,
    without_holdep_noise,
)
from holsrv.lsp.shapes import Position, Unsupported
from holsrv.lsp.symbols import (
    CompletionItem,
    DocumentSymbol,
    Hover,
    SearchHit,
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
    "HolCalls", "Notify", "PositionLike", "Request", "UNKNOWN_METHOD", "is_pending", "is_provisional",
    "walk_timed_out", "is_settled", "is_unknown_method", "is_not_compiling_notice", "is_parse_report",
    "is_parse_recovery", "is_eval_failure", "did_not_compile", "is_compile_error", "is_proof_failure",
    "is_failing_branch_end", "is_proof_diagnostic", "readable", "is_holdep_noise", "without_holdep_noise",
    "sml_string", "sml_unquote", "strip_ansi",
]

Request = Callable[[str, dict[str, Any], float | None], Awaitable[Any]]
Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
PositionLike = Position | Mapping[str, int]


def _position(position: PositionLike) -> dict[str, int]:
    return position.as_lsp() if isinstance(position, Position) else dict(position)


# -- calls ----------------------------------------------------------------------


class HolCalls:
    """Typed requests about one open script.

    `request(method, params, timeout)` sends a request and returns its JSON
    result, raising `LspError` (with `rpc_code`) for a JSON-RPC error;
    `timeout` None means the sender's default.  `notify(method, params)` sends
    a notification.  Positions are LSP positions in the negotiated encoding.
    """

    def __init__(self, uri: str, request: Request, notify: Notify) -> None:
        self.uri = uri
        self._request = request
        self._notify = notify

    def _at(self, position: PositionLike) -> dict[str, Any]:
        return {"textDocument": {"uri": self.uri}, "position": _position(position)}

    async def goal_state(
        self, position: PositionLike, width: int = 80, timeout: float | None = None
    ) -> GoalState | Pending | None:
        """The goals at `position`; `PENDING`-like while HOL is not ready, None outside a proof
        (docs/protocol.md#goal-states)."""
        params = {**self._at(position), "width": width}
        return decode_goal_state(await self._request("$/hol/goalState", params, timeout))

    async def hover(self, position: PositionLike, timeout: float | None = None) -> Hover | None:
        """None past the compile's frontier, on punctuation, or on a multi-line node (docs/protocol.md#hover)."""
        return decode_hover(await self._request("textDocument/hover", self._at(position), timeout))

    async def definition(self, position: PositionLike, timeout: float | None = None) -> list[Target]:
        """Where the name at `position` is defined; [] if HOL does not know (docs/protocol.md#definition)."""
        method = "textDocument/definition"
        return decode_locations(await self._request(method, self._at(position), timeout), method)

    async def references(
        self, position: PositionLike, include_declaration: bool = True, timeout: float | None = None
    ) -> list[Target] | Unsupported:
        """Uses of the name at `position`, or `Unsupported`: today's HOL lacks the method
        (docs/protocol.md#methods-hol-lacks)."""
        method = "textDocument/references"
        params = {**self._at(position), "context": {"includeDeclaration": include_declaration}}
        try:
            raw = await self._request(method, params, timeout)
        except LspError as err:
            if is_unknown_method(err, method):
                return Unsupported(method, str(err))
            raise
        return decode_locations(raw, method)

    async def completion(
        self, position: PositionLike, timeout: float | None = None
    ) -> tuple[list[CompletionItem], bool]:
        """(items, is_incomplete) for the identifier before `position` (docs/protocol.md#completion)."""
        return decode_completion(await self._request("textDocument/completion", self._at(position), timeout))

    async def document_symbol(self, timeout: float | None = None) -> list[DocumentSymbol]:
        """The script's declarations as a tree; parse-driven, so it works on files that do not compile
        (docs/protocol.md#document-symbols)."""
        params = {"textDocument": {"uri": self.uri}}
        return decode_document_symbols(await self._request("textDocument/documentSymbol", params, timeout))

    async def workspace_symbol(self, query: str, timeout: float | None = None) -> list[WorkspaceSymbol]:
        """Theorems and definitions whose name contains `query` (case-insensitive; [] under 2 characters,
        docs/protocol.md#workspace-symbols)."""
        return decode_workspace_symbols(await self._request("workspace/symbol", {"query": query}, timeout))

    async def search(self, query: str, limit: int = 100, timeout: float | None = None) -> list[SearchHit]:
        """The theorem database's matches for `query` (docs/protocol.md#search): each `"name fragment"`,
        `'theory'` and the rest as a term pattern narrow it; [] when the pattern does not parse."""
        return decode_search(await self._request("$/hol/search", {"query": query, "limit": limit}, timeout))

    async def parse_problem(self, pattern: str, timeout: float | None = None) -> str | None:
        """Why HOL cannot parse `pattern` as a term ("" when it can; None when the check itself failed).

        `$/hol/search` answers [] for a pattern that does not parse and says
        nothing more (docs/protocol.md#search), so the term is parsed again, alone, for HOL's words.
        """
        code = (f'val _ = PolyML.print ((ignore (Parse.Term [QUOTE {sml_string(pattern)}]); "") '
                "handle e => Feedback.exn_to_string e);")
        try:
            reports = await self._request("$/eval", {"uri": self.uri, "code": code, "incr": 0, "holdep": 0}, timeout)
        except LspError:
            return None
        decoded = decode_eval_reports(reports)
        if any(isinstance(r, ErrorReport) for r in decoded):
            return None  # the check did not compile here (an older HOL): say nothing rather than guess
        printed = "".join(r.body for r in decoded if isinstance(r, ToplevelOut)).strip()
        return readable(sml_unquote(printed)) if printed else None

    async def eval(self, code: str, timeout: float, holdep: int = 1) -> list[EvalReport | UnknownReport]:
        """Compile and run `code` in the server's shared state; the reports once it is done (docs/protocol.md#eval).

        `holdep` 1 (HOL's default) first loads the modules the code names (a miss
        is only written to stderr, see `is_holdep_noise`); 0 loads nothing.  A
        timeout is the sender's (`ServerTimeout`, which cancels the evaluation).
        """
        params = {"uri": self.uri, "code": code, "incr": 0, "holdep": holdep}
        return decode_eval_reports(await self._request("$/eval", params, timeout))

    async def retry_compile(self) -> None:
        """Ask HOL to retry a blocked file (docs/protocol.md#blocked-files); on one that is not blocked it
        cancels every proof check (docs/protocol.md#retry-on-a-file-that-is-not-blocked)."""
        # The manual says {uri}; the server reads textDocument.uri (docs/protocol.md#client-notifications).
        await self._notify("$/hol/retryCompile", {"textDocument": {"uri": self.uri}})
