"""Where a `try` candidate goes in the text: the tactic it replaces, and its place in it.

Pure functions over a text (its facts come from `textinfo`, computed once
per text): no server, no session.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from holsrv.errors import BadRequest
from holsrv.rpc import messages as m
from holsrv.text import script, textinfo
from holsrv.text.positions import LineIndex, Text

# A line's own combinators stay when its whole tactic is replaced: `>> simp[]`
# tried as `metis_tac[]` must stay `>> metis_tac[]`, or the proof no longer parses.
_LEADING = re.compile(r"(?:>>|\\\\|>-|>\||THEN1\b|THENL\b|THEN\b)\s*")
_TRAILING = re.compile(r"\s*(?:>>|\\\\|THEN\b)$")


@dataclass(frozen=True)
class Span:
    """What a candidate replaces: text[start:end], inside `block`'s body."""

    start: int
    end: int
    block: script.ProofBlock
    name: str  # the proof's pool name

    def put(self, text: str, tactic: str) -> str:
        """`text` with `tactic` in this span's place."""
        return text[:self.start] + tactic + text[self.end:]


def span(text: str, line: int, column: int | None) -> Span:
    """The tactic text of `line` from `column` (or all of it) that candidates replace."""
    lines = Text(text)
    lines.to_lsp(line, column or 1, "utf-8")  # refuses a position outside the file
    info = textinfo.of(text)  # computed once per text
    start = info.index.start(line)
    chars = lines.lines[line - 1]
    found = next(((n, b) for n, b in info.named if b.body_start <= start + len(chars) and start < b.body_end), None)
    if found is None:
        raise BadRequest(
            f"line {line} is not a line of tactics inside a Proof … QED block; give the line of the "
            "tactic to replace (goalState shows the goals on any line of a proof)."
        )
    name, block = found
    first = start + len(chars) - len(chars.lstrip()) if column is None else start + column - 1
    a, b = max(first, block.body_start), min(start + len(chars.rstrip()), block.body_end)
    if column is None:
        lead = _LEADING.match(text, a, b)
        a = lead.end() if lead else a
        trail = _TRAILING.search(text[a:b])
        b = a + trail.start() if trail else b
    if a >= b:
        raise BadRequest(
            f"line {line}{'' if column is None else f', column {column},'} has no tactic text to replace; "
            "give a line (and column) inside the proof where a tactic is."
        )
    return Span(a, b, block, name)


def in_candidate(index: LineIndex, rng: m.Range, start: int, tactic: str) -> m.Range:
    """`rng` (of the trial's text) in the candidate's own text, clamped to it: line 1 is its first."""
    def own(line: int, col: int) -> tuple[int, int]:
        at = min(max(index.start(line) + col - 1 - start, 0), len(tactic))
        first = tactic.rfind("\n", 0, at) + 1
        return tactic.count("\n", 0, at) + 1, at - first + 1

    (line, col), (end_line, end_col) = own(rng.line, rng.col), own(rng.end_line, rng.end_col)
    return m.Range(line, col, end_line, end_col)
