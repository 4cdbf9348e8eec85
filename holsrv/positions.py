"""The one place where outside positions meet the HOL server's.

Outside (RPC, CLI, MCP): 1-based lines, 1-based columns in code points.
Inside (LSP): 0-based lines, `character` in the negotiated unit: bytes for
"utf-8", UTF-16 code units for "utf-16".  Lines are split on "\\n" only, as
the HOL server does.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Generator

from holsrv.errors import PositionOutOfRange
from holsrv.rpc import messages as m

_IDENT = re.compile(r"[A-Za-z0-9_']+")


# Steps of `split_steps` and `starts_steps`: about a millisecond each.
SPLIT_CHARS_PER_STEP = 256 * 1024
STARTS_LINES_PER_STEP = 8192


def split_steps(text: str) -> Generator[None, None, list[str]]:
    """`text.split("\n")`, in steps: a 4 MB script takes some 15 ms in one go."""
    lines: list[str] = []
    pos = 0
    while pos + SPLIT_CHARS_PER_STEP < len(text):
        end = text.find("\n", pos + SPLIT_CHARS_PER_STEP)
        if end < 0:
            break
        lines += text[pos:end].split("\n")
        pos = end + 1
        yield
    lines += text[pos:].split("\n")
    return lines


def starts_steps(lines: list[str]) -> Generator[None, None, list[int]]:
    """Where each line starts (in characters), in steps: see `LineIndex`."""
    starts = [0]
    last = len(lines) - 1  # the last line ends the text: nothing starts after it
    for at in range(0, last, STARTS_LINES_PER_STEP):
        chunk = lines[at:min(at + STARTS_LINES_PER_STEP, last)]
        summed = itertools.accumulate(map((1).__add__, map(len, chunk)), initial=starts[-1])
        next(summed)  # the chunk's `initial`: already there
        starts += summed
        yield
    return starts


class Text:
    """A file's text split into lines, with conversions in both directions."""

    def __init__(self, text: str, lines: list[str] | None = None) -> None:
        """`lines`: `text` already split (by `split_steps`)."""
        self.text = text
        self.lines = text.split("\n") if lines is None else lines

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
    """Length of `s` in the unit of `encoding`."""
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def chars_for_units(line: str, count: int, encoding: str) -> int:
    """How many code points of `line` the first `count` units cover (clamped)."""
    used = 0
    for index, ch in enumerate(line):
        if used >= count:
            return index
        used += units(ch, encoding)
    return len(line)


class LineIndex:
    """Offsets (in characters) to 1-based lines and columns, in O(log n) each."""

    def __init__(self, text: str, starts: list[int] | None = None) -> None:
        """`starts`: the lines' starts already computed (by `starts_steps`)."""
        # Each line's start is the previous one's plus its length and newline,
        # summed in C: a character loop costs 20 ms on a 300 KB script.
        if starts is None:
            starts = list(itertools.accumulate(map((1).__add__, map(len, text.split("\n")[:-1])), initial=0))
        self._starts = starts

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
