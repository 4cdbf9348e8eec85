"""`$/eval`'s reports as Structs (docs/protocol.md#eval), and the output they carry. Pure.

Positions are relative to the code, line 0 its first line.  Output `pos` is a
Position, not the Range the manual says.
"""

from __future__ import annotations

import logging
from typing import Any, Union

import msgspec

from holsrv.lsp.shapes import Lsp, Position, Range, as_list, drop_nulls

log = logging.getLogger(__name__)


class _Report(Lsp, tag_field="kind"):
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
    """The evaluation was cancelled (`$/cancelRequest`, docs/protocol.md#cancellation)."""


class UnknownReport(msgspec.Struct):
    """A report holsrv does not read (a kind docs/protocol.md#eval does not list, or a known one mis-shaped)."""

    kind: str
    raw: dict[str, Any]


EvalReport = Union[ToplevelOut, CompilerOut, ErrorReport, ProgressReport, CompletedReport, InterruptedReport]


# -- decoding -------------------------------------------------------------------

def decode_eval_reports(raw: Any) -> list[EvalReport | UnknownReport]:
    """`$/eval`'s report list (docs/protocol.md#eval), item by item: one report holsrv cannot read is kept raw."""
    return [_report(item) for item in as_list(raw, "$/eval")]


def _report(item: Any) -> EvalReport | UnknownReport:
    try:
        report: EvalReport = msgspec.convert(drop_nulls(item), EvalReport)
        return report
    except msgspec.ValidationError as err:
        log.info("kept an eval report holsrv does not read (%s): %.200r", err, item)
        raw = item if isinstance(item, dict) else {"value": item}
        return UnknownReport(kind=str(raw.get("kind", "")), raw=raw)


def eval_output(reports: list[EvalReport | UnknownReport]) -> str:
    """What the code printed and the compiler echoed, in order."""
    return "".join(r.body for r in reports if isinstance(r, (ToplevelOut, CompilerOut)))
