"""`$/hol/goalState`'s answers as Structs (docs/protocol.md#goal-state-answers, #goal-states). Pure."""

from __future__ import annotations

from typing import Any

import msgspec

from holsrv.lsp.shapes import Lsp, Range, convert


class Goal(Lsp):
    asms: list[str] = []
    goal: str = ""


class Segment(Lsp):
    """A piece of `pretty` without its ANSI escapes; `kind` and `ty` only on annotated pieces."""

    text: str = ""
    kind: str = ""
    name: str = ""
    ty: str = ""


class GoalState(Lsp):
    """A full `$/hol/goalState` answer (docs/protocol.md#goal-state-answers).

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
    """HOL's bare `{"status":"pending"}`: not ready; ask again after `$/compileCompleted`
    (docs/protocol.md#not-ready-yet).

    `error` is set when a Resume block names a label HOL does not know yet (docs/protocol.md#resume-blocks).
    """

    error: str = ""


PENDING = Pending()


def decode_goal_state(raw: Any) -> GoalState | Pending | None:
    """`$/hol/goalState`'s three shapes: null, bare pending, a full state (docs/protocol.md#goal-state-answers)."""
    if raw is None:
        return None
    # Bare pending has nothing else in it (a Resume one may carry an error); a
    # full but provisional state also says "pending", but names its theorem.
    if isinstance(raw, dict) and raw.get("status") == "pending" and "theorem" not in raw:
        return Pending(error=str(raw.get("error") or ""))
    return convert(raw, GoalState, "$/hol/goalState")
