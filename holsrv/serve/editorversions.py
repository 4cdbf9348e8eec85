"""The editor's own version of the text a HOL notification is about (LSP: a document's version is the client's).

The daemon numbers the texts it sends a HOL server itself, one counter per
server, and that server is shared: an agent's `try` sends candidate texts
and the file's text back, a replacement starts a new server whose counter
starts at 1 again.  HOL's `version` in a notification is therefore the
daemon's, not the editor's.  An editor told it would take diagnostics of
its v5 for a v9 it never had, or drop them as older than the buffer after
a replacement.  So each version an editor is told is mapped: HOL's version
-> the text the server was sent as it (`Session.digest_of`) -> the editor's
version of that exact text, if the editor had it; else the field is left
out (a trial's candidate, the disk's text while the buffer differs).  Pure
bookkeeping: no HOL, no sockets.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

# How many of an editor's recent texts keep their version: a notification is
# about a text a few edits old at most (a burst of keystrokes is synced once).
TEXTS_KEPT = 64


class EditorVersions:
    """One open document's texts (by content hash) and the editor's newest version of each."""

    def __init__(self) -> None:
        self._by_digest: OrderedDict[str, int] = OrderedDict()

    def had(self, digest: str, version: int | None) -> None:
        """The editor's buffer is the text of `digest` at `version` (None: the editor named none)."""
        if version is None:
            return
        # The newest version of a text wins: an undo back to an older text is that text's newest version.
        self._by_digest[digest] = version
        self._by_digest.move_to_end(digest)
        while len(self._by_digest) > TEXTS_KEPT:
            self._by_digest.popitem(last=False)

    def of(self, digest: str) -> int | None:
        """The editor's version of the text of `digest`, if the editor had that exact text."""
        return self._by_digest.get(digest) if digest else None

    def relabel(self, params: Any, digest_of: Callable[[object], str]) -> Any:
        """`params` of a notification to the editor, its `version` (HOL's, read through `digest_of`)
        replaced by the editor's version of that text, or left out when the editor had no such text.
        Params with no `version` are returned as they are; `params` itself is never changed."""
        if not isinstance(params, dict) or "version" not in params:
            return params
        relabelled = {k: v for k, v in params.items() if k != "version"}
        mine = self.of(digest_of(params["version"]))
        if mine is not None:
            relabelled["version"] = mine
        return relabelled
