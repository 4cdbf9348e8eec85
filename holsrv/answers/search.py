"""search: the theorem database, by name fragment, theory and term pattern (PROTOCOL.md §6.10).

HOL narrows by every selector of the query at once; the daemon pages its
answer and, when there is none, says why: a pattern HOL could not parse
(with HOL's own words, from parsing it alone), or no match, and which part
of the query to relax.
"""

from __future__ import annotations

import re

from holsrv.answers.common import Context, compiled, frontier_note, note, opened
from holsrv.answers.lookups import _one_line, _short
from holsrv.errors import BadRequest
from holsrv.lsp import replies
from holsrv.rpc import messages as m

MAX_PAGE = 200
# How many matches one search asks HOL for; reaching it means there may be more.
SEARCH_CAP = 2000
KINDS = {"Thm": "theorem", "Def": "definition", "Axm": "axiom"}
# Quoted runs, as HOL splits a query: 'theory' and "name fragment".
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
# How long the daemon gives HOL to parse a pattern alone, to say why it did not parse.
PARSE_CHECK_S = 10.0


def split(query: str) -> tuple[list[str], list[str], str]:
    """(theories, name fragments, term pattern) of a query, as HOL reads it."""
    quoted = _QUOTED.findall(query)
    pattern = " ".join(_QUOTED.sub(" ", query).split())
    return [q[1:-1] for q in quoted if q[0] == "'"], [q[1:-1] for q in quoted if q[0] == '"'], pattern


def _check(req: m.Search) -> None:
    query = req.query.strip()
    if not query:
        raise BadRequest("the query is empty: give a name fragment in double quotes (\"ADD_CO\"), a theory in "
                         "single quotes ('arithmetic'), a term pattern (x + y = y + x), or several")
    if _QUOTED.sub("", query).count('"') or _QUOTED.sub("", query).count("'") % 2:
        raise BadRequest(f"the query {query!r} has an unclosed quote: close each \"name fragment\" and 'theory'")
    if not 1 <= req.limit <= MAX_PAGE or req.page < 1:
        raise BadRequest(f"limit must be 1..{MAX_PAGE} and page 1 or more")


async def search(ctx: Context, req: m.Search, client: str) -> m.SearchResult:
    _check(req)
    async with opened(ctx, req.file, client, req.wait) as (src, lease):
        session = lease.session
        await compiled(ctx, session, req.wait)
        listed = await session.hol.search(req.query.strip(), SEARCH_CAP)
        found = grouped(listed)
        first = (req.page - 1) * req.limit
        page = found[first:first + req.limit]
        result = m.SearchResult(
            file=str(src.path), query=req.query, server=note(lease), note=frontier_note(session),
            hits=[_hit(h, also, src, session.holdir) for h, also in page], page=req.page, total=len(found),
            more=max(0, len(found) - first - len(page)), capped=len(listed) >= SEARCH_CAP,
        )
        if found and not page:
            pages = -(-len(found) // req.limit)
            result.empty_because = "past_end"
            result.message = f"page {req.page} is past the last page ({pages} of {req.limit} matches each)"
        elif not found:
            problem = None
            _, _, pattern = split(req.query)
            if pattern:
                problem = await session.hol.parse_problem(pattern, PARSE_CHECK_S)
            result.empty_because, result.message = _why_empty(req.query, pattern, problem)
        return result


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


def _why_empty(query: str, pattern: str, problem: str | None) -> tuple[str, str]:
    """(empty_because, message) for a search that matched nothing."""
    if problem:
        first = " ".join(problem.split())
        return "unparsable", (
            f"the term pattern {pattern!r} did not parse, so HOL matched nothing. HOL says: {first}. Fix the "
            "pattern (HOL syntax, e.g. x + y = y + x, with ASCII or Unicode operators), or search by name "
            "with a \"fragment\" in double quotes."
        )
    theories, names, _ = split(query)
    relax = []
    if theories:
        relax.append(f"drop the theory {', '.join(repr(t) for t in theories)} (search every loaded theory)")
    if names:
        relax.append("shorten the name fragment (" + ", ".join(f'"{n}"' for n in names) + ")")
    if pattern:
        relax.append("make the pattern more general: variables (x, y) instead of constants, or fewer "
                     "conjuncts; it matches subterms of a statement")
    relax.append("use fewer selectors: each one narrows the search")
    return "no_match", (
        f"nothing in the theories this file's HOL server has loaded matches {query.strip()!r}. To relax it: "
        + "; ".join(relax) + ". Only theories the script loads (its Ancestors) are searched."
    )
