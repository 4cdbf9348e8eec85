"""A HOL server without a search, hover, definition or symbols backend: the daemon finds out,
answers another way, or says plainly that this HOL cannot; never "nothing matches"."""

from __future__ import annotations

import pytest

from holctl.render import render
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT

# A script on list, whose FILTER_APPEND_DISTRIB the search missed and DB.find found.
LIST_SCRIPT = GOOD_SCRIPT.replace("Ancestors arithmetic", "Ancestors list")


@pytest.fixture
def lacking(monkeypatch, daemon_factory):
    """A daemon whose fake HOL servers lack the backends named: `lacking("search,hover")`."""
    def make(services: str, **overrides):
        monkeypatch.setenv("FAKE_HOL_LACKS", services)
        return daemon_factory(**overrides)
    return make


@pytest.mark.parametrize("how", ["search", "search:unknown"])
def test_search_on_a_hol_without_a_search_backend_finds_theorems_through_eval(lacking, write_script, how):
    daemon = lacking(how)
    path = str(write_script(LIST_SCRIPT))
    reply = daemon.call(m.Search(path, '"FILTER"'))
    assert [(h.theory, h.name) for h in reply.hits] == [("list", "FILTER_APPEND_DISTRIB")]
    assert reply.hits[0].statement == "⊢ ∀P L M. FILTER P (L ++ M) = FILTER P L ++ FILTER P M"
    assert "no search backend" in reply.via and "through eval" in reply.via
    assert "through eval" in render(reply)
    # A term pattern goes through DB.match, and the scope still applies.
    pattern = daemon.call(m.Search(path, "FILTER P (L ++ M)"))
    assert [h.name for h in pattern.hits] == ["FILTER_APPEND_DISTRIB"]
    status = daemon.call(m.Status())
    assert status.sessions[0].services == {"search": "lacking"}
    assert "search lacking; what it lacks is answered through eval" in render(status)


def test_search_that_finds_nothing_on_a_hol_with_a_search_backend_still_says_no_match(daemon, write_script):
    path = str(write_script(LIST_SCRIPT))
    reply = daemon.call(m.Search(path, '"NO_SUCH_NAME_ANYWHERE"'))
    assert reply.empty_because == "no_match" and reply.via == ""
    assert daemon.call(m.Status()).sessions[0].services == {"search": "works"}


def test_search_says_this_hol_cannot_search_when_eval_cannot_either(lacking, write_script):
    daemon = lacking("search,eval:unknown")
    path = str(write_script(LIST_SCRIPT))
    reply = daemon.call(m.Search(path, '"FILTER"'))
    assert reply.hits == [] and reply.empty_because == "unsupported"
    assert "no search backend" in reply.message and 'DB.find "FRAGMENT"' in reply.message
    assert "nothing in" not in render(reply)


def test_workspace_symbol_names_ancestors_through_eval_when_hol_names_only_this_file(lacking, write_script):
    daemon = lacking("search,symbols")
    path = str(write_script(LIST_SCRIPT))
    reply = daemon.call(m.WorkspaceSymbol(path, "FILTER"))
    assert [(s.name, s.theory) for s in reply.symbols] == [("FILTER_APPEND_DISTRIB", "listTheory")]
    assert "through eval" in reply.note
    own = daemon.call(m.WorkspaceSymbol(path, "add0"))
    assert [s.name for s in own.symbols] == ["add0"]


@pytest.mark.parametrize("how", ["hover", "hover:unknown"])
def test_hover_on_a_hol_without_hover_says_so_and_not_nothing_to_show(lacking, write_script, how):
    daemon = lacking(how)
    path = str(write_script(GOOD_SCRIPT))
    daemon.call(m.Diagnostics(path))
    reply = daemon.call(m.Hover(path, 7, 14))  # `simp` in add0's proof
    assert reply.text is None
    assert reply.message.startswith("This HOL cannot hover:") and "eval" in reply.message
    shown = render(reply)
    assert "nothing to show here" not in shown and "This HOL cannot hover" in shown
    assert daemon.call(m.Status()).sessions[0].services["hover"] == "lacking"


def test_hover_on_a_theorem_name_without_hover_gives_the_database_s_statement(lacking, write_script):
    daemon = lacking("hover")
    path = write_script(GOOD_SCRIPT.replace("simp[]\nQED\n\nTheorem conj", "simp[ADD_COMM]\nQED\n\nTheorem conj"))
    daemon.call(m.Diagnostics(str(path)))
    reply = daemon.call(m.Hover(str(path), 7, 20))  # ADD_COMM
    assert reply.text == "arithmetic.ADD_COMM: ⊢ ∀m n. m + n = n + m"
    assert "theorem database" in reply.message


def test_hover_with_a_backend_that_finds_nothing_on_a_keyword_is_not_called_missing(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    daemon.call(m.Diagnostics(path))
    reply = daemon.call(m.Hover(path, 6, 2))  # `Proof`: nothing to show, and hover works here
    assert reply.text is None and reply.message == ""
    assert "nothing to show here" in render(reply)
    assert daemon.call(m.Status()).sessions[0].services == {"hover": "works"}


def test_definition_on_a_hol_without_definition_points_at_the_stored_theorem(lacking, write_script):
    daemon = lacking("definition")
    path = write_script(GOOD_SCRIPT.replace("simp[]\nQED\n\nTheorem conj", "simp[ADD_COMM]\nQED\n\nTheorem conj"))
    daemon.call(m.Diagnostics(str(path)))
    reply = daemon.call(m.Definition(str(path), 7, 20))
    assert [(t.path.endswith("arithmeticScript.sml"), t.range.line) for t in reply.targets] == [(True, 310)]
    assert reply.message.startswith("This HOL cannot find definitions:")
    alone = daemon.call(m.Definition(str(path), 7, 14))  # `simp`: no theorem of that name
    assert alone.targets == [] and "cannot find definitions" in render(alone)



@pytest.mark.parametrize("how", ["completion", "completion:unknown"])
def test_completion_on_a_hol_without_completion_says_so_and_offers_stored_theorems(lacking, write_script, how):
    daemon = lacking(how)
    path = write_script(GOOD_SCRIPT.replace("simp[]\nQED\n\nTheorem conj", "simp[ADD_C]\nQED\n\nTheorem conj"))
    daemon.call(m.Diagnostics(str(path)))
    reply = daemon.call(m.Completion(str(path), 7, 24))  # after `ADD_C`
    assert [(i.label, i.kind) for i in reply.items] == [("ADD_COMM", "theorem"), ("ADD_CLAUSES", "theorem")]
    assert reply.message.startswith("This HOL cannot complete names:") and "workspaceSymbol" in reply.message
    assert "This HOL cannot complete names" in render(reply)


def test_completion_that_finds_nothing_on_a_hol_with_completion_is_not_called_missing(daemon, write_script):
    path = write_script(GOOD_SCRIPT.replace("simp[]\nQED\n\nTheorem conj", "simp[ZZQ]\nQED\n\nTheorem conj"))
    daemon.call(m.Diagnostics(str(path)))
    reply = daemon.call(m.Completion(str(path), 7, 22))  # after `ZZQ`
    assert reply.items == [] and reply.message == ""
    assert daemon.call(m.Status()).sessions[0].services == {"completion": "works"}


@pytest.mark.parametrize("how", ["goalstate"])
def test_goal_state_inside_a_proof_on_a_hol_without_a_walker_says_so_not_outside_a_proof(lacking, write_script, how):
    daemon = lacking(how)
    path = str(write_script(GOOD_SCRIPT))
    daemon.call(m.Diagnostics(path))
    reply = daemon.call(m.GoalState(path, 7, 14))  # `simp` in add0's proof
    assert reply.state == "unsupported"
    assert reply.message.startswith("This HOL cannot show goal states:") and "try" in reply.message
    assert "not inside a Proof" not in render(reply)
    outside = daemon.call(m.GoalState(path, 1, 1))  # the Theory line: outside any proof, whatever the HOL
    assert outside.state == "not_in_proof"
    assert daemon.call(m.Status()).sessions[0].services == {"goal states": "lacking"}


def test_the_hover_probe_skips_a_comment_at_the_start_of_a_proof(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT.replace("  gen_tac >> simp[]", "  (* first *) gen_tac >> simp[]")))
    daemon.call(m.Diagnostics(path))
    reply = daemon.call(m.Hover(path, 6, 2))  # `Proof`: nothing to show, and hover works on `gen_tac`
    assert reply.message == ""
    assert daemon.call(m.Status()).sessions[0].services == {"hover": "works"}
