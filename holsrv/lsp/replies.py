"""HOL's replies as Structs, and the decoders that make them from JSON (PROTOCOL.md §6, §11, §12).

Unknown fields are ignored and JSON `null` counts as absent, so optional
fields take their defaults.  A reply of the wrong shape raises `LspError`:
garbled data is never passed off as "nothing here".  Pure: testable without
a server.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar, Union

import msgspec

from holsrv.errors import LspError

log = logging.getLogger(__name__)

T = TypeVar("T")
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
        return path_of(self.uri)


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


class SearchHit(_Lsp):
    """One `$/hol/search` match (PROTOCOL.md §6.10): `theory` without its `Theory` suffix."""

    name: str
    theory: str
    statement: str = ""
    # "Thm", "Def" or "Axm".
    class_: str = msgspec.field(default="Thm", name="class")
    uri: str = ""
    line: int = 0  # 1-based; 0 when unknown


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


def decode_search(raw: Any) -> list[SearchHit]:
    method = "$/hol/search"
    return _convert(_as_list(raw, method), list[SearchHit], method)


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


def uri_of(path: object) -> str:
    """The `file://` URI HOL expects for `path`.

    HOL turns a file URI into a path by stripping the prefix, without
    percent-decoding (PROTOCOL.md §5.1), so the raw path is what it needs.
    """
    return "file://" + str(path)


def path_of(uri: str) -> str:
    """The path of a `file://` URI (the inverse of `uri_of`)."""
    return uri.removeprefix("file://")


# -- the one bulk notification ---------------------------------------------------


class StatePosition(msgspec.Struct, gc=False):
    line: int = 0
    character: int = 0


class ProofState(msgspec.Struct, gc=False):
    """One transition of the proof pool (PROTOCOL.md §8.9)."""

    name: str = ""
    status: str = ""
    pos: StatePosition = msgspec.field(default_factory=StatePosition)
    detail: str = ""


class ProofStates(msgspec.Struct):
    """`$/proofStates` params, with each state left undecoded: after an edit
    above them HOL re-announces every proof of a file in one batch (30,000
    entries for the largest scripts), which decoded at once would hold the
    event loop for over 10 ms.  `proof_state` decodes each, in the slices
    the batch is folded in by, into a struct the cycle collector never
    walks (as dicts, 60,000 objects it would)."""

    uri: str = ""
    states: list[msgspec.Raw] = []


_proof_state = msgspec.json.Decoder(ProofState)


def proof_state(state: msgspec.Raw | dict) -> ProofState:
    """One transition, from its JSON (read leniently if it is not of the usual shape)."""
    if isinstance(state, msgspec.Raw):
        try:
            return _proof_state.decode(state)
        except msgspec.ValidationError:
            state = msgspec.json.decode(state)
    if not isinstance(state, dict):
        return ProofState()
    pos = state.get("pos")
    line = pos.get("line") if isinstance(pos, dict) else 0
    return ProofState(
        name=str(state.get("name") or ""), status=str(state.get("status") or ""),
        pos=StatePosition(line=line if isinstance(line, int) else 0), detail=str(state.get("detail") or ""),
    )


# Notifications whose params are decoded into structs rather than dicts.
TYPED_PARAMS: dict[str, type] = {"$/proofStates": ProofStates}
