"""The theories a search covers: the script's own and its ancestors', named ones, or every loaded one.

A script's ancestors are the theories its `Ancestors` header (or its head's
`open …Theory`) names, and theirs, as HOL's theory graph has them
(`Theory.ancestry`, asked once per server and list of names).  A script that
names none builds on whatever its heap holds, so its scope is everything.
"""

from __future__ import annotations

import re
import weakref
from pathlib import Path

from holsrv.errors import BadRequest, HolsrvError
from holsrv.lsp import theorydb
from holsrv.server.session import Session

ANCESTORS, ALL = "ancestors", "all"
# How long HOL is given to list the ancestry.
ANCESTRY_S = 10.0
MAX_NAMED = 64
_THEORY_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_']*")
_HEADER = re.compile(r"^Theory\s+([A-Za-z][A-Za-z0-9_']*)", re.MULTILINE)


class Ancestries:
    """Each live server's answer to `Theory.ancestry`, by the names asked about."""

    def __init__(self) -> None:
        self._known: weakref.WeakKeyDictionary[Session, dict[tuple[str, ...], list[str]]] = (
            weakref.WeakKeyDictionary())

    async def of(self, session: Session, named: tuple[str, ...]) -> list[str]:
        """`named` and their ancestors; `named` alone when HOL could not say."""
        known = self._known.setdefault(session, {})
        if named not in known:
            try:
                found = await theorydb.ask(session.hol, theorydb.ancestry_code(list(named)), ANCESTRY_S)
            except (HolsrvError, theorydb.DbError):  # HOL could not say: the names alone, asked again next time
                return list(named)
            if set(found) == set(named):
                return found  # nothing above them was known (not loaded yet?): ask again next time
            known[named] = list(dict.fromkeys(found))
        return known[named]


def check(scope: str | list[str]) -> None:
    """Refuse a scope that is neither of the words nor a list of theory names."""
    if isinstance(scope, str):
        if scope not in (ANCESTORS, ALL):
            raise BadRequest(f"scope {scope!r} is not \"ancestors\", \"all\" or a list of theory names "
                             "(e.g. [\"list\", \"arithmetic\"])")
        return
    if not scope or len(scope) > MAX_NAMED:
        raise BadRequest(f"scope lists no theory, or more than {MAX_NAMED}: name 1..{MAX_NAMED} theories, "
                         "or pass \"ancestors\" or \"all\"")
    bad = [t for t in scope if not _THEORY_NAME.fullmatch(t.removesuffix("Theory"))]
    if bad:
        raise BadRequest(f"scope names {bad[0]!r}, which is not a theory name: write e.g. list or arithmetic")


def own_theory(path: Path, text: str) -> str:
    """The theory the script makes: its `Theory` header's name, else its file's (`fooScript.sml` → foo)."""
    header = _HEADER.search(text[:64 * 1024])
    return header.group(1) if header else path.name.removesuffix(".sml").removesuffix("Script")


async def theories(
    ancestries: Ancestries, session: Session, scope: str | list[str], path: Path, text: str, named: tuple[str, ...]
) -> list[str] | None:
    """The theories `scope` covers, in order; None for every loaded theory."""
    if isinstance(scope, list):
        return list(dict.fromkeys(t.removesuffix("Theory") for t in scope))
    if scope == ALL or not named:
        return None
    return [own_theory(path, text), *[t for t in await ancestries.of(session, named) if t != own_theory(path, text)]]
