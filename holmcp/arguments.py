"""What an agent passes to a tool, checked before the tool runs, with messages it can act on.

Agents bring habits from other tools: `col` or `character` for `column`,
`uri` for `file`, `timeout` for `wait`.  An unknown argument is refused,
naming the accepted ones and the one probably meant, rather than dropped
(a dropped `wait_s` would run with the default wait and nobody would know).
Type and range errors get one line per argument, without pydantic's
documentation links.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import ValidationError

from holsrv.errors import BadRequest

# Names other tools use for ours.  Several targets: the first this tool takes wins.
ALIASES: dict[str, tuple[str, ...]] = {
    "col": ("column",),
    "character": ("column",),
    "char": ("column",),
    "column_number": ("column",),
    "uri": ("file",),
    "path": ("file",),
    "file_path": ("file",),
    "filepath": ("file",),
    "filename": ("file",),
    "script": ("file",),
    "line_number": ("line",),
    "lineno": ("line",),
    "row": ("line",),
    "timeout": ("wait",),
    "wait_s": ("wait", "timeout"),
    "wait_seconds": ("wait", "timeout"),
    "timeout_s": ("timeout", "wait"),
    "wait": ("timeout",),
    "name": ("query",),
    "pattern": ("query",),
    "q": ("query",),
    "symbol": ("query",),
    "sml": ("code",),
    "expr": ("code",),
    "expression": ("code",),
    "source": ("code",),
    "heap_mb": ("max_heap_mb",),
    "max_heap": ("max_heap_mb",),
    "maxheap": ("max_heap_mb",),
    "page_size": ("limit",),
    "pagesize": ("limit",),
    "per_page": ("limit",),
    "max_results": ("limit",),
    "candidates": ("tactics",),
    "tactic": ("tactics",),
    "col1": ("column1",),
    "col2": ("column2",),
}


def refuse_unknown(tool: str, arguments: Mapping[str, Any], accepted: Collection[str]) -> None:
    """Raise BadRequest naming every argument `tool` does not take, and what was probably meant."""
    unknown = [name for name in arguments if name not in accepted]
    if not unknown:
        return
    parts = []
    for name in unknown:
        meant = suggestion(name, accepted)
        parts.append(f"`{name}`" + (f" (did you mean `{meant}`?)" if meant else ""))
    takes = f"It takes: {', '.join(accepted)}" if accepted else "It takes no arguments"
    raise BadRequest(f"{tool} does not take {', '.join(parts)}. {takes}. Nothing was run.")


def suggestion(name: str, accepted: Collection[str]) -> str | None:
    """The accepted argument `name` probably stands for, if any."""
    key = name.lower().replace("-", "_")
    for target in ALIASES.get(key, ()):
        if target in accepted:
            return target
    close = difflib.get_close_matches(key, list(accepted), n=1, cutoff=0.6)
    return close[0] if close else None


def invalid(tool: str, err: ValidationError, accepted: Collection[str]) -> BadRequest:
    """A pydantic validation error as one short line per argument, no documentation links."""
    problems = []
    for e in err.errors(include_url=False):
        where = ".".join(str(part) for part in e["loc"]) or "arguments"
        if e["type"] == "missing":
            problems.append(f"`{where}` is required")
        else:
            problems.append(f"`{where}`: {e['msg']} (got {e['input']!r})")
    return BadRequest(f"{tool}: {'; '.join(problems)}. It takes: {', '.join(accepted) or 'no arguments'}.")


def file_path(value: str) -> str:
    """A `file://` URI as the local path it names (percent-decoded); anything else unchanged."""
    if not value.startswith("file:"):
        return value
    parts = urlsplit(value)
    if parts.netloc not in ("", "localhost"):
        raise BadRequest(f"{value!r} names a file on another host ({parts.netloc}); give a local path")
    return unquote(parts.path)
