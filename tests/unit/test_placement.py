"""Where a try candidate goes in the text: pure, no server."""

from __future__ import annotations

import pytest

from holsrv.answers.trials import placement
from holsrv.errors import BadRequest
from holsrv.rpc import messages as m
from holsrv.text.positions import LineIndex

SCRIPT = """\
Theorem both:
  T /\\ T
Proof
  conj_tac
  >> simp[] >>
  simp[]
QED
"""


def test_a_whole_line_candidate_replaces_its_tactic_and_keeps_the_lines_combinators():
    span = placement.span(SCRIPT, 5, None)
    assert (SCRIPT[span.start:span.end], span.name) == ("simp[]", "both")
    assert span.put(SCRIPT, "metis_tac[]").splitlines()[4] == "  >> metis_tac[] >>"


def test_a_candidate_from_a_column_replaces_the_rest_of_the_line_as_written():
    span = placement.span(SCRIPT, 5, 6)
    assert SCRIPT[span.start:span.end] == "simp[] >>"


def test_a_line_outside_every_proof_is_refused_with_what_to_give_instead():
    with pytest.raises(BadRequest, match="not a line of tactics inside a Proof"):
        placement.span("Theory t\n\n" + SCRIPT, 1, None)
    with pytest.raises(BadRequest, match="not a line of tactics"):
        placement.span(SCRIPT, 2, 3)  # a column on the statement: not the whole proof


def test_a_line_of_the_declaration_outside_the_body_names_the_whole_proof_and_keeps_its_layout():
    for line in (1, 2, 3, 7):  # Theorem, statement, Proof, QED
        span = placement.span(SCRIPT, line, None)
        assert (span.kind, SCRIPT[span.start:span.end]) == ("proof", "conj_tac\n  >> simp[] >>\n  simp[]")
    assert placement.span(SCRIPT, 1, None).put(SCRIPT, "simp[]").endswith("Proof\n  simp[]\nQED\n")


def test_a_whole_theorem_candidate_replaces_the_declaration_and_its_statement_change_is_told():
    span = placement.span(SCRIPT, 4, None)  # a tactic line: a Theorem candidate still takes the declaration
    weaker = "Theorem both:\n  T\nProof\n  simp[]\nQED"
    whole = placement.for_candidate(SCRIPT, span, weaker)
    assert (whole.kind, whole.start, whole.end) == ("theorem", 0, len(SCRIPT) - 1)
    assert placement.statement_change(SCRIPT, whole, weaker) == ("T /\\ T", "T")
    same = weaker.replace("  T\n", "  T (* c *)   /\\\n  T\n")
    assert placement.statement_change(SCRIPT, placement.for_candidate(SCRIPT, span, same), same) is None
    assert whole.put(SCRIPT, weaker)[whole.goals_offset(weaker):] == "\nQED\n"
    with pytest.raises(BadRequest, match="same name"):
        placement.for_candidate(SCRIPT, span, weaker.replace("both", "other"))
    with pytest.raises(BadRequest, match="end at its QED"):
        placement.for_candidate(SCRIPT, span, weaker + "\nval x = 1;")


def test_a_range_in_the_trial_text_is_told_in_the_candidates_own_lines_and_clamped_to_it():
    span = placement.span(SCRIPT, 5, None)
    tactic = "rpt strip_tac\n  >> fs[]"
    trial = span.put(SCRIPT, tactic)
    index = LineIndex(trial)
    line, col = index.line_col(span.start + tactic.index("fs"))
    inside = placement.in_candidate(index, m.Range(line, col, line + 1, 3), span.start, tactic)
    assert (inside.line, inside.col, inside.end_line, inside.end_col) == (2, 6, 2, 10)
