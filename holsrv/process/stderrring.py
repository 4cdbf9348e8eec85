"""A child's stderr, read as it comes and kept as a bounded ring of lines.

A server blocks if nobody reads its stderr (docs/protocol.md#launch), so it is
always read; what is kept is what an error message or `logs` shows.
"""

from __future__ import annotations

import asyncio
from collections import deque

MAX_STDERR_LINE = 4096  # characters of one stderr line kept


class StderrRing:
    """The last `lines` lines of a stream, each cut at MAX_STDERR_LINE, and a count of all."""

    def __init__(self, lines: int) -> None:
        self.tail: deque[str] = deque(maxlen=lines)
        self.seen = 0  # lines ever read, to cut out what one call caused

    async def drain(self, stream: asyncio.StreamReader) -> None:
        """Read `stream` to its end, keeping its lines."""
        # In chunks: readline() gives up on a line longer than its limit.
        partial, skipping = b"", False  # skipping: the rest of a line already kept, cut
        while chunk := await stream.read(1 << 16):
            *lines, partial = (partial + chunk).split(b"\n")
            for line in lines:
                if not skipping:
                    self._keep(line)
                skipping = False
            if len(partial) > MAX_STDERR_LINE:
                if not skipping:
                    self._keep(partial)
                partial, skipping = b"", True
        if partial and not skipping:
            self._keep(partial)

    def _keep(self, line: bytes) -> None:
        text = line[:MAX_STDERR_LINE].decode("utf-8", "replace")
        if len(line) > MAX_STDERR_LINE:
            text += " …(cut)"
        self.tail.append(text)
        self.seen += 1

    def since(self, mark: int) -> str:
        """What was read after `seen` was `mark` (as much as is kept)."""
        count = min(self.seen - mark, len(self.tail))
        return "\n".join(list(self.tail)[len(self.tail) - count:]) if count > 0 else ""

    def last(self, lines: int = 30) -> str:
        return "\n".join(list(self.tail)[-lines:])
