"""Which proofs of a file rest on cheated theorems of its ancestor theories, by the names they use."""

from __future__ import annotations

from holsrv.answers import inheritedcheats
from holsrv.rpc import messages as m

CHEATED = frozenset({("mid", "dbl_even"), ("base", "half_lemma")})

TEXT = """\
Theory top
Ancestors mid

Theorem direct:
  T
Proof
  metis_tac[midTheory.dbl_even]
QED

Theorem bare:
  T
Proof
  metis_tac[half_lemma]
QED

Theorem through_own:
  T
Proof
  (* midTheory.dbl_even is not used here *) metis_tac[direct, "dbl_even"]
QED

Theorem clean:
  T
Proof
  simp[]
QED
"""


def test_a_proof_naming_a_cheated_ancestor_theorem_qualified_or_bare_rests_on_it_and_so_do_its_users():
    found = {f.theorem: f for f in inheritedcheats.find(TEXT, CHEATED)}
    assert sorted(found) == ["bare", "direct", "through_own"]
    assert found["direct"] == m.InheritedCheat("direct", 4, ["midTheory.dbl_even"], [])
    assert found["bare"].rests_on == ["baseTheory.half_lemma"]
    # Comments and strings are not uses; the file's own cheated-below proof is.
    assert found["through_own"].rests_on == ["midTheory.dbl_even"] and found["through_own"].through == ["direct"]


def test_a_bare_name_the_file_declared_first_is_the_files_own_theorem():
    text = TEXT.replace("Theorem direct:", "Theorem half_lemma:\n  T\nProof\n  simp[]\nQED\n\nTheorem direct:")
    found = {f.theorem for f in inheritedcheats.find(text, CHEATED)}
    assert "bare" not in found and "direct" in found


def test_nothing_cheated_below_finds_nothing_and_the_verdict_is_left_alone():
    assert inheritedcheats.find(TEXT, frozenset()) == []
    assert inheritedcheats.parse(["mid.dbl_even", "junk", "base.x"]) == {("mid", "dbl_even"), ("base", "x")}


def test_the_query_lists_the_theories_and_reports_a_failure_as_holds_words():
    code = inheritedcheats.query_code(["mid", "base"])
    assert '["mid", "base"]' in code and 'Lib.mem "cheat"' in code and "Feedback.exn_to_string" in code
