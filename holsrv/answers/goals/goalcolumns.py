"""Where on a line a goalState asks HOL: the columns, and what the line is.

HOL runs the tactics that end at or before the cursor (docs/protocol.md#goal-state-answers),
so a whole line is asked at its first character (before its first tactic)
and just past its last (after its last tactic).  HOL answers on the QED line
only at QED's first byte (docs/protocol.md#where-a-goal-state-applies), so any column there is asked there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from holsrv.text import textinfo


@dataclass(frozen=True)
class Where:
    """The 1-based columns of a line to ask HOL about, and what the line is."""

    after: int
    before: int | None = None  # a line view whose first character differs from its end
    kind: str = "tactics"  # "tactics", "qed", "blank" or "outside" (by the daemon's reading)


def where_to_ask(text: str, lines: Sequence[str], line: int, column: int | None) -> Where:
    """The columns of `line` to ask about: `column` (moved to QED's first byte on
    the QED line), or with no column the line's first character and its end."""
    index = textinfo.of(text).index
    start = index.start(line)
    chars = lines[line - 1]
    block = _block_on(text, textinfo.of(text).blocks, start, start + len(chars))
    qed = block is not None and start == block.body_end
    if column is not None:
        return Where(1 if qed else column, kind="qed" if qed else "tactics")
    first, last = len(chars) - len(chars.lstrip()), len(chars.rstrip())
    if block is None:
        return Where(first + 1, kind="outside")
    if qed:
        return Where(1, kind="qed")
    if last == 0:
        return Where(1, kind="blank")
    # A Resume line starts outside its proof, which opens at the colon.
    before = max(start + first, _opening(text, block)) - start + 1
    after = min(start + last, block.body_end) - start + 1
    return Where(after, before if before != after else None)


def _block_on(text: str, blocks: tuple[textinfo.ProofBlock, ...], start: int, end: int) -> textinfo.ProofBlock | None:
    """The proof block with text on the line [start, end], counting its QED line."""
    for block in blocks:
        qed_line = start == block.body_end and text.startswith("QED", start)
        if _opening(text, block) <= end and (start < block.body_end or qed_line):
            return block
    return None


def _opening(text: str, block: textinfo.ProofBlock) -> int:
    """Where HOL starts answering: the `Proof` keyword, or a Resume block's colon
    (docs/protocol.md#where-a-goal-state-applies)."""
    return block.body_start - 1 if text[block.body_start - 1] == ":" else block.body_start - len("Proof")
