"""Proofs that rest on a cheated theorem of an ancestor theory.

HOL's pool reports a proof `proved` when its tactics succeed, even when they
use a theorem that was itself proved by `cheat` in an ancestor theory; Holmake
then marks the dependant theory CHEATED (transcript `inherited-cheat`).  HOL
records the cheat in each theorem's tag, but in the server's session only the
ancestors' theorems, loaded from disk, carry their real tags
(`midTheory.dbl_even` → `(["DISK_THM", "cheat"], [])`); the file's own carry
a placeholder (`lsp_deferred`) until its theory is built.  So:

* once per server, after its first compile, HOL is asked (one `$/eval`,
  `holdep` 0, bounded: `query_code`) which theorems of the development's
  ancestor theories (those built in its directories: `ancestors.development`)
  carry `cheat`;
* the file's proofs that name one of them (qualified, `midTheory.dbl_even`,
  or a bare name no earlier theorem of the file takes) rest on it, and so do
  the file's proofs that name such a proof (`find`, pure).  That link is by
  name, from the text: the server cannot say what a proof really used.

`AncestorCheats` keeps each server's answer (weakly: it goes with the server).
"""

from __future__ import annotations

import asyncio
import logging
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from holsrv.errors import HolsrvError
from holsrv.lsp import theorydb
from holsrv.lsp.quirks import sml_string
from holsrv.rpc import messages as m
from holsrv.rpc.words import plural
from holsrv.server.session import Session
from holsrv.text import masking, textinfo

log = logging.getLogger(__name__)

MAX_THEORIES = 256  # ancestor theories asked about in one query
MAX_CHEATED = 10_000  # cheated theorems kept from one answer
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_']*(?:\.[A-Za-z_][A-Za-z0-9_']*)?")


def query_code(theories: list[str]) -> str:
    """The code printing `theory.name` for each theorem of `theories` whose tag carries the `cheat` oracle.

    `DB.thms` (postkernel/DB.sig), `Thm.tag` and `Tag.dest_tag` (prekernel: a
    tag's oracles, then its axioms), `Lib.mem`; a theory HOL does not have
    answers nothing rather than failing the whole query.
    """
    listed = ", ".join(sml_string(t) for t in theories[:MAX_THEORIES])
    return ('val _ = PolyML.print (String.concatWith " " (List.concat (map (fn t => List.mapPartial '
            '(fn (n, th) => if Lib.mem "cheat" (#1 (Tag.dest_tag (Thm.tag th))) then SOME (t ^ "." ^ n) '
            f'else NONE) (DB.thms t) handle _ => []) [{listed}]))' + theorydb.FAILED)


def parse(words: list[str]) -> frozenset[tuple[str, str]]:
    """(theory, theorem) pairs from the query's printed `theory.name` words."""
    pairs = (w.partition(".") for w in words[:MAX_CHEATED])
    return frozenset((thy, name) for thy, dot, name in pairs if dot and thy and name)


def find(text: str, cheated: frozenset[tuple[str, str]]) -> list[m.InheritedCheat]:
    """The proofs of `text` resting, by the names their bodies use, on `cheated` ancestor theorems."""
    if not cheated:
        return []
    by_bare: dict[str, list[str]] = {}
    for thy, name in sorted(cheated):
        by_bare.setdefault(name, []).append(f"{thy}Theory.{name}")
    info = textinfo.of(text)
    code = masking.blank_comments_and_strings(text)
    own: dict[str, tuple[list[str], list[str]]] = {}  # a proof of the file -> (rests on, through)
    found: list[m.InheritedCheat] = []
    declared: set[str] = set()
    for block in info.blocks:
        rests: list[str] = []
        through: list[str] = []
        for word in _NAME.findall(code[block.body_start:block.body_end]):
            if "." in word:
                thy, _, name = word.partition(".")
                if (thy.removesuffix("Theory"), name) in cheated:
                    rests.append(f"{thy.removesuffix('Theory')}Theory.{name}")
            elif word in own:
                rests += own[word][0]
                through.append(word)
            elif word in by_bare and word not in declared:
                rests += by_bare[word]
        declared.add(block.name)
        if rests:
            rests, through = list(dict.fromkeys(rests)), list(dict.fromkeys(through))
            own[block.name] = (rests, through)
            found.append(m.InheritedCheat(theorem=block.name, line=info.index.line(block.start),
                                          rests_on=rests, through=through))
        else:
            own.pop(block.name, None)  # a rebinding that no longer rests on one
    return found


def judged(result: m.DiagnosticsResult, found: list[m.InheritedCheat]) -> None:
    """`result` with `found`: never OK while a proof rests on a cheated ancestor theorem."""
    result.inherited_cheats = found
    if not found:
        return
    verb = "rests" if len(found) == 1 else "rest"
    said = (f"{plural(len(found), 'proof')} {verb} on cheated theorems of ancestor theories "
            f"({sentence(found)}), so Holmake would mark this theory CHEATED. HOL's pool says `proved`: "
            "the link is by the names the proofs use; prove those theorems in their own theory")
    if result.verdict == "OK":
        result.verdict, result.headline = "CHEATS", f"CHEATS: {said}"
    elif result.verdict == "CHEATS":
        result.headline += f"; and {said}"
    else:
        result.warnings.append(f"Also: {said}.")


def rows(found: list[m.InheritedCheat]) -> list[str]:
    """Status's words for `found`: `theorem: theory.thm, …`."""
    return [f"{f.theorem}: {', '.join(f.rests_on)}" for f in found]


def sentence(found: list[m.InheritedCheat]) -> str:
    """One line for a headline: which proofs rest on which cheated theorems, in which theories."""
    parts = []
    for f in found[:5]:
        via = f" (through {', '.join(f.through)})" if f.through else ""
        parts.append(f"{f.theorem} uses {', '.join(f.rests_on[:3])}{via}")
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    return "; ".join(parts) + more


@dataclass
class _Asked:
    theories: tuple[str, ...]
    task: asyncio.Task


class AncestorCheats:
    """Each server's answer to `query_code`, asked once (per list of theories) and kept with it."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s  # the eval's deadline
        self._asked: weakref.WeakKeyDictionary[Session, _Asked] = weakref.WeakKeyDictionary()
        # What the last diagnostics answer about each server's file found, for status.
        self.said: weakref.WeakKeyDictionary[Session, list[str]] = weakref.WeakKeyDictionary()
        self.queries = 0  # evals sent, for tests

    def marked(self, rows_: list[m.SessionStatus], current: Callable[[Path], Session | None]) -> list[m.SessionStatus]:
        """Status's `rows_` with the inherited cheats the last answer about each file found, each such
        proof counted in the tally as cheated, not proved, as the verdict counts it (one per row)."""
        out = []
        for row in rows_:
            session = current(Path(row.file))
            said = self.said.get(session) if session is not None else None
            if said:
                moved = min(len(said), row.tally.proved)
                tally = msgspec.structs.replace(row.tally, proved=row.tally.proved - moved,
                                                cheated=row.tally.cheated + moved)
                row = msgspec.structs.replace(row, inherited_cheats=said, tally=tally)
            out.append(row)
        return out

    def known(self, session: Session) -> frozenset[tuple[str, str]] | None:
        """The cheated ancestor theorems `session` has, if its answer is in (else None)."""
        asked = self._asked.get(session)
        if asked is None or not asked.task.done() or asked.task.cancelled() or asked.task.exception():
            return None
        return asked.task.result()

    async def of(self, session: Session, theories: list[str], wait_s: float) -> frozenset[tuple[str, str]] | None:
        """The cheated theorems of `theories` as `session` loaded them; None when HOL could not
        say within `wait_s` (the question goes on: a later call gets its answer)."""
        if not theories:
            return frozenset()
        key = tuple(theories[:MAX_THEORIES])
        asked = self._asked.get(session)
        if asked is None or asked.theories != key or (asked.task.done() and asked.task.exception()):
            if asked is not None and not asked.task.done():
                asked.task.cancel()
            task = asyncio.get_running_loop().create_task(self._ask(session, list(key)),
                                                          name=f"ancestor-cheats-{session.path.name}")
            task.add_done_callback(_retrieved)
            asked = self._asked[session] = _Asked(key, task)
        try:
            return await asyncio.wait_for(asyncio.shield(asked.task), wait_s)
        except (TimeoutError, HolsrvError, theorydb.DbError, asyncio.CancelledError) as err:
            if isinstance(err, asyncio.CancelledError) and not asked.task.cancelled():
                raise  # the call itself was cancelled
            return None

    async def _ask(self, session: Session, theories: list[str]) -> frozenset[tuple[str, str]]:
        self.queries += 1
        words = await theorydb.ask(session.hol, query_code(theories), self.timeout_s)
        cheated = parse(words)
        log.info("%s: %d cheated theorems in ancestors %s", session.path.name, len(cheated), ", ".join(theories))
        return cheated


def _retrieved(task: asyncio.Task) -> None:
    """A failed query is said by the answers that asked; never 'exception was never retrieved'."""
    if not task.cancelled():
        task.exception()
