"""Answers on a server without a backend: found out, then answered another way or said plainly.

An empty search, hover or definition is checked once per server against a
question whose answer is known (`lsp.services`).  Where the backend is
missing, theorem search goes through `$/eval` over the loaded theories
(`theorydb.find_code`), a definition of a theorem through that search, and
anything else gets a sentence saying this HOL cannot answer and what to use
instead: never an empty result presented as "nothing matches".
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

import msgspec

from holsrv.answers.states import PositionState
from holsrv.errors import HolsrvError, LspError
from holsrv.lsp import replies, services, theorydb
from holsrv.lsp.proofstates import ProofStatus
from holsrv.lsp.quirks import is_pending, is_unknown_method
from holsrv.lsp.services import Finding, Service, Support
from holsrv.rpc import messages as m
from holsrv.server.session import Session
from holsrv.text import masking, textinfo
from holsrv.verdict.filestate import Phase

# How long HOL is given to list the theorem database through eval.
EVAL_SEARCH_S = 30.0
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_']*")
# Words of a proof body that are not an SML identifier HOL can hover on.
_NOT_VALUES = frozenset({"by", "suffices_by", "THEN", "THENL", "THEN1", "ORELSE", "QED", "Proof"})


async def theorem_search(session: Session, query: str, cap: int, theories: list[str], names: list[str],
                         pattern: str) -> tuple[list[replies.SearchHit], str]:
    """`$/hol/search`'s matches for `query`, or, when this server has no search backend,
    those `DB` finds through eval; and "" or the sentence saying which was used.

    Raises `theorydb.DbError` (HOL's words) when the pattern does not parse there,
    `Unanswerable` when neither way works.
    """
    try:
        hits = await session.hol.search(query, cap)
    except LspError as err:
        if not is_unknown_method(err, "$/hol/search"):
            raise
        session.services.learn(Service.SEARCH, services.unknown_method(Service.SEARCH, "$/hol/search"))
        hits = []
    if hits:
        session.services.learn(Service.SEARCH, Finding(Support.WORKS, "it answered a search"))
        return hits, ""
    finding = await search_support(session)
    if finding.support is not Support.LACKS:
        return hits, ""
    try:
        said = await theorydb.printed(session.hol, theorydb.find_code(theories, names, pattern, cap), EVAL_SEARCH_S)
    except LspError as err:
        raise Unanswerable(f"{finding.why}; and the daemon's search through eval failed too ({err}). "
                           f"{_SEARCH_INSTEAD}") from None
    found = [replies.SearchHit(name=name, theory=thy, class_=cls, statement=statement)
             for thy, name, cls, statement in theorydb.found_rows(said)]
    return found, (f"{finding.why}; so these were found through eval (HOL's DB over the loaded theories), "
                   "without places in the sources")


_SEARCH_INSTEAD = ('Use eval with HOL\'s own database instead: `DB.find "FRAGMENT";` lists the theorems whose '
                   "name contains it, `DB.match [] ``PATTERN``;` those whose statement has a matching subterm.")


class Unanswerable(Exception):
    """This HOL cannot answer the question at all; `str` says so and what to use instead."""


async def search_support(session: Session) -> Finding:
    return await session.services.probe(
        Service.SEARCH, lambda: services.probe_search(lambda q, n, t: session.hol.search(q, n, t)))


async def symbols_support(session: Session) -> Finding:
    return await session.services.probe(
        Service.SYMBOLS, lambda: services.probe_symbols(lambda q, t: session.hol.workspace_symbol(q, t)))


async def workspace_symbols(session: Session, query: str) -> tuple[list[replies.WorkspaceSymbol], bool]:
    """`workspace/symbol`'s matches, and whether that server names ancestors' theorems too
    (it was found to, or it named one here); [] from a server that does not know the method."""
    try:
        found = await session.hol.workspace_symbol(query)
    except LspError as err:
        if not is_unknown_method(err, "workspace/symbol"):
            raise
        session.services.learn(Service.SYMBOLS, services.unknown_method(Service.SYMBOLS, "workspace/symbol"))
        return [], False
    if any(s.container_name != "this file" for s in found):
        session.services.learn(Service.SYMBOLS, Finding(Support.WORKS, "it named an ancestor's theorem"))
        return found, True
    return found, (await symbols_support(session)).support is not Support.LACKS


def probe_places(session: Session, text: str) -> tuple[tuple[int, int, str] | None, tuple[int, int, str] | None]:
    """Where hover and definition must answer, as (1-based line, column, what): the first word of
    a proof HOL has checked (a tactic, bound in HOL), and that theorem's own name."""
    info = textinfo.of(text)
    for name, block in info.named:
        entry = session.file.proofs.get(name)
        if (entry is None or entry.status not in (ProofStatus.PROVED, ProofStatus.FAILED)
                or session.phase != Phase.COMPLETED):
            continue
        # Comments and strings blanked (same length): a word there is nothing HOL could hover on.
        body = masking.blank_comments_and_strings(text[block.body_start:block.body_end])
        word = next((w for w in _IDENT.finditer(body) if w.group() not in _NOT_VALUES), None)
        named = re.compile(rf"\b{re.escape(block.name)}\b").search(text, block.start, block.body_start)
        if word is None or named is None:
            continue
        return _place(info, block.body_start + word.start(), f"`{word.group()}` in {name}'s proof"), \
            _place(info, named.start(), f"the theorem `{block.name}`'s own name")
    return None, None


def _place(info, offset: int, what: str) -> tuple[int, int, str]:
    line = info.text.count("\n", 0, offset)
    column = offset - (info.text.rfind("\n", 0, offset) + 1)
    return line + 1, column + 1, what


async def hover_support(session: Session, text: str, timeout: float) -> Finding:
    place, _ = probe_places(session, text)
    return await _probed(session, text, timeout, place, Service.HOVER, "textDocument/hover", session.hol.hover)


async def definition_support(session: Session, text: str, timeout: float) -> Finding:
    _, place = probe_places(session, text)
    return await _probed(session, text, timeout, place, Service.DEFINITION, "textDocument/definition",
                         session.hol.definition)


async def _probed(
    session: Session, text: str, timeout: float, place: tuple[int, int, str] | None, service: Service,
    method: str, ask: Callable[[dict, float], Awaitable[object]],
) -> Finding:
    """What `session` answers `method` (asked by `ask`) at `place` of `text`, once per server."""
    if place is None:
        return Finding(Support.UNKNOWN, "")
    line, column, what = place
    position = textinfo.of(text).lines.to_lsp(line, column, session.encoding)
    bound = min(timeout, services.PROBE_S)
    return await session.services.probe(service, lambda: services.probe_at(
        service, method, lambda: ask(position, bound), f"{what} (line {line})"))


HOVER_INSTEAD = ("For a theorem's statement use search with its \"NAME\" (or workspaceSymbol); for an SML value's "
                 "type, eval with the name alone (e.g. `simp;`); for where a name is defined, definition.")
DEFINITION_INSTEAD = ("For where a theorem is stored use search with its \"NAME\" (or workspaceSymbol); for an "
                      "SML value, eval can tell its type but not its place.")


async def lacked(session: Session, service: Service, text: str, timeout: float) -> Finding | None:
    """The finding when this server lacks `service` (hover or definition), else None: what an
    empty answer at an identifier means, asked once per server."""
    finding = session.services.found.get(service)
    if finding is None:
        probe = {Service.HOVER: hover_support, Service.DEFINITION: definition_support,
                 Service.GOALS: goals_support}.get(service, completion_support)
        finding = await probe(session, text, timeout)
    return finding if finding.support is Support.LACKS else None


GOALS_INSTEAD = ("Use try to test a tactic in place (HOL's verdict on it), and diagnostics for each proof's verdict "
                 "and the step that fails.")


async def goals_support(session: Session, text: str, timeout: float) -> Finding:
    """A goal state at the first tactic of a proof HOL checked (a finished check, so no walk of a
    tactic that loops): a full state, or `null` from a server without a goal-state walker."""
    place, _ = probe_places(session, text)
    if place is None:
        return Finding(Support.UNKNOWN, "")
    line, column, what = place
    position = textinfo.of(text).lines.to_lsp(line, column, session.encoding)
    bound = min(timeout, services.PROBE_S)
    method = "$/hol/goalState"

    async def ask() -> Finding:
        try:
            reply = await session.hol.goal_state(position, timeout=bound)
        except LspError as err:
            if is_unknown_method(err, method):
                return services.unknown_method(Service.GOALS, method)
            return Finding(Support.UNKNOWN, f"`{method}` failed: {err}")
        except HolsrvError as err:
            return Finding(Support.UNKNOWN, f"`{method}` got no answer: {err}")
        if is_pending(reply):
            return Finding(Support.UNKNOWN, f"`{method}` said pending")
        if reply is None:
            return Finding(Support.LACKS, f"this HOL server answers no goal state (`{method}` gives null) even at "
                                          f"{what} (line {line}): it has no goal-state walker")
        return Finding(Support.WORKS, f"`{method}` answered at {what}")
    return await session.services.probe(Service.GOALS, ask)


async def without_goals(session: Session, text: str, result: m.GoalStateResult, timeout: float) -> m.GoalStateResult:
    """A goal-state answer of "not in a proof" where the text has one: from a server found to
    have no goal-state walker, `unsupported` with what to use instead; else `result` as it is."""
    if not _in_proof(text, result.line, result.column):
        return result
    lacks = await lacked(session, Service.GOALS, text, timeout)
    if lacks is None:
        return result
    return msgspec.structs.replace(
        result, state=PositionState.UNSUPPORTED,
        message=f"This HOL cannot show goal states: {lacks.why}. Line {result.line} is inside a proof. "
                f"{GOALS_INSTEAD}")


def _in_proof(text: str, line: int, column: int | None) -> bool:
    """Whether (line, column), or some of the line with no column, is inside a proof's body."""
    info = textinfo.of(text)
    start = info.index.offset(line, column or 1)
    end = start if column is not None else start + len(info.lines.lines[line - 1])
    return any(block.body_start <= end and start <= block.body_end for block in info.blocks)


COMPLETION_INSTEAD = "Use workspaceSymbol with part of the name (theorems), or eval for an SML value."


async def completion_support(session: Session, text: str, timeout: float) -> Finding:
    """Completion of the first two letters of a tactic HOL checked: it must offer that tactic."""
    place, _ = probe_places(session, text)
    if place is None:
        return Finding(Support.UNKNOWN, "")
    line, column, what = place
    position = textinfo.of(text).lines.to_lsp(line, column + 2, session.encoding)
    bound = min(timeout, services.PROBE_S)

    async def items() -> list:
        return (await session.hol.completion(position, bound))[0]
    return await session.services.probe(Service.COMPLETION, lambda: services.probe_at(
        Service.COMPLETION, "textDocument/completion", items, f"the start of {what} (line {line})"))


async def theorems_starting(session: Session, prefix: str, cap: int) -> list[replies.SearchHit]:
    """The stored theorems whose name starts with `prefix` (any case), through whichever search works."""
    if len(prefix) < 2 or not _IDENT.fullmatch(prefix):
        return []
    try:
        hits, _ = await theorem_search(session, f'"{prefix}"', cap, [], [prefix], "")
    except (Unanswerable, theorydb.DbError, LspError):
        return []
    return [h for h in hits if h.name.lower().startswith(prefix.lower())]


def learn_unknown(session: Session, service: Service, method: str, err: LspError) -> Finding:
    """A request HOL refused as an unknown method: it lacks the service (re-raise anything else)."""
    if not is_unknown_method(err, method):
        raise err
    return session.services.learn(service, services.unknown_method(service, method))


async def theorem_named(session: Session, word: str) -> replies.SearchHit | None:
    """The stored theorem called `word` (`thy.NAME` or `NAME`), through whichever search works here."""
    theory, _, name = word.rpartition(".")
    theory = theory.removesuffix("Theory")
    if not name or not _IDENT.fullmatch(name):
        return None
    try:
        hits, _ = await theorem_search(session, f'"{name}"' + (f" '{theory}'" if theory else ""), 200,
                                       [theory] if theory else [], [name], "")
    except (Unanswerable, theorydb.DbError, LspError):
        return None
    return next((h for h in hits if h.name == name and (not theory or h.theory == theory)), None)
