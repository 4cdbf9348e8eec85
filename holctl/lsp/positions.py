"""Columns between the editor's position encoding and the server's (utf-8 bytes or utf-16 units).

Every `{"line", "character"}` in a message is converted on the line of the
text it is about: the document named by the nearest enclosing `uri` (or
`targetUri`), else the message's own document.  A position in a file the
editor does not have open is left as it is (exact for lines of ASCII).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from holsrv.text.positions import column  # the one position codec, for the daemon's answers and the editor's

__all__ = ["Lines", "column", "convert"]

# The lines of an open document by its URI (None when it is not open).
Lines = Callable[[str], list[str] | None]


def convert(value: Any, uri: str, lines: Lines, source: str, target: str) -> Any:
    """`value` (a message's params or result) with its positions in `target`'s units."""
    if source == target:
        return value

    def line_of(doc: str, number: int) -> str | None:
        found = lines(doc)
        return found[number] if found is not None and 0 <= number < len(found) else None

    def walk(item: Any, doc: str) -> Any:
        if isinstance(item, list):
            return [walk(x, doc) for x in item]
        if not isinstance(item, dict):
            return item
        doc = next((item[k] for k in ("uri", "targetUri") if isinstance(item.get(k), str)), doc)
        line, character = item.get("line"), item.get("character")
        if isinstance(line, int) and isinstance(character, int) and not isinstance(character, bool):
            text = line_of(doc, line)
            if text is not None:
                item = {**item, "character": column(text, character, source, target)}
        return {k: walk(v, doc) if isinstance(v, dict | list) else v for k, v in item.items()}

    return walk(value, uri)
