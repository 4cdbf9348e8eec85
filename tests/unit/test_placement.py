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
        placement.span(SCRIPT, 2, None)


def test_a_range_in_the_trial_text_is_told_in_the_candidates_own_lines_and_clamped_to_it():
    span = placement.span(SCRIPT, 5, None)
    tactic = "rpt strip_tac\n  >> fs[]"
    trial = span.put(SCRIPT, tactic)
    index = LineIndex(trial)
    line, col = index.line_col(span.start + tactic.index("fs"))
    inside = placement.in_candidate(index, m.Range(line, col, line + 1, 3), span.start, tactic)
    assert (inside.line, inside.col, inside.end_line, inside.end_col) == (2, 6, 2, 10)
