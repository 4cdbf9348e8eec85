"""search: the theorem database, by name fragment, theory and term pattern (docs/protocol.md#search),
within a scope, of a kind, and by what the conclusion or a hypothesis contains.

HOL narrows by every selector of the query at once; the daemon keeps the
hits of the scope (`scope`: the script's ancestors unless asked otherwise)
and the kind, and, for a conclusion or hypothesis pattern, those HOL's
`DB.polarity_search` finds (`lsp.theorydb`).  It pages its answer and, when
there is none, says why: a pattern HOL could not parse (with HOL's own
words), matches only outside the scope (which theories), or no match, and
which part of the query to relax.
"""

from __future__ import annotations

import re
from collections import Counter

from holsrv.answers import lacking, scope
from holsrv.answers.common import Context, compiled, frontier_note, note, opened
from holsrv.answers.lookups import _one_line, _short
from holsrv.errors import BadRequest
from holsrv.lsp import replies, theorydb
from holsrv.rpc import messages as m
from holsrv.server.session import Session
from holsrv.text import textinfo

MAX_PAGE = 200
# How many matches one search asks HOL for; reaching it means there may be more.
SEARCH_CAP = 2000
KINDS = {"Thm": "theorem", "Def": "definition", "Axm": "axiom"}
ANY_KIND = ("", "any")
# Quoted runs, as HOL splits a query: 'theory' and "name fragment".
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
# How long the daemon gives HOL to parse a pattern alone, to say why it did not parse.
PARSE_CHECK_S = 10.0
# The longest conclusion or hypothesis pattern taken (each is sent to HOL as SML text).
MAX_PATTERN = 2000
# How long HOL is given for a conclusion or hypothesis search over its whole database.
POLARITY_S = 30.0


def split(query: str) -> tuple[list[str], list[str], str]:
    """(theories, name fragments, term pattern) of a query, as HOL reads it."""
    quoted = _QUOTED.findall(query)
    pattern = " ".join(_QUOTED.sub(" ", query).split())
    return [q[1:-1] for q in quoted if q[0] == "'"], [q[1:-1] for q in quoted if q[0] == '"'], pattern


def _check(req: m.Search) -> None:
    query = req.query.strip()
    if not query and not (req.conclusion.strip() or req.hypothesis.strip()):
        raise BadRequest("the query is empty: give a name fragment in double quotes (\"ADD_CO\"), a theory in "
                         "single quotes ('arithmetic'), a term pattern (x + y = y + x), or several; or a "
                         "conclusion or hypothesis pattern")
    if _QUOTED.sub("", query).count('"') or _QUOTED.sub("", query).count("'") % 2:
        raise BadRequest(f"the query {query!r} has an unclosed quote: close each \"name fragment\" and 'theory'")
    if not 1 <= req.limit <= MAX_PAGE or req.page < 1:
        raise BadRequest(f"limit must be 1..{MAX_PAGE} and page 1 or more")
    for side, pattern in (("conclusion", req.conclusion), ("hypothesis", req.hypothesis)):
        if len(pattern) > MAX_PATTERN:
            raise BadRequest(f"the {side} pattern is {len(pattern)} characters long; at most {MAX_PATTERN}: "
                             "a pattern names a term's shape, not a whole statement")
    if req.kind not in (*ANY_KIND, *KINDS.values()):
        raise BadRequest(f"kind {req.kind!r} is not one of theorem, definition, axiom or any")
    scope.check(req.scope)


def hol_query(req: m.Search) -> str:
    """What `$/hol/search` is asked: the query, with the conclusion's (else the hypothesis') pattern
    as its pattern when it has none; every statement that has it in its conclusion has it somewhere."""
    query = req.query.strip()
    if split(query)[2]:
        return query
    return " ".join(filter(None, [query, req.conclusion.strip() or req.hypothesis.strip()]))


async def search(ctx: Context, req: m.Search, client: str) -> m.SearchResult:
    _check(req)
    async with opened(ctx, req.file, client, req.wait) as (src, lease):
        session = lease.session
        await compiled(ctx, session, req.wait)
        query = hol_query(req)
        result = m.SearchResult(file=str(src.path), query=req.query, hits=[], server=note(lease),
                                note=frontier_note(session))
        theories, names, pattern = split(query)
        try:
            listed, result.via = await lacking.theorem_search(session, query, SEARCH_CAP, theories, names, pattern)
        except lacking.Unanswerable as err:
            result.empty_because, result.message = "unsupported", str(err)
            return result
        except theorydb.DbError as err:  # only through eval: HOL's own search says nothing of a bad pattern
            result.empty_because, result.message = _why_empty(req, pattern, str(err), _side(req))
            return result
        result.capped = len(listed) >= SEARCH_CAP
        hits = [h for h in listed if req.kind in ANY_KIND or KINDS.get(h.class_, "theorem") == req.kind]
        try:
            hits = await _polarity(session, req, hits)
        except _Unparsable as err:
            result.empty_because, result.message = _why_empty(req, err.pattern, err.problem, err.side)
            return result
        covered = await scope.theories(ctx.ancestries, session, req.scope, src.path, src.text,
                                       textinfo.of(src.text).ancestors)
        # A 'theory' the query names is searched whatever the scope: the caller asked for it.
        wanted = None if covered is None else {*covered, *split(query)[0]}
        inside = [h for h in hits if wanted is None or h.theory in wanted]
        result.outside = dict(Counter(h.theory for h in hits if wanted is not None and h.theory not in wanted))
        result.scope = covered or []
        found = grouped(inside)
        first = (req.page - 1) * req.limit
        page = found[first:first + req.limit]
        result.hits = [_hit(h, also, src, session.holdir) for h, also in page]
        result.page, result.total, result.more = req.page, len(found), max(0, len(found) - first - len(page))
        if not page:
            result.empty_because, result.message = await _empty(session, req, query, hits, len(found), result.outside)
        return result


async def _empty(
    session: Session, req: m.Search, query: str, hits: list[replies.SearchHit], found: int, outside: dict[str, int]
) -> tuple[str, str]:
    """(empty_because, message) for a page with no hits: past the end, outside the scope,
    a pattern HOL could not parse (HOL's words, from parsing it alone), or no match."""
    if found:
        pages = -(-found // req.limit)
        return "past_end", f"page {req.page} is past the last page ({pages} of {req.limit} matches each)"
    if outside:
        return "outside_scope", _outside(outside)
    problem = None
    pattern = split(query)[2]
    if pattern and not hits:
        problem = await session.hol.parse_problem(pattern, PARSE_CHECK_S)
    return _why_empty(req, pattern, problem, _side(req))


class _Unparsable(Exception):
    def __init__(self, side: str, pattern: str, problem: str) -> None:
        super().__init__(problem)
        self.side, self.pattern, self.problem = side, pattern, problem


def _side(req: m.Search) -> str:
    """Whose pattern `hol_query` gave `$/hol/search`: the query's ("term"), the conclusion's or the hypothesis'."""
    if split(req.query)[2]:
        return "term"
    return "conclusion" if req.conclusion.strip() else "hypothesis"


async def _polarity(session: Session, req: m.Search, hits: list[replies.SearchHit]) -> list[replies.SearchHit]:
    """`hits` whose conclusion (and hypothesis) contains the request's patterns, as HOL's
    `DB.polarity_search` finds them; all of them when there is no such pattern."""
    for conclusion, pattern in ((True, req.conclusion.strip()), (False, req.hypothesis.strip())):
        if pattern and hits:
            try:
                named = set(await theorydb.ask(session.hol, theorydb.polarity_code(conclusion, pattern), POLARITY_S))
            except theorydb.DbError as err:
                raise _Unparsable("conclusion" if conclusion else "hypothesis", pattern, str(err)) from None
            hits = [h for h in hits if f"{h.theory}.{h.name}" in named]
    return hits


def _outside(outside: dict[str, int]) -> str:
    listed = ", ".join(f"{theory} ({n})" for theory, n in sorted(outside.items(), key=lambda kv: -kv[1]))
    return (f"nothing in the theories this script builds on matches, but theories it does not build on do: "
            f"{listed}. To use one, add its theory to the script's Ancestors; to list them, search again "
            "with scope \"all\" (or the theory in the scope).")


def grouped(hits: list[replies.SearchHit]) -> list[tuple[replies.SearchHit, list[str]]]:
    """HOL's hits, one per theorem: a name with the identical statement in several theories
    (a re-export) is one hit, with the other theories in the order HOL named them."""
    groups: dict[tuple[str, str], tuple[replies.SearchHit, list[str]]] = {}
    for hit in hits:
        key = (hit.name, " ".join(hit.statement.split()))
        if key in groups:
            if hit.theory != groups[key][0].theory and hit.theory not in groups[key][1]:
                groups[key][1].append(hit.theory)
        else:
            groups[key] = (hit, [])
    return list(groups.values())


def _hit(hit: replies.SearchHit, also_in: list[str], src, holdir: str) -> m.SearchMatch:
    return m.SearchMatch(
        name=hit.name, theory=hit.theory, kind=KINDS.get(hit.class_, "theorem"), statement=_one_line(hit.statement),
        path=_short(replies.path_of(hit.uri), src, holdir) if hit.uri else "", line=hit.line, also_in=also_in,
    )


def _why_empty(req: m.Search, pattern: str, problem: str | None, side: str = "term") -> tuple[str, str]:
    """(empty_because, message) for a search that matched nothing; `side` names whose `pattern` it is."""
    if problem:
        first = " ".join(problem.split())
        return "unparsable", (
            f"the {side} pattern {pattern!r} did not parse, so HOL matched nothing. HOL says: {first}. Fix the "
            "pattern (HOL syntax, e.g. x + y = y + x, with ASCII or Unicode operators), or search by name "
            "with a \"fragment\" in double quotes."
        )
    theories, names, _ = split(req.query)
    relax = []
    if theories:
        relax.append(f"drop the theory {', '.join(repr(t) for t in theories)} (search every loaded theory)")
    if names:
        relax.append("shorten the name fragment (" + ", ".join(f'"{n}"' for n in names) + ")")
    if pattern:
        relax.append("make the pattern more general: variables (x, y) instead of constants, or fewer "
                     "conjuncts; it matches subterms of a statement")
    if req.conclusion.strip() or req.hypothesis.strip():
        relax.append("drop the conclusion or hypothesis condition (a plain pattern matches anywhere)")
    if req.kind not in ANY_KIND:
        relax.append(f"drop kind {req.kind!r}")
    relax.append("use fewer selectors: each one narrows the search")
    where = ("the theories this file's HOL server has loaded" if req.scope == scope.ALL
             else "the theories this search covers (see scope)")
    return "no_match", (
        f"nothing in {where} matches {req.query.strip()!r}. To relax it: " + "; ".join(relax)
        + ". Only theories the server has loaded (the script's Ancestors and theirs) can be searched."
    )
