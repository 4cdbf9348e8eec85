"""The statements check of `verify`, and diagnostics' note of a statement changed since HEAD.

The reference is the script as committed at a git revision (HEAD unless the
caller names another), read with a bounded `git show` (`gitrefs`), or a file
of pinned statements: HOL script text whose `Theorem NAME: statement`
(with or without `Proof … QED`) and `Definition NAME: … End` blocks are read
as the script's are, everything else ignored; a copy of the script as it
was is one.  Both sides are compared as HOL would read them (`statements`).

Diagnostics' note costs one `git show` per text and HEAD: kept by the
file's path, its content hash and the commit HEAD names (`head_key` reads
that from `.git` without a child), so a call about an unchanged text against
an unchanged HEAD runs no git at all.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from holsrv.answers.states import CheckStatus
from holsrv.disk import files, gitrefs
from holsrv.errors import BadRequest, HolsrvError
from holsrv.rpc import messages as m
from holsrv.text import statements, stepping, textinfo

MAX_NOTED = 20  # statements named in diagnostics' note, the rest counted
MAX_KEPT = 64  # texts whose note is kept


@dataclass
class Reference:
    """The statements to compare with, and what they are ("git HEAD (abc123…)"), or why there are none."""

    said: str
    found: dict[str, statements.Statement] | None
    why: str = ""


async def reference(path: Path, against: str, pinned: str, timeout_s: float) -> Reference:
    """The reference statements for the script at `path`: a pinned file, else the git revision
    `against` (HEAD by default).  BadRequest for a revision or pinned file that cannot be one."""
    if pinned:
        script = await stepping.sliced(files.Reader().read_steps(pinned))  # its own errors: missing, not UTF-8, …
        return Reference(f"the pinned statements in {script.path}", await _of(script.text))
    rev = against or "HEAD"
    if (why := gitrefs.bad_revision(rev)):
        raise BadRequest(why)
    got = await gitrefs.committed(path, rev, timeout_s)
    if got.text is None:
        if against and not got.not_committed and "git knows no commit" in got.why:
            raise BadRequest(f"{got.why}: give a revision of that repository (git log shows them)")
        return Reference("", None, got.why)
    return Reference(f"git {rev} ({got.commit[:12]})", await _of(got.text))


async def _of(text: str) -> dict[str, statements.Statement]:
    return await stepping.sliced(statements.steps(text))


async def check(text: str, ref: Reference) -> tuple[m.VerifyCheck, list[m.StatementChange]]:
    """The statements check of `text` against `ref`."""
    if ref.found is None:
        return m.VerifyCheck("statements", CheckStatus.UNCHECKED, f"Statements were not compared: {ref.why}. Pass "
                             "--against REV or --pinned FILE to name a reference."), []
    info = await textinfo.prepare(text)
    changes = statements.compare(ref.found, await _of(text), info.index)
    bad = [c for c in changes if not c.allowed]
    evidence = [said(c) for c in changes]
    if bad:
        names = ", ".join(f"{c.name} ({c.change})" for c in bad[:8]) + (" …" if len(bad) > 8 else "")
        return m.VerifyCheck("statements", CheckStatus.FAILED, f"Statements differ from {ref.said}: {names}.",
                             evidence), changes
    added = f"; {len(changes)} new, allowed" if changes else ""
    return m.VerifyCheck("statements", CheckStatus.PASSED, f"Every statement of {ref.said} is unchanged{added}.",
                         evidence), changes


def said(c: m.StatementChange) -> str:
    """One change as a line of evidence: the reference statement beside the current one."""
    where = f" (line {c.line})" if c.line else ""
    kind = "definition" if c.kind == "definition" else "theorem"
    if c.change == "added":
        return f"{kind} {c.name}{where} is new (allowed): {_one_line(c.current)}"
    if c.change == "removed":
        return f"{kind} {c.name} was removed; it stated: {_one_line(c.reference)}"
    if c.change == "renamed":
        return f"{kind} {c.name} was renamed {c.renamed_to}{where}: {_one_line(c.current)}"
    return f"{kind} {c.name}{where} changed: was {_one_line(c.reference)}  now {_one_line(c.current)}"


def _one_line(statement: str, limit: int = 300) -> str:
    flat = " ".join(statement.split())
    return flat if len(flat) <= limit else flat[:limit] + " …"


class HeadNotes:
    """Diagnostics' note of the statements that differ from HEAD's, kept per path, text and HEAD."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.computed = 0  # git reads made, for tests
        self._kept: OrderedDict[tuple[str, str, str], list[str]] = OrderedDict()
        self._pending: dict[tuple[str, str, str], asyncio.Future[list[str]]] = {}

    async def notes(self, path: Path, content: str, text: str) -> list[str]:
        """One line per theorem or definition whose statement differs from HEAD's ([] outside git)."""
        head = gitrefs.head_key(path.parent)
        if head is None or head.startswith("unborn"):
            return []  # not in git (or nothing committed): nothing to note, and no child run to find out
        key = (str(path), content, head)
        if key in self._kept:
            self._kept.move_to_end(key)
            return self._kept[key]
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = asyncio.ensure_future(self._compute(path, text))
            pending.add_done_callback(lambda _: self._pending.pop(key, None))
        lines = await asyncio.shield(pending)
        self._kept[key] = lines
        while len(self._kept) > MAX_KEPT:
            self._kept.popitem(last=False)
        return lines

    async def close(self) -> None:
        """Cancel the git reads in progress and wait for them (the daemon is stopping)."""
        pending = list(self._pending.values())
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _compute(self, path: Path, text: str) -> list[str]:
        self.computed += 1
        with contextlib.suppress(HolsrvError):
            ref = await reference(path, "", "", self.timeout_s)
            if ref.found is None:
                return []
            info = await textinfo.prepare(text)
            changes = [c for c in statements.compare(ref.found, await _of(text), info.index) if not c.allowed]
            lines = [f"STATEMENT CHANGED since {ref.said}: {said(c)}. `verify` will name it." for c in
                     changes[:MAX_NOTED]]
            if len(changes) > MAX_NOTED:
                lines.append(f"… and {len(changes) - MAX_NOTED} more statements differ from {ref.said}.")
            return lines
        return []
