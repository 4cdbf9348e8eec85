"""LSP's common shapes: positions, ranges, diagnostics, document URIs, and the
lenient converter every reply decoder uses (docs/protocol.md#position-encoding, #documents-and-uris).

Unknown fields are ignored and JSON `null` counts as absent, so optional
fields take their defaults.  A reply of the wrong shape raises `LspError`:
garbled data is never passed off as "nothing here".  Pure: testable without
a server.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from holsrv.errors import LspError

T = TypeVar("T")
_MAX_SHOWN_REPLY = 500


class Lsp(msgspec.Struct, rename="camel"):
    """LSP's camelCase names as snake_case attributes."""


class Position(Lsp):
    """0-based line and character, counted in the negotiated encoding (docs/protocol.md#position-encoding)."""

    line: int
    character: int

    def as_lsp(self) -> dict[str, int]:
        return {"line": self.line, "character": self.character}


class Range(Lsp):
    start: Position
    end: Position

    def as_lsp(self) -> dict[str, dict[str, int]]:
        return {"start": self.start.as_lsp(), "end": self.end.as_lsp()}


class Diagnostic(Lsp):
    """One entry of `textDocument/publishDiagnostics` (docs/protocol.md#diagnostics): 1 error, 2 warning."""

    range: Range
    severity: int = 1
    message: str = ""


class Unsupported(msgspec.Struct, frozen=True):
    """This HOL server refuses `method` as unknown (docs/protocol.md#methods-hol-lacks)."""

    method: str
    message: str


def uri_of(path: object) -> str:
    """The `file://` URI HOL expects for `path`.

    HOL turns a file URI into a path by stripping the prefix, without
    percent-decoding (docs/protocol.md#documents-and-uris), so the raw path is what it needs.
    """
    return "file://" + str(path)


def path_of(uri: str) -> str:
    """The path of a `file://` URI (the inverse of `uri_of`)."""
    return uri.removeprefix("file://")


def as_list(raw: Any, method: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise shape_error(method, raw, "expected a list")
    return raw


def convert(raw: Any, type_: type[T], method: str) -> T:
    try:
        return msgspec.convert(drop_nulls(raw), type_)
    except msgspec.ValidationError as err:
        raise shape_error(method, raw, str(err)) from None


def drop_nulls(raw: Any) -> Any:
    """JSON nulls as absent fields, so that a field HOL sends as null takes its default."""
    if isinstance(raw, dict):
        return {key: drop_nulls(value) for key, value in raw.items() if value is not None}
    if isinstance(raw, list):
        return [drop_nulls(value) for value in raw]
    return raw


def shape_error(method: str, raw: Any, why: str) -> LspError:
    shown = repr(raw)
    if len(shown) > _MAX_SHOWN_REPLY:
        shown = shown[:_MAX_SHOWN_REPLY] + "…"
    return LspError(
        f"the HOL server answered {method} in a shape holsrv does not read ({why}); this HOL may be "
        "newer or older than holsrv supports (docs/protocol.md: what holsrv reads of HOL)",
        detail=shown,
    )
