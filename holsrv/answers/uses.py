"""uses: what a theorem's proof depends on, and which theorems of the open scripts mention it.

For a theorem HOL has stored, its dependencies are HOL's own record of the
proof (`Tag.dep_of`, see `lsp.theorydb`).  For one of this script's, they are
the names its proof text mentions that are theorems: this script's own, or
stored in a theory the script builds on.  Who uses a theorem is a text scan
of each open script's proofs, done once per text (`textinfo`).
"""

from __future__ import annotations

import re

from holsrv.answers import scope
from holsrv.answers.common import Context, compiled, note, opened
from holsrv.answers.lookups import _short
from holsrv.errors import BadRequest
from holsrv.lsp import theorydb
from holsrv.rpc import messages as m
from holsrv.server.session import Session
from holsrv.text import stepping, textinfo

_NAME = re.compile(r"(?:([A-Za-z][A-Za-z0-9_']*)\.)?([A-Za-z_][A-Za-z0-9_']*)")
# How long HOL is given for one database question.
DB_S = 15.0
# At most this many of a proof's words are asked about (a proof names far fewer theorems).
MAX_ASKED = 400
MAX_LISTED = 200
MAX_NAME = 200  # characters: no theorem's name is longer


def parse_name(name: str) -> tuple[str, str]:
    """(theory, name) of `NAME`, `thy.NAME` or `thyTheory.NAME`; theory "" when not given."""
    found = _NAME.fullmatch(name.strip()) if len(name) <= MAX_NAME else None
    if found is None:
        raise BadRequest(f"{name!r} is not a theorem name: give NAME, theory.NAME or theoryTheory.NAME "
                         "(e.g. ADD_COMM or arithmeticTheory.ADD_COMM)")
    return (found.group(1) or "").removesuffix("Theory"), found.group(2)


async def uses(ctx: Context, req: m.Uses, client: str) -> m.UsesResult:
    theory, name = parse_name(req.name)
    async with opened(ctx, req.file, client, req.wait) as (src, lease):
        session = lease.session
        await compiled(ctx, session, req.wait)
        info = textinfo.of(src.text)
        own = scope.own_theory(src.path, src.text)
        result = m.UsesResult(file=str(src.path), name=req.name, theory=theory, depends_from="", depends_on=[],
                              used_by=await _users(ctx, src, name), server=note(lease))
        covered = await scope.theories(ctx.ancestries, session, scope.ANCESTORS, src.path, src.text, info.ancestors)
        if theory in ("", own) and name in info.block_names:
            result.theory, result.depends_from = own, "text"
            result.depends_on, result.message = await _mentioned(session, info, src, name, covered)
            return result
        if not theory:
            theory = await _stored_in(session, name, covered)
            if not theory:
                result.message = (f"no theorem {name} is stored in the theories this script's HOL has loaded, "
                                  "nor declared in the script: check the name (search finds it by a fragment)")
                return result
        result.theory = theory
        try:
            named = await theorydb.ask(session.hol, theorydb.dependencies_code(theory, name), DB_S)
        except theorydb.DbError as err:
            result.message = f"HOL could not say what {theory}.{name} depends on: {err}"
            return result
        result.depends_from = "tags"
        result.depends_on = [_stored(word) for word in named]
        if not named:
            result.message = (f"HOL's tags for {theory}.{name} name no theorem: it was proved from "
                              "definitions and axioms alone, or its theory was built without dependency tracking")
        return result


async def _users(ctx: Context, src, name: str) -> list[m.UsedTheorem]:
    """The theorems of the open scripts (this one first) whose proof text mentions `name`."""
    texts = {src.path: src.text}
    for session in ctx.pool.serving():
        if session.alive and session.path not in texts and session.file.text:
            texts[session.path] = session.file.text
    found: list[m.UsedTheorem] = []
    for path, text in texts.items():
        info = await textinfo.prepare(text)  # kept with the text: a second call only looks up
        await stepping.sliced(info.users_steps())
        for user in info.users(name):
            if user != name and len(found) < MAX_LISTED:
                first = info.block_lines.get(user, (0, 0, 0))[0]
                found.append(m.UsedTheorem(name=user, path=_short(str(path), src, ""), line=first))
    return found


async def _mentioned(
    session: Session, info: textinfo.TextInfo, src, name: str, covered: list[str] | None
) -> tuple[list[m.UsedTheorem], str]:
    """The theorems `name`'s proof text mentions: the script's own, then those stored in its scope."""
    words = sorted(info.proof_words(name) - {name})
    mine = [m.UsedTheorem(name=w, path=_short(str(src.path), src, ""), line=info.block_lines[w][0])
            for w in words if w in info.block_lines]
    others = [w for w in words if w not in info.block_names and not w[0].isdigit()][:MAX_ASKED]
    if not others:
        return mine, ""
    if covered is None:
        return mine, ("the script names no Ancestors, so only its own theorems are recognised in the proof "
                      "text")
    try:
        stored = await theorydb.ask(session.hol, theorydb.stored_code(others, covered), DB_S)
    except theorydb.DbError as err:
        return mine, f"HOL could not say which other names are theorems: {err}"
    return mine + [_stored(word) for word in stored], ""


async def _stored_in(session: Session, name: str, covered: list[str] | None) -> str:
    """The theory storing theorem `name`: the first in the scope that does, else the first HOL names."""
    hits = [h for h in await session.hol.search(f'"{name}"', 500) if h.name == name]
    inside = [h for h in hits if covered is None or h.theory in covered]
    return next((h.theory for h in (*inside, *hits)), "")


def _stored(word: str) -> m.UsedTheorem:
    theory, _, name = word.partition(".") if "." in word else (word.partition("#")[0], "", word)
    return m.UsedTheorem(name=name, theory=theory)
