"""Answers about names as Structs: hover, definitions and references, symbols,
`$/hol/search` and completion (docs/protocol.md#requests, #search). Pure."""

from __future__ import annotations

from typing import Any, Union

import msgspec

from holsrv.lsp.shapes import Lsp, Position, Range, as_list, convert, path_of


class MarkupContent(Lsp):
    kind: str = "plaintext"
    value: str = ""


class Hover(Lsp):
    """A hover (docs/protocol.md#hover); HOL sends markdown, other servers a string or a list."""

    contents: Union[MarkupContent, str, list[Union[MarkupContent, str]]] = ""
    range: Range | None = None

    @property
    def text(self) -> str:
        """The contents as one string, parts joined the way HOL joins its own."""
        parts = self.contents if isinstance(self.contents, list) else [self.contents]
        return "\n\n---\n\n".join(p.value if isinstance(p, MarkupContent) else p for p in parts)


class Location(Lsp):
    uri: str
    range: Range


class LocationLink(Lsp):
    """What HOL answers `textDocument/definition` with, whatever the client declared (docs/protocol.md#definition)."""

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

class DocumentSymbol(Lsp):
    """One `textDocument/documentSymbol` entry (docs/protocol.md#document-symbols); kinds as HOL uses them there."""

    name: str
    kind: int
    range: Range
    selection_range: Range
    detail: str = ""
    children: list[DocumentSymbol] = []


class SymbolInformation(Lsp):
    """The flat symbol form: what HOL sends a client without hierarchical support
    (docs/protocol.md#document-symbols)."""

    name: str
    kind: int
    location: Location
    container_name: str = ""


class WorkspaceSymbol(SymbolInformation):
    """A `workspace/symbol` match (docs/protocol.md#workspace-symbols): `container_name` is e.g. `arithmeticTheory`."""


class SearchHit(Lsp):
    """One `$/hol/search` match (docs/protocol.md#search): `theory` without its `Theory` suffix."""

    name: str
    theory: str
    statement: str = ""
    # "Thm", "Def" or "Axm".
    class_: str = msgspec.field(default="Thm", name="class")
    uri: str = ""
    line: int = 0  # 1-based; 0 when unknown


class CompletionItem(Lsp):
    label: str
    kind: int | None = None
    detail: str = ""
    sort_text: str = ""


class CompletionList(Lsp):
    is_incomplete: bool = False
    items: list[CompletionItem] = []


def decode_hover(raw: Any) -> Hover | None:
    return None if raw is None else convert(raw, Hover, "textDocument/hover")


def decode_locations(raw: Any, method: str = "textDocument/definition") -> list[Target]:
    """A `Location`, a list of them, or a list of `LocationLink`s, as `Target`s (docs/protocol.md#definition)."""
    items = [raw] if isinstance(raw, dict) else as_list(raw, method)
    return [_target(item, method) for item in items]


def _target(item: Any, method: str) -> Target:
    if isinstance(item, dict) and "targetUri" in item:
        link = convert(item, LocationLink, method)
        return Target(link.target_uri, link.target_range, link.target_selection_range or link.target_range)
    location = convert(item, Location, method)
    return Target(location.uri, location.range, location.range)


def decode_document_symbols(raw: Any) -> list[DocumentSymbol]:
    """Document symbols as a tree, whichever form HOL sent (docs/protocol.md#document-symbols)."""
    method = "textDocument/documentSymbol"
    items = as_list(raw, method)
    if any(isinstance(item, dict) and "location" in item for item in items):
        return _nest(convert(items, list[SymbolInformation], method))
    return convert(items, list[DocumentSymbol], method)


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
    return convert(as_list(raw, method), list[WorkspaceSymbol], method)


def decode_search(raw: Any) -> list[SearchHit]:
    method = "$/hol/search"
    return convert(as_list(raw, method), list[SearchHit], method)


def decode_completion(raw: Any) -> tuple[list[CompletionItem], bool]:
    """(items, is_incomplete) from a `CompletionList` or a bare list of items (docs/protocol.md#completion)."""
    method = "textDocument/completion"
    if raw is None or isinstance(raw, list):
        return convert(as_list(raw, method), list[CompletionItem], method), False
    completions = convert(raw, CompletionList, method)
    return completions.items, completions.is_incomplete
