"""The text a HOL server has of its file: didOpen once, then whole-text didChange.

Whole-text changes cannot desync, and HOL resumes from the first changed
byte anyway.  The one edit shape HOL gets wrong, one that starts in a proof
body and runs past its QED, goes in two steps (`_send_statement_edit`).

The versions are ours, one counter per server: HOL's notifications name
the version they are about, and `digest_of` says which text that was, so
an editor can be told its own version of that text (`editorversions`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from holsrv.disk import files
from holsrv.text import editspan, stepping, textinfo
from holsrv.verdict.filestate import FileState

log = logging.getLogger(__name__)

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
WaitUntil = Callable[[Callable[[], bool], float], Awaitable[bool]]
# How many of the versions sent last keep their text's content hash: a
# notification names a version at most a few edits old (a compile's, or the latest).
VERSIONS_KEPT = 64


class TextSync:
    def __init__(
        self, file: FileState, notify: Notify, wait_until: WaitUntil, clock: Callable[[], float], spill_wait_s: float
    ) -> None:
        self.file = file
        self.data: bytes | None = None  # the bytes the server last got from us
        self._digest = ""  # their content hash, when the caller knew it
        self._notify = notify
        self._wait_until = wait_until
        self._clock = clock
        self._spill_wait_s = spill_wait_s
        self._lock = asyncio.Lock()
        # Version sent -> content hash of its text ("" when not known: a trial's candidate, an interim text).
        self._sent: OrderedDict[int, str] = OrderedDict()

    def digest_of(self, version: object) -> str:
        """The content hash of the text sent as `version` ("" if unknown, not one of the last sent,
        or a text no caller named: a trial's candidate, the interim text of a statement edit)."""
        return self._sent.get(version, "") if isinstance(version, int) else ""

    def _record(self, version: int, digest: str) -> None:
        self._sent[version] = digest
        self._sent.move_to_end(version)
        while len(self._sent) > VERSIONS_KEPT:
            self._sent.popitem(last=False)

    def export(self) -> dict:
        """The text the server has and the versions sent, for a successor daemon (`adopt`)."""
        return {"data": self.data, "digest": self._digest, "sent": [[v, d] for v, d in self._sent.items()]}

    def adopt(self, state: dict) -> None:
        """Go on from a predecessor's `export`: the server has that text, nothing is sent."""
        self.data, self._digest = state["data"], str(state["digest"])
        for version, digest in state["sent"]:
            self._record(int(version), str(digest))

    @property
    def digest(self) -> str:
        """The content hash of `data` (what answers about the server's text name)."""
        if not self._digest and self.data is not None:
            self._digest = files.content_hash(self.data)  # a trial's text: small
        return self._digest

    async def sync(self, data: bytes, text: str, digest: str = "") -> None:
        """Make the server's copy equal `text` (`data` decoded, whose content
        hash is `digest` if the caller has it)."""
        async with self._lock:
            if data == self.data:
                return
            # Both texts' facts are at hand before the sync reads them: a large
            # text computed here would be computed in one go, holding the loop.
            await textinfo.prepare(text)
            if self.data is None:
                await self._send_open(text, digest)
            else:
                await textinfo.prepare(self.file.text)
                span = await stepping.sliced(editspan.edit_span_steps(self.file.text, text))
                spill = textinfo.spilling_proof(self.file.text, text, span)
                if spill is not None:
                    await self._send_statement_edit(text, spill)
                await self._send_change(text, digest)
            self.data, self._digest = data, digest

    async def resync(self) -> None:
        """Send the whole text again (after HOL reported a desync, docs/protocol.md#desync)."""
        async with self._lock:
            if self.data is not None:
                log.warning("HOL server for %s reported a desync; resending the whole text", self.file.uri)
                await self._send_change(self.file.text, self.digest)

    async def _send_statement_edit(self, text: str, spill: textinfo.ProofBlock) -> None:
        """Send `text` with a space after `spill`'s keyword, and let HOL act on it.

        HOL would take an edit that starts in `spill`'s body as confined to
        it, and leave the checks of the proofs it runs into going on stale
        text.  An edit of the theorem's header is a statement edit: HOL drops
        every proof from there on, and a pass that follows cancelled proofs
        re-checks them all.  Its attempt must start before the real text
        goes, or the debounce folds the two edits into one.

        The mark is inside `spill`'s own declaration, never in the blank
        lines before it: HOL may count those as the end of the theorem
        above (the fake does), and then the interim pass drops that theorem
        too.  The real text, sent while that pass still runs, interrupts it
        after it elaborated the theorem above but before it handed it to the
        pool; the real text's pass resumes below it, and the theorem stays
        dropped (`cheated`) for good: an UNCHECKED verdict on a clean file.
        """
        seen = self.file.attempts
        mark = _after_keyword(text, spill.start)
        await self._send_change(text[:mark] + " " + text[mark:])
        if not await self._wait_until(lambda: self.file.attempts != seen, self._spill_wait_s):
            log.warning(
                "HOL did not act on the interim text for %s within %.1fs; the edit may be taken as "
                "confined to proof %s", self.file.uri, self._spill_wait_s, spill.name,
            )

    async def _send_open(self, text: str, digest: str) -> None:
        self.file.sent(1, text, self._clock())
        self._record(1, digest)
        await self._notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": self.file.uri, "languageId": "holscript", "version": 1, "text": text}},
        )

    async def _send_change(self, text: str, digest: str = "") -> None:
        version = self.file.version + 1
        self._record(version, digest)
        await textinfo.prepare(self.file.text)  # `sent` reads its blocks (an interim text's, too)
        span = await stepping.sliced(editspan.edit_span_steps(self.file.text, text))
        self.file.sent(version, text, self._clock(), span)
        await self._notify(
            "textDocument/didChange",
            {"textDocument": {"uri": self.file.uri, "version": version}, "contentChanges": [{"text": text}]},
        )


def _after_keyword(text: str, start: int) -> int:
    """Just past the declaration keyword (`Theorem`, `Triviality`, `Resume`) at `start`."""
    end = start
    while end < len(text) and text[end].isalpha():
        end += 1
    return end
