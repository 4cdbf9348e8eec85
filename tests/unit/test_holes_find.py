"""Which holes `holes` reads off a verdict (pure: no daemon, no HOL)."""

from __future__ import annotations

from holsrv.answers import holes
from holsrv.rpc import messages as m
from holsrv.text import textinfo

TEXT = """\
Theory demo
Ancestors mid

Theorem uses_mid:
  dbl 2 = 4
Proof
  simp[midTheory.dbl_even]
QED

Theorem unchecked:
  T
Proof
  simp[]
QED
"""


def verdict(**fields) -> m.DiagnosticsResult:
    base = dict(file="/p/demoScript.sml", content_hash="ab" * 8, verdict="CHEATS", headline="", complete=True,
                tally=m.Tally(), proofs=[], diagnostics=[], cheats=[], server=m.ServerNote(pid=1))
    return m.DiagnosticsResult(**{**base, **fields})


def test_a_proof_resting_on_a_cheated_ancestor_theorem_is_a_hole_listed_with_what_it_rests_on_unwalked():
    found = holes.find(verdict(
        proofs=[m.Proof("uses_mid", 4, "proved"), m.Proof("unchecked", 10, "unchecked", detail="dropped")],
        inherited_cheats=[m.InheritedCheat("uses_mid", 4, ["midTheory.dbl_even"])],
    ), textinfo.of(TEXT))
    rests, dropped = found
    assert (rests.hole.kind, rests.hole.line, rests.walk) == ("inherited_cheat", 4, False)
    assert rests.hole.detail == "rests on midTheory.dbl_even" and "ancestor" in rests.hole.unwalked
    # Any other unfinished proof: its QED line, walked for what is left there.
    assert (dropped.hole.kind, dropped.hole.line, dropped.hole.column, dropped.walk) == ("unchecked", 14, None, True)


def test_a_verdict_about_another_text_lists_its_holes_without_a_place_to_walk():
    [found] = holes.find(verdict(proofs=[m.Proof("unchecked", 10, "failed", detail="x")]), None)
    assert (found.hole.kind, found.walk) == ("failed", False) and "call holes again" in found.hole.unwalked
