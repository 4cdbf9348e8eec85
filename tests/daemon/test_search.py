"""search: the theorem database by name fragment, theory and term pattern, paged, and why it found nothing."""

from __future__ import annotations

import pytest

from holctl.render import render
from holsrv import errors
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT

# A script on rich_list, which builds on list: both theories are in its scope.
RICH_LIST_SCRIPT = GOOD_SCRIPT.replace("Ancestors arithmetic", "Ancestors rich_list")


def test_search_pages_name_matches_with_total_and_more(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    first = daemon.call(m.Search(path, '"ADD_"', limit=2))
    assert [h.name for h in first.hits] == ["ADD_COMM", "ADD_ASSOC"]
    assert (first.total, first.more, first.page) == (5, 3, 1)
    assert first.hits[0].kind == "theorem" and first.hits[0].theory == "arithmetic"
    assert first.hits[0].statement == "⊢ ∀m n. m + n = n + m"
    assert first.hits[0].path == "$HOLDIR/src/num/theories/arithmeticScript.sml" and first.hits[0].line == 310
    assert "3 more: ask for page 2" in render(first)
    last = daemon.call(m.Search(path, '"ADD_"', limit=2, page=3))
    assert [h.name for h in last.hits] == ["ADD_DEF"] and last.hits[0].kind == "definition"
    assert last.more == 0
    past = daemon.call(m.Search(path, '"ADD_"', limit=2, page=4))
    assert past.hits == [] and past.empty_because == "past_end"
    assert "past the last page (3" in render(past)


def test_a_theorem_re_exported_with_the_same_statement_is_one_hit_naming_every_theory(daemon, write_script):
    path = str(write_script(RICH_LIST_SCRIPT))
    # The fake's database has REVERSE_REVERSE in list and, re-exported, in rich_list (as DB.find shows).
    reply = daemon.call(m.Search(path, '"REVERSE_REVERSE"'))
    assert [(h.name, h.theory, h.also_in) for h in reply.hits] == [("REVERSE_REVERSE", "list", ["rich_list"])]
    assert reply.total == 1 and reply.more == 0
    assert "(theorem, list, $HOLDIR/src/list/src/listScript.sml:2000; also in rich_list, the same statement)" \
        in render(reply)
    alone = daemon.call(m.Search(path, "'rich_list' \"REVERSE_REVERSE\""))
    assert [(h.theory, h.also_in) for h in alone.hits] == [("rich_list", [])]


def test_by_default_search_leaves_out_theories_the_script_does_not_build_on_and_says_where_they_are(
        daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))  # Ancestors arithmetic: list and rich_list are not below it
    reply = daemon.call(m.Search(path, '"REVERSE_REVERSE"'))
    assert reply.hits == [] and reply.empty_because == "outside_scope"
    assert reply.outside == {"list": 1, "rich_list": 1}
    assert "list (1)" in reply.message and "Ancestors" in reply.message and 'scope "all"' in reply.message
    # What HOL says arithmetic builds on is in scope: bool's CONJ_COMM, though the script names only arithmetic.
    names = [h.name for h in daemon.call(m.Search(path, '"COMM"', limit=50)).hits]
    assert names == ["ADD_COMM", "MULT_COMM", "CONJ_COMM", "DISJ_COMM"]
    mixed = daemon.call(m.Search(path, '"_THM"', limit=50))  # combin's I_THM is in; quantHeuristics' are not
    assert "I_THM" in [h.name for h in mixed.hits] and set(mixed.outside) == {"quantHeuristics"}
    assert "also matching in theories this script does not build on: quantHeuristics (" in render(mixed)
    everything = daemon.call(m.Search(path, '"REVERSE_REVERSE"', scope="all"))
    assert [(h.theory, h.also_in) for h in everything.hits] == [("list", ["rich_list"])] and everything.scope == []
    asked = daemon.call(m.Search(path, "'list' \"REVERSE_REVERSE\""))  # a theory the query names is searched
    assert [h.theory for h in asked.hits] == ["list"]


def test_a_script_that_names_no_ancestors_searches_everything_its_heap_holds(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT.replace("Ancestors arithmetic\n", "")))
    reply = daemon.call(m.Search(path, '"REVERSE_REVERSE"'))
    assert [(h.theory, h.also_in) for h in reply.hits] == [("list", ["rich_list"])] and reply.scope == []


def test_a_scope_of_named_theories_searches_those_alone(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    reply = daemon.call(m.Search(path, '"COMM"', scope=["boolTheory"], limit=50))
    assert [h.name for h in reply.hits] == ["CONJ_COMM", "DISJ_COMM"] and reply.scope == ["bool"]
    both = daemon.call(m.Search(path, '"COMM"', scope=["bool", "arithmetic"], limit=50))
    assert {h.theory for h in both.hits} == {"bool", "arithmetic"}


def test_kind_keeps_only_theorems_definitions_or_axioms(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    definitions = daemon.call(m.Search(path, '"ADD_"', kind="definition"))
    assert [(h.name, h.kind) for h in definitions.hits] == [("ADD_DEF", "definition")]
    theorems = daemon.call(m.Search(path, '"ADD_"', kind="theorem"))
    assert [h.name for h in theorems.hits] == ["ADD_COMM", "ADD_ASSOC", "ADD_0", "ADD_CLAUSES"]
    assert daemon.call(m.Search(path, '"ADD_"', kind="any")).total == 5
    none = daemon.call(m.Search(path, '"ADD_"', kind="axiom"))
    assert none.hits == [] and "drop kind 'axiom'" in none.message


def test_a_conclusion_pattern_finds_theorems_concluding_it_and_not_those_assuming_it(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    # SUB_ADD is ∀m n. n ≤ m ⇒ m − n + n = m: ≤ only in its hypothesis.
    concluding = daemon.call(m.Search(path, "", conclusion="x <= y", limit=50))
    assert [h.name for h in concluding.hits] == ["LESS_EQ_REFL", "LESS_EQ_ADD"]
    anywhere = daemon.call(m.Search(path, "x <= y", limit=50))
    assert "SUB_ADD" in [h.name for h in anywhere.hits]  # a plain pattern matches anywhere


def test_a_hypothesis_pattern_finds_theorems_assuming_it_and_not_those_concluding_it(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    assuming = daemon.call(m.Search(path, "'arithmetic'", hypothesis="x <= y", limit=50))
    assert [h.name for h in assuming.hits] == ["SUB_ADD"]
    both = daemon.call(m.Search(path, "", conclusion="x + y = z", hypothesis="x <= y", limit=50))
    assert [h.name for h in both.hits] == ["SUB_ADD"]
    neither = daemon.call(m.Search(path, "", conclusion="x * y", hypothesis="x <= y"))
    assert neither.hits == [] and "drop the conclusion or hypothesis condition" in neither.message


def test_an_unparsable_conclusion_pattern_says_so(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    reply = daemon.call(m.Search(path, '"ADD"', conclusion="x + + y"))
    assert reply.hits == [] and reply.empty_because == "unparsable"
    assert "conclusion pattern 'x + + y' did not parse" in reply.message and "operand is missing" in reply.message
    # With a pattern of the query's own, HOL's search finds candidates and the conclusion check says it.
    alongside = daemon.call(m.Search(path, "'arithmetic' x + y", hypothesis="x + + y"))
    assert alongside.hits == [] and alongside.empty_because == "unparsable"
    assert "hypothesis pattern 'x + + y' did not parse" in alongside.message
    assert "operand is missing" in alongside.message


def test_an_overlong_conclusion_pattern_is_refused(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    with pytest.raises(errors.BadRequest, match="at most 2000"):
        daemon.call(m.Search(path, "", conclusion="x + " * 1000 + "y"))


@pytest.mark.parametrize("scope, said", [("mine", "is not \"ancestors\""), ([], "lists no theory"),
                                         (["no such"], "not a theory name")])
def test_a_bad_scope_is_refused_with_what_to_write(daemon, write_script, scope, said):
    path = str(write_script(GOOD_SCRIPT))
    with pytest.raises(errors.BadRequest, match=said):
        daemon.call(m.Search(path, '"ADD"', scope=scope))


def test_selectors_narrow_each_other_theory_name_and_term_pattern(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    names = lambda query: [h.name for h in daemon.call(m.Search(path, query, limit=50)).hits]  # noqa: E731
    assert "CONJ_COMM" in names('"COMM"') and "ADD_COMM" in names('"COMM"')
    assert names("'arithmetic' \"COMM\"") == ["ADD_COMM", "MULT_COMM"]
    # A term pattern: its variables match any term; here commutativity of +.
    assert names("'arithmetic' x + y = y + x") == ["ADD_COMM"]
    assert names('"MULT" x + y = y + x') == []


def test_an_unparsable_pattern_says_so_with_hols_message(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    reply = daemon.call(m.Search(path, "'arithmetic' x + + y"))
    assert reply.hits == [] and reply.empty_because == "unparsable"
    text = render(reply)
    assert "did not parse" in text and "HOL says: at Parse.Term: parse error: an operand is missing" in text
    assert '"fragment"' in text  # how to go on: search by name


def test_no_match_says_which_selectors_to_relax(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    reply = daemon.call(m.Search(path, "'list' \"ZAP\" x * y"))
    assert reply.hits == [] and reply.empty_because == "no_match"
    assert "drop the theory 'list'" in reply.message
    assert 'shorten the name fragment ("ZAP")' in reply.message
    assert "make the pattern more general" in reply.message
    assert reply.freshness is not None and reply.freshness.content_hash


@pytest.mark.parametrize("query, said", [("", "the query is empty"), ('"ADD', "unclosed quote")])
def test_a_bad_query_is_refused_with_what_to_write(daemon, write_script, query, said):
    path = str(write_script(GOOD_SCRIPT))
    with pytest.raises(errors.BadRequest, match=said):
        daemon.call(m.Search(path, query))
