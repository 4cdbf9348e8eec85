"""try on a whole proof: `line` on the theorem's declaration replaces its whole body; a
candidate that is a whole `Theorem … QED` may change the statement, and the answer says so."""

from __future__ import annotations

import pytest
from test_trials import SCRIPT, settled

from holctl.render import render
from holsrv import errors
from holsrv.rpc import messages as m

THEOREM_LINE, PROOF_LINE = 4, 6  # `Theorem swap:` and its `Proof`
WEAKER = "Theorem swap:\n  !p q. p /\\ q ==> q\nProof\n  rpt strip_tac >> simp[]\nQED"


def test_a_whole_proof_candidate_on_the_theorem_line_proves_it_and_apply_writes_the_body(daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    result = daemon.call(m.Try(str(path), THEOREM_LINE, ['FAIL_TAC "no"', "rpt strip_tac >> metis_tac[]"],
                               apply=True, wait=30), timeout=120)
    assert result.whole_proof and result.replaced == "rpt strip_tac >>\n  simp[]"
    assert [(g.asms, g.goal) for g in result.before] == [([], "∀p q. p ∧ q ⇒ q ∧ p")]
    fails, proves = result.candidates
    assert fails.state == "failed" and not fails.statement
    assert (proves.state, proves.proof.status, proves.statement) == ("proved", "proved", "")
    assert "in place of the whole proof" in result.message
    assert result.applied is not None and result.applied.state == "kept", result.applied
    assert (result.applied.range.line, result.applied.range.end_line) == (7, 8)
    assert "Proof\n  rpt strip_tac >> metis_tac[]\nQED" in path.read_text()
    assert settled(daemon, path).verdict == "OK"


def test_the_proof_line_names_the_whole_proof_too(daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    result = daemon.call(m.Try(str(path), PROOF_LINE, ["rpt strip_tac >> simp[]"]), timeout=120)
    assert result.whole_proof and result.candidates[0].state == "proved"
    assert "tried in place of the whole proof" in render(result)


def test_a_candidate_changing_the_statement_says_so_plainly_and_apply_says_the_file_s_changed(daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    same = WEAKER.replace("==> q\n", "==> q /\\ p (* the same *)\n").replace("  !p", "     !p")
    result = daemon.call(m.Try(str(path), THEOREM_LINE, [same, WEAKER], apply=True, wait=30), timeout=120)
    kept, weaker = result.candidates
    assert kept.statement == "" and "STATEMENT" not in kept.message
    assert weaker.state == "proved" and weaker.statement == "!p q. p /\\ q ==> q"
    assert "CHANGES THE STATEMENT of swap: was `!p q. p /\\ q ==> q /\\ p`, now `!p q. p /\\ q ==> q`" in weaker.message
    assert "Candidate 2 changes the theorem's statement" in result.message and "verify will name it" in result.message
    assert "[2] Theorem swap: … (5 lines): PROVED" in render(result)
    # The first proved candidate keeps the statement: it is the one written.
    assert result.applied.state == "kept" and "CHANGED" not in result.applied.message
    assert "==> q /\\ p (* the same *)" in path.read_text()


def test_apply_of_a_changed_statement_says_the_file_s_statement_changed(daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    result = daemon.call(m.Try(str(path), 7, [WEAKER], apply=True, wait=30), timeout=120)
    assert result.candidates[0].statement and result.applied.state == "kept"
    assert "The statement of swap in the file has CHANGED" in result.applied.message
    assert "CHANGED STATEMENT" in result.message
    assert "!p q. p /\\ q ==> q\nProof" in path.read_text()


def test_a_theorem_candidate_of_another_name_is_refused_before_anything_runs(daemon, write_script):
    path = write_script(SCRIPT)
    with pytest.raises(errors.BadRequest, match="same name"):
        daemon.call(m.Try(str(path), THEOREM_LINE, [WEAKER.replace("swap", "other_name")]), timeout=60)
    with pytest.raises(errors.BadRequest, match="no QED"):
        daemon.call(m.Try(str(path), THEOREM_LINE, ["simp[]\nQED"]), timeout=60)
