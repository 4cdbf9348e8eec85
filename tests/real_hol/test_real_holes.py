"""holes and try on a whole proof against a real HOL4.

Runs only where a real HOL4 is found (see tests/real_hol/test_real_hol.py) and is
skipped otherwise.  The goals a real HOL gives at a cheat and at a failing
step are those its goal-state walker gives there (PROTOCOL.md §11).
"""

from __future__ import annotations

from test_real_hol import CALL_TIMEOUT_S, WAIT_S, _diagnostics_or_skip, real_hol  # noqa: F401  (a fixture)

from holsrv.rpc import messages as m

SCRIPT = """\
Theory realholes
Ancestors arithmetic list

Theorem rev_length:
  ∀l. LENGTH (REVERSE l) = LENGTH l
Proof
  simp[]
QED

Theorem add_le:
  ∀m n. m ≤ m + n
Proof
  rpt gen_tac >>
  cheat
QED

Theorem not_so:
  ∀n. n + 1 = n
Proof
  gen_tac >>
  simp[]
QED
"""
CHEAT_LINE, FAIL_LINE = 14, 21  # `  cheat`, and `  simp[]` in not_so
STATEMENT_LINE = 10  # `Theorem add_le:`


def _daemon(daemon_factory, real_hol):  # noqa: F811
    return daemon_factory(hol_bin=real_hol, quiet_s=1.0, start_timeout_s=180, request_timeout_s=120)


def test_a_real_hol_holes_lists_the_cheat_and_the_failing_step_with_their_goals(
        daemon_factory, write_script, real_hol):  # noqa: F811
    daemon = _daemon(daemon_factory, real_hol)
    path = write_script(SCRIPT, name="realholesScript.sml")
    assert _diagnostics_or_skip(daemon, path).verdict == "FAILED"
    result = daemon.call(m.Holes(str(path), wait=WAIT_S), CALL_TIMEOUT_S)
    assert [(h.theorem, h.kind) for h in result.holes] == [("add_le", "cheat"), ("not_so", "failed")], result
    cheat, failed = result.holes
    assert cheat.line == CHEAT_LINE and cheat.goals is not None, cheat
    assert [g.goal for g in cheat.goals.goals] == ["m ≤ m + n"], cheat.goals
    # HOL places the failure on its failing step once its pool is idle; else the QED line is asked.
    assert failed.line in (FAIL_LINE, FAIL_LINE + 1) and failed.goals is not None, failed
    assert result.walked == 2


def test_a_real_hol_whole_proof_candidate_on_the_theorem_line_proves_it(
        daemon_factory, write_script, real_hol):  # noqa: F811
    daemon = _daemon(daemon_factory, real_hol)
    path = write_script(SCRIPT, name="realholesScript.sml")
    _diagnostics_or_skip(daemon, path)
    weaker = "Theorem add_le:\n  ∀m. m ≤ m + 0\nProof\n  simp[]\nQED"
    result = daemon.call(m.Try(str(path), STATEMENT_LINE, ["simp[]", weaker], timeout=60), CALL_TIMEOUT_S)
    assert result.whole_proof and result.replaced == "rpt gen_tac >>\n  cheat"
    whole, changed = result.candidates
    assert whole.state == "proved" and not whole.statement, whole
    assert changed.state == "proved" and changed.statement == "∀m. m ≤ m + 0", changed
    assert "CHANGES THE STATEMENT of add_le" in changed.message
