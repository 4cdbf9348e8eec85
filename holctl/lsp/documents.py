"""The editor's open documents as `holctl lsp` keeps them: text, edits applied, and their server's terms.

Editors send ranged changes (the capabilities say incremental, as
`hol lsp`'s do); the daemon takes whole texts, so each edit is applied
here, in the editor's position encoding, and the whole text goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from holctl.lsp.positions import column


@dataclass
class Document:
    uri: str  # as the editor names it
    text: str
    server_uri: str = ""  # as the server names it (once the daemon said)
    encoding: str = ""  # the server's position encoding (once the daemon said)
    sent: str | None = None  # the text last sent to the daemon
    version: int | None = None  # the editor's version of `text` (LSP's), sent with it to the daemon
    _lines: list[str] | None = field(default=None, repr=False, compare=False)  # `text` split, once per text

    def lines(self) -> list[str]:
        """The text's lines, split once per text: every message with positions and every
        ranged edit reads them."""
        if self._lines is None:
            self._lines = self.text.split("\n")
        return self._lines

    def apply(self, changes: list[dict[str, Any]], encoding: str) -> None:
        """Apply an editor's `contentChanges`, positions counted in `encoding`."""
        for change in changes:
            text = str(change.get("text", ""))
            edit = change.get("range")
            if not isinstance(edit, dict):
                self.text, self._lines = text, None
                continue
            start, end = self._offset(edit.get("start"), encoding), self._offset(edit.get("end"), encoding)
            self.text, self._lines = self.text[:start] + text + self.text[max(start, end):], None

    def _offset(self, position: Any, encoding: str) -> int:
        """The character offset in the text of an LSP position (clamped, as HOL clamps it)."""
        position = position if isinstance(position, dict) else {}
        line, character = int(position.get("line", 0)), int(position.get("character", 0))
        lines = self.lines()
        if line >= len(lines):
            return len(self.text)
        before = sum(len(x) + 1 for x in lines[:line])
        # Units of `encoding` → characters: `column` to utf-32 counts characters.
        return before + min(len(lines[line]), column(lines[line], character, encoding, "utf-32"))


class Documents:
    """The editor's open documents, by the editor's URI; the server's URIs map back."""

    def __init__(self) -> None:
        self.by_uri: dict[str, Document] = {}

    def open(self, uri: str, text: str, version: int | None = None) -> Document:
        doc = self.by_uri[uri] = Document(uri, text, version=version)
        return doc

    def close(self, uri: str) -> Document | None:
        return self.by_uri.pop(uri, None)

    def get(self, uri: str) -> Document | None:
        return self.by_uri.get(uri)

    def lines(self, uri: str) -> list[str] | None:
        """The lines of the document the editor or the server calls `uri`."""
        doc = self.by_uri.get(uri) or self.by_server_uri(uri)
        return doc.lines() if doc is not None else None

    def by_server_uri(self, server_uri: str) -> Document | None:
        return next((d for d in self.by_uri.values() if d.server_uri == server_uri), None)

    def to_editor(self, uri: str) -> str:
        doc = self.by_server_uri(uri)
        return doc.uri if doc is not None else uri

    def to_server(self, uri: str) -> str:
        doc = self.by_uri.get(uri)
        return doc.server_uri if doc is not None and doc.server_uri else uri
