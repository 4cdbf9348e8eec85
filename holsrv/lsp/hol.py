"""Typed HOL calls: the requests `hol lsp` answers, its replies as Structs, its quirks as predicates.

`HolCalls` sends requests about one open script through the two functions it
is given and decodes the answers (PROTOCOL.md §6, §11, §12); the `decode_*`
functions do the decoding alone, so they can be tested without a server.
Unknown fields are ignored and JSON `null` counts as absent, so optional
fields take their defaults.  A reply of the wrong shape raises `LspError`:
garbled data is never passed off as "nothing here".
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar, Union

import msgspec

from holsrv.errors import LspError

log = logging.getLogger(__name__)

Request = Callable[[str, dict[str, Any], float | None], Awaitable[Any]]
Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
T = TypeVar("T")

UNKNOWN_METHOD = -32600  # HOL's code for a method it lacks; not -32601 (PROTOCOL.md §3, §17.9)
_ANSI = re.compile(r"\x1B\[[0-9;]*m")
_WALK_TIMEOUT = re.compile(r"\btimed out\b", re.IGNORECASE)
_PARSE_RECOVERY = re.compile(r"\bexpected\b|\bunclosed quotation\b", re.IGNORECASE)
_NOT_COMPILING = re.compile(r"\bnot compiling\b")
_MAX_SHOWN_REPLY = 500


# -- shapes -------------------------------------------------------------------


class _Lsp(msgspec.Struct, rename="camel"):
    """LSP's camelCase names as snake_case attributes."""


class Position(_Lsp):
    """0-based line and character, counted in the negotiated encoding (PROTOCOL.md §4.4)."""

    line: int
    character: int

    def as_lsp(self) -> dict[str, int]:
        return {"line": self.line, "character": self.character}


class Range(_Lsp):
    start: Position
    end: Position

    def as_lsp(self) -> dict[str, dict[str, int]]:
        return {"start": self.start.as_lsp(), "end": self.end.as_lsp()}


class Diagnostic(_Lsp):
    """One entry of `textDocument/publishDiagnostics` (PROTOCOL.md §8.1): 1 error, 2 warning."""

    range: Range
    severity: int = 1
    message: str = ""


class Goal(_Lsp):
    asms: list[str] = []
    goal: str = ""


class Segment(_Lsp):
    """A piece of `pretty` without its ANSI escapes; `kind` and `ty` only on annotated pieces."""

    text: str = ""
    kind: str = ""
    name: str = ""
    ty: str = ""


class GoalState(_Lsp):
    """A full `$/hol/goalState` answer (PROTOCOL.md §6.8, §11.2).

    `goals[0]` is the goal the next tactic acts on; `error` is "" unless a
    step failed (then `goals` is the state before it) or the walk timed out.
    """

    theorem: str = ""
    step: int = 0
    goals: list[Goal] = []
    pretty: str = ""
    context: list[str] = []
    note: str = ""
    status: str = "ok"
    error: str = ""
    failed_range: Range | None = None
    failed_close_range: Range | None = None
    segments: list[Segment] = []


class Pending(msgspec.Struct, frozen=True):
    """HOL's bare `{"status":"pending"}`: not ready; ask again after `$/compileCompleted` (§11.4).

    `error` is set when a Resume block names a label HOL does not know yet (§11.6).
    """

    error: str = ""


PENDING = Pending()


class MarkupContent(_Lsp):
    kind: str = "plaintext"
    value: str = ""


class Hover(_Lsp):
    """A hover (PROTOCOL.md §6.2); HOL sends markdown, other servers a string or a list."""

    contents: Union[MarkupContent, str, list[Union[MarkupContent, str]]] = ""
    range: Range | None = None

    @property
    def text(self) -> str:
        """The contents as one string, parts joined the way HOL joins its own."""
        parts = self.contents if isinstance(self.contents, list) else [self.contents]
        return "\n\n---\n\n".join(p.value if isinstance(p, MarkupContent) else p for p in parts)


class Location(_Lsp):
    uri: str
    range: Range


class LocationLink(_Lsp):
    """What HOL answers `textDocument/definition` with, whatever the client declared (§6.3)."""

    target_uri: str
    target_range: Range
    target_selection_range: Range | None = None
    origin_selection_range: Range | None = None


class Target(msgspec.Struct):
    """Where a definition or reference points, from either a `Location` or a `LocationLink`.

    `selection_range` is the name itself where HOL knows it, else the whole `range`.
    """

    uri: str
    range: Range
    selection_range: Range

    @property
    def path(self) -> str:
        return uri_path(self.uri)


class Unsupported(msgspec.Struct, frozen=True):
    """This HOL server refuses `method` as unknown (PROTOCOL.md §6.11, §17.3)."""

    method: str
    message: str


class DocumentSymbol(_Lsp):
    """One `textDocument/documentSymbol` entry (PROTOCOL.md §6.4); kinds as HOL uses them there."""

    name: str
    kind: int
    range: Range
    selection_range: Range
    detail: str = ""
    children: list[DocumentSymbol] = []


class SymbolInformation(_Lsp):
    """The flat symbol form: what HOL sends a client without hierarchical support (§6.4)."""

    name: str
    kind: int
    location: Location
    container_name: str = ""


class WorkspaceSymbol(SymbolInformation):
    """A `workspace/symbol` match (PROTOCOL.md §6.5): `container_name` is e.g. `arithmeticTheory`."""


class CompletionItem(_Lsp):
    label: str
    kind: int | None = None
    detail: str = ""
    sort_text: str = ""


class CompletionList(_Lsp):
    is_incomplete: bool = False
    items: list[CompletionItem] = []


# `$/eval` reports (PROTOCOL.md §12): positions are relative to the code, line 0
# its first line.  Output `pos` is a Position, not the Range the manual says.


class _Report(_Lsp, tag_field="kind"):
    pass


class ToplevelOut(_Report, tag="toplevelOut"):
    """Poly/ML's print stream (`PolyML.print`)."""

    pos: Position | None = None
    body: str = ""


class CompilerOut(_Report, tag="compilerOut"):
    """The compiler's output stream (binding echoes)."""

    pos: Position | None = None
    body: str = ""


class ErrorReport(_Report, tag="error"):
    pos: Range | None = None
    msg: str = ""
    hard: bool = True


class ProgressReport(_Report, tag="compileProgress"):
    pos: Position | None = None


class CompletedReport(_Report, tag="compileCompleted"):
    pass


class InterruptedReport(_Report, tag="interrupted"):
    """The evaluation was cancelled (`$/cancelRequest`, §14)."""


class UnknownReport(msgspec.Struct):
    """A report holsrv does not read (a kind added after PROTOCOL.md, or a known one mis-shaped)."""

    kind: str
    raw: dict[str, Any]


EvalReport = Union[ToplevelOut, CompilerOut, ErrorReport, ProgressReport, CompletedReport, InterruptedReport]
PositionLike = Union[Position, Mapping[str, int]]


# -- HOL's quirks ---------------------------------------------------------------


def is_pending(reply: GoalState | Pending | None) -> bool:
    """HOL's bare pending answer: no goal state yet, ask after `$/compileCompleted` (PROTOCOL.md §6.8, §11.4)."""
    return isinstance(reply, Pending)


def is_provisional(reply: GoalState | Pending | None) -> bool:
    """A full goal state marked `status: pending`: the file's compile is unfinished; show, don't trust (§11.2)."""
    return isinstance(reply, GoalState) and reply.status == "pending"


def walk_timed_out(reply: GoalState | Pending | None) -> bool:
    """The goal-state walk ran out of time (`walker timed out (>1500ms)`, PROTOCOL.md §11.2): don't cache it."""
    return isinstance(reply, GoalState) and bool(_WALK_TIMEOUT.search(reply.error))


def is_settled(reply: GoalState | Pending | None) -> bool:
    """A full goal state that asking again would not improve: neither provisional nor timed out (§11.2, §11.5)."""
    return isinstance(reply, GoalState) and not is_provisional(reply) and not walk_timed_out(reply)


def is_unknown_method(err: BaseException, method: str | None = None) -> bool:
    """HOL lacks the method: error -32600 `unknown method: <method>` (PROTOCOL.md §3, §17.3, §17.9)."""
    if not isinstance(err, LspError) or err.rpc_code != UNKNOWN_METHOD:
        return False
    said = str(err)
    return said.startswith("unknown method") and (method is None or said.endswith(method))


def is_not_compiling_notice(message: str) -> bool:
    """A showMessage/logMessage saying HOL will not compile a file: blocked or refused (PROTOCOL.md §8.2, §8.3)."""
    return bool(_NOT_COMPILING.search(message))


def is_parse_recovery(diagnostic: Diagnostic | Mapping[str, Any]) -> bool:
    """A warning that is really a parse error HOL recovered from; Holmake fails on it (PROTOCOL.md §8.1)."""
    if isinstance(diagnostic, Mapping):
        severity, message = diagnostic.get("severity"), str(diagnostic.get("message", ""))
    else:
        severity, message = diagnostic.severity, diagnostic.message
    return severity == 2 and bool(_PARSE_RECOVERY.search(message))


def is_proof_failure(message: str) -> bool:
    """The pool's `proof failed: …` error, first on the theorem's name, later on the failing step (§10.5)."""
    return message.startswith("proof failed")


def is_failing_branch_end(message: str) -> bool:
    """The pool's second error, on the closing paren of a failing `>-` branch (PROTOCOL.md §10.5)."""
    return message.startswith("end of the failing branch")


def is_proof_diagnostic(message: str) -> bool:
    """One of the pool's own diagnostics about a failed proof, not the compile's (PROTOCOL.md §10.5)."""
    return is_proof_failure(message) or is_failing_branch_end(message)


def strip_ansi(text: str) -> str:
    """`text` without the colour escapes HOL puts in goal-state text (PROTOCOL.md §11.2)."""
    return _ANSI.sub("", text)


def uri_path(uri: str) -> str:
    """The path of a `file://` URI, as the session builds them (no percent-encoding)."""
    return uri.removeprefix("file://")


# -- decoding -------------------------------------------------------------------


def decode_goal_state(raw: Any) -> GoalState | Pending | None:
    """`$/hol/goalState`'s three shapes: null, bare pending, a full state (PROTOCOL.md §6.8)."""
    if raw is None:
        return None
    # Bare pending has nothing else in it (a Resume one may carry an error); a
    # full but provisional state also says "pending", but names its theorem.
    if isinstance(raw, dict) and raw.get("status") == "pending" and "theorem" not in raw:
        return Pending(error=str(raw.get("error") or ""))
    return _convert(raw, GoalState, "$/hol/goalState")


def decode_hover(raw: Any) -> Hover | None:
    return None if raw is None else _convert(raw, Hover, "textDocument/hover")


def decode_locations(raw: Any, method: str = "textDocument/definition") -> list[Target]:
    """A `Location`, a list of them, or a list of `LocationLink`s, as `Target`s (PROTOCOL.md §6.3)."""
    items = [raw] if isinstance(raw, dict) else _as_list(raw, method)
    return [_target(item, method) for item in items]


def _target(item: Any, method: str) -> Target:
    if isinstance(item, dict) and "targetUri" in item:
        link = _convert(item, LocationLink, method)
        return Target(link.target_uri, link.target_range, link.target_selection_range or link.target_range)
    location = _convert(item, Location, method)
    return Target(location.uri, location.range, location.range)


def decode_document_symbols(raw: Any) -> list[DocumentSymbol]:
    """Document symbols as a tree, whichever form HOL sent (PROTOCOL.md §6.4)."""
    method = "textDocument/documentSymbol"
    items = _as_list(raw, method)
    if any(isinstance(item, dict) and "location" in item for item in items):
        return _nest(_convert(items, list[SymbolInformation], method))
    return _convert(items, list[DocumentSymbol], method)


def _nest(flat: list[SymbolInformation]) -> list[DocumentSymbol]:
    """The flat form back into a tree: HOL flattens children after their parent, named as `containerName`."""
    top: list[DocumentSymbol] = []
    by_name: dict[str, DocumentSymbol] = {}
    for info in flat:
        rng = info.location.range
        symbol = DocumentSymbol(name=info.name, kind=info.kind, range=rng, selection_range=rng)
        parent = by_name.get(info.container_name) if info.container_name else None
        # Names repeat (SML rebinding): only an enclosing parent is the container.
        if parent is not None and _within(rng, parent.range):
            parent.children.append(symbol)
        else:
            top.append(symbol)
        by_name[info.name] = symbol
    return top


def _within(inner: Range, outer: Range) -> bool:
    def key(p: Position) -> tuple[int, int]:
        return p.line, p.character

    return key(outer.start) <= key(inner.start) and key(inner.end) <= key(outer.end)


def decode_workspace_symbols(raw: Any) -> list[WorkspaceSymbol]:
    method = "workspace/symbol"
    return _convert(_as_list(raw, method), list[WorkspaceSymbol], method)


def decode_completion(raw: Any) -> tuple[list[CompletionItem], bool]:
    """(items, is_incomplete) from a `CompletionList` or a bare list of items (PROTOCOL.md §6.6)."""
    method = "textDocument/completion"
    if raw is None or isinstance(raw, list):
        return _convert(_as_list(raw, method), list[CompletionItem], method), False
    completions = _convert(raw, CompletionList, method)
    return completions.items, completions.is_incomplete


def decode_eval_reports(raw: Any) -> list[EvalReport | UnknownReport]:
    """`$/eval`'s report list (PROTOCOL.md §12), item by item: one report holsrv cannot read is kept raw."""
    return [_report(item) for item in _as_list(raw, "$/eval")]


def _report(item: Any) -> EvalReport | UnknownReport:
    try:
        report: EvalReport = msgspec.convert(_drop_nulls(item), EvalReport)
        return report
    except msgspec.ValidationError as err:
        log.info("kept an eval report holsrv does not read (%s): %.200r", err, item)
        raw = item if isinstance(item, dict) else {"value": item}
        return UnknownReport(kind=str(raw.get("kind", "")), raw=raw)


def eval_output(reports: list[EvalReport | UnknownReport]) -> str:
    """What the code printed and the compiler echoed, in order."""
    return "".join(r.body for r in reports if isinstance(r, (ToplevelOut, CompilerOut)))


def _as_list(raw: Any, method: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _shape_error(method, raw, "expected a list")
    return raw


def _convert(raw: Any, type_: type[T], method: str) -> T:
    try:
        return msgspec.convert(_drop_nulls(raw), type_)
    except msgspec.ValidationError as err:
        raise _shape_error(method, raw, str(err)) from None


def _drop_nulls(raw: Any) -> Any:
    """JSON nulls as absent fields, so that a field HOL sends as null takes its default."""
    if isinstance(raw, dict):
        return {key: _drop_nulls(value) for key, value in raw.items() if value is not None}
    if isinstance(raw, list):
        return [_drop_nulls(value) for value in raw]
    return raw


def _shape_error(method: str, raw: Any, why: str) -> LspError:
    shown = repr(raw)
    if len(shown) > _MAX_SHOWN_REPLY:
        shown = shown[:_MAX_SHOWN_REPLY] + "…"
    return LspError(
        f"the HOL server answered {method} in a shape holsrv does not read ({why}); this HOL may be "
        "newer or older than holsrv supports (see PROTOCOL.md)",
        detail=shown,
    )


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
        """The goals at `position`; `PENDING`-like while HOL is not ready, None outside a proof (§11)."""
        params = {**self._at(position), "width": width}
        return decode_goal_state(await self._request("$/hol/goalState", params, timeout))

    async def hover(self, position: PositionLike, timeout: float | None = None) -> Hover | None:
        """None past the compile's frontier, on punctuation, or on a multi-line node (§6.2)."""
        return decode_hover(await self._request("textDocument/hover", self._at(position), timeout))

    async def definition(self, position: PositionLike, timeout: float | None = None) -> list[Target]:
        """Where the name at `position` is defined; [] if HOL does not know (§6.3)."""
        method = "textDocument/definition"
        return decode_locations(await self._request(method, self._at(position), timeout), method)

    async def references(
        self, position: PositionLike, include_declaration: bool = True, timeout: float | None = None
    ) -> list[Target] | Unsupported:
        """Uses of the name at `position`, or `Unsupported`: today's HOL lacks the method (§17.3)."""
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
        """(items, is_incomplete) for the identifier before `position` (§6.6)."""
        return decode_completion(await self._request("textDocument/completion", self._at(position), timeout))

    async def document_symbol(self, timeout: float | None = None) -> list[DocumentSymbol]:
        """The script's declarations as a tree; parse-driven, so it works on files that do not compile (§6.4)."""
        params = {"textDocument": {"uri": self.uri}}
        return decode_document_symbols(await self._request("textDocument/documentSymbol", params, timeout))

    async def workspace_symbol(self, query: str, timeout: float | None = None) -> list[WorkspaceSymbol]:
        """Theorems and definitions whose name contains `query` (case-insensitive; [] under 2 characters, §6.5)."""
        return decode_workspace_symbols(await self._request("workspace/symbol", {"query": query}, timeout))

    async def eval(self, code: str, timeout: float, holdep: int = 1) -> list[EvalReport | UnknownReport]:
        """Compile and run `code` in the server's shared state; the reports once it is done (§12).

        A timeout is the sender's (`ServerTimeout`, which cancels the evaluation).
        """
        params = {"uri": self.uri, "code": code, "incr": 0, "holdep": holdep}
        return decode_eval_reports(await self._request("$/eval", params, timeout))

    async def retry_compile(self) -> None:
        """Ask HOL to retry a blocked file (§9.4); on one that is not blocked it cancels every proof check (§17.4)."""
        # The manual says {uri}; the server reads textDocument.uri (§7, §17.8).
        await self._notify("$/hol/retryCompile", {"textDocument": {"uri": self.uri}})
