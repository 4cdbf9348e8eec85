"""A text's proof blocks by pool name: their line spans, cheats and `local … end` blocks.

A view on `textinfo`, which computes them once per text.
"""

from __future__ import annotations

from holsrv.text import textinfo


class Blocks:
    """The text's proof blocks by pool name, with their line spans and cheats."""

    def __init__(self, text: str) -> None:
        info = textinfo.of(text)  # computed once per text
        self.index = info.index
        self.names = info.names
        self.lines = info.block_lines  # (first line, line of the body's start, last line), 1-based
        self.cheats = info.cheats
        self.owner = info.owner  # the proof a line belongs to, by bisection
        self.cheat_line = info.cheat_line  # the line of the first cheat in a proof's block
        self.locals = info.locals  # the `local … end` blocks, their lines and theorems
        self.text_lines = info.lines.lines
        self._info = info

    def declared_below(self, line: int) -> str | None:
        """The proof whose declaration follows `line` with only blank lines between."""
        return self._info.declared_below(line)
