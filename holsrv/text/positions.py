"""The one place where outside positions meet the HOL server's.

Outside (RPC, CLI, MCP): 1-based lines, 1-based columns in code points.
Inside (LSP): 0-based lines, `character` in the negotiated unit: bytes for
"utf-8", UTF-16 code units for "utf-16".  Lines are split on "\\n" only, as
the HOL server does.
"""

from __future__ import annotations

import array
import bisect
import itertools
import re
from collections.abc import Sequence
from typing import overload

from holsrv.errors import PositionOutOfRange
from holsrv.rpc import messages as m

_IDENT = re.compile(r"[A-Za-z0-9_']+")


# Characters split per call of `more_starts`: well under a millisecond.
SPLIT_CHARS_PER_STEP = 256 * 1024


def more_starts(starts: array.array[int], text: str, pos: int) -> int:
    """Add to `starts` where the lines start in about a step's worth of `text`
    from `pos` (a line start), whole lines; where to go on.

    An array of machine integers, which the cycle collector never tracks:
    kept as long as the text, a list (or the lines themselves, as strings)
    would be walked by every full collection, pausing the event loop.
    """
    end = text.find("\n", pos + SPLIT_CHARS_PER_STEP)
    end = len(text) if end < 0 else end + 1  # a step's lines, each whole with its newline
    lines = text[pos:end].split("\n")
    # Each line's start is the previous one's plus its length and newline,
    # summed in C: a character loop costs 20 ms on a 300 KB script.
    summed = itertools.accumulate(map((1).__add__, map(len, lines[:-1])), initial=starts[-1])
    next(summed)  # the step's first start: already there
    starts.extend(summed)
    return end


def line_starts(text: str) -> array.array[int]:
    """Where each line of `text` starts (in characters): `more_starts` to the end."""
    starts, pos = array.array("q", [0]), 0
    while pos < len(text):
        pos = more_starts(starts, text, pos)
    return starts


class Lines(Sequence[str]):
    """A text's lines (split on "\n"), each cut from the text when asked."""

    def __init__(self, text: str, starts: Sequence[int]) -> None:
        self._text = text
        self._starts = starts

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self._starts)
        if not 0 <= index < len(self._starts):
            raise IndexError("line index out of range")
        end = self._starts[index + 1] - 1 if index + 1 < len(self._starts) else len(self._text)
        return self._text[self._starts[index]:end]


class Text:
    """A file's text split into lines, with conversions in both directions."""

    def __init__(self, text: str, starts: Sequence[int] | None = None) -> None:
        """`starts`: the lines' starts already computed (by `line_starts`, or in steps by `textinfo.starts_steps`)."""
        self.text = text
        self.lines: Sequence[str] = text.split("\n") if starts is None else Lines(text, starts)

    def to_lsp(self, line: int, col: int, encoding: str) -> dict:
        """1-based (line, col) in code points → an LSP Position dict."""
        if not 1 <= line <= len(self.lines):
            raise PositionOutOfRange(
                f"line {line} is out of range: the file has {len(self.lines)} lines "
                "(lines are 1-based)"
            )
        chars = self.lines[line - 1]
        if not 1 <= col <= len(chars) + 1:
            raise PositionOutOfRange(
                f"column {col} is out of range: line {line} has {len(chars)} characters "
                f"(columns are 1-based and count characters, so 1..{len(chars) + 1})"
            )
        return {"line": line - 1, "character": units(chars[: col - 1], encoding)}

    def word_at(self, line: int, col: int) -> str:
        """The identifier under 1-based (line, col), or "" (the position is assumed valid)."""
        chars = self.lines[line - 1] if 1 <= line <= len(self.lines) else ""
        return next((w.group() for w in _IDENT.finditer(chars) if w.start() <= col - 1 <= w.end()), "")

    def lsp_range(self, rng: dict, encoding: str) -> m.Range:
        """An LSP Range dict → a 1-based wire Range (clamped like `from_lsp`)."""
        line, col = self.from_lsp(rng.get("start", {}), encoding)
        end_line, end_col = self.from_lsp(rng.get("end", rng.get("start", {})), encoding)
        return m.Range(line, col, end_line, end_col)

    def from_lsp(self, pos: dict, encoding: str) -> tuple[int, int]:
        """An LSP Position dict → 1-based (line, col); clamps what lies past the end."""
        line0 = max(0, int(pos.get("line", 0)))
        if line0 >= len(self.lines):
            return len(self.lines), len(self.lines[-1]) + 1
        chars = self.lines[line0]
        return line0 + 1, chars_for_units(chars, int(pos.get("character", 0)), encoding) + 1


def units(s: str, encoding: str) -> int:
    """Length of `s` in the unit of `encoding`: utf-8 bytes, utf-16 code units, utf-32 code points."""
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    if encoding == "utf-32":
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def chars_for_units(line: str, count: int, encoding: str) -> int:
    """How many code points of `line` the first `count` units reach (clamped to the line).

    A count that lands inside a character (a byte in the middle of `∀`, or
    between the two halves of a surrogate pair) rounds up, past that
    character: never short of the count, and never a whole character past
    it.  HOL's own positions fall between characters; this is the one rule
    for any that do not, here and in the editor bridge (`holctl.lsp.positions`).
    """
    if encoding == "utf-32":
        return max(0, min(count, len(line)))
    used = 0
    for index, ch in enumerate(line):
        if used >= count:
            return index
        used += units(ch, encoding)
    return len(line)


def column(line: str, character: int, source: str, target: str) -> int:
    """`character` on `line`, counted in `source`'s units, in `target`'s (rounded as `chars_for_units`)."""
    if source == target:
        return character
    return units(line[:chars_for_units(line, character, source)], target)


class LineIndex:
    """Offsets (in characters) to 1-based lines and columns, in O(log n) each."""

    def __init__(self, text: str, starts: Sequence[int] | None = None) -> None:
        """`starts`: the lines' starts already computed (by `line_starts`, or in steps by `textinfo.starts_steps`)."""
        self._starts = line_starts(text) if starts is None else starts

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)

    def start(self, line: int) -> int:
        """The offset where 1-based `line` starts."""
        return self._starts[line - 1]

    def line_col(self, offset: int) -> tuple[int, int]:
        line = self.line(offset)
        return line, offset - self._starts[line - 1] + 1

    def offset(self, line: int, col: int) -> int:
        """The offset of 1-based (line, col), the position assumed valid."""
        return self._starts[line - 1] + col - 1
