"""try against a real HOL4: a candidate that does not compile, and a looping one.

Runs only where a real HOL4 is found (see tests/real_hol/test_real_hol.py) and is
skipped otherwise.  What a real server does here is recorded in the shared
transcripts candidate-unbound-name.jsonl and candidate-loops.jsonl.
"""

from __future__ import annotations

from test_real_hol import CALL_TIMEOUT_S, WAIT_S, _diagnostics_or_skip, real_hol  # noqa: F401  (a fixture)

from holsrv.rpc import messages as m

SCRIPT = """\
Theory realtry
Ancestors arithmetic list

Theorem rev_length:
  ∀l. LENGTH (REVERSE l) = LENGTH l
Proof
  simp[]
QED

Theorem add0:
  ∀n. n + 0 = n
Proof
  simp[]
QED
"""
LINE = 7  # `  simp[]` in rev_length


def _daemon(daemon_factory, real_hol):  # noqa: F811
    # A looping check grows by some 0.4 GB a second on a real HOL: room for a few seconds of it.
    return daemon_factory(hol_bin=real_hol, quiet_s=1.0, start_timeout_s=180, request_timeout_s=120,
                          max_heap_mb=4096)


def test_a_real_hol_candidate_with_an_undeclared_name_is_failed_with_its_message(
        daemon_factory, write_script, real_hol):  # noqa: F811
    daemon = _daemon(daemon_factory, real_hol)
    path = write_script(SCRIPT, name="realtryScript.sml")
    assert _diagnostics_or_skip(daemon, path).verdict == "OK"
    result = daemon.call(m.Try(str(path), LINE, ["simp[NO_SUCH_THM]", "simp[]"], timeout=60), CALL_TIMEOUT_S)
    unbound, good = result.candidates
    assert unbound.state == "failed", unbound
    assert "NO_SUCH_THM" in unbound.error and "has not been declared" in unbound.error
    assert unbound.candidate_range is not None and unbound.candidate_range.line == 1
    assert unbound.candidate_range.col == 6, unbound.candidate_range  # the identifier, in the candidate
    assert good.state == "proved", good
    after = daemon.call(m.Diagnostics(str(path), wait=WAIT_S), CALL_TIMEOUT_S)
    assert after.verdict == "OK", after.headline


def test_a_real_hol_looping_candidate_does_not_time_out_the_good_one_after_it(
        daemon_factory, write_script, real_hol):  # noqa: F811
    daemon = _daemon(daemon_factory, real_hol)
    path = write_script(SCRIPT, name="realtryScript.sml")
    assert _diagnostics_or_skip(daemon, path).verdict == "OK"
    result = daemon.call(m.Try(str(path), LINE, ["REPEAT ALL_TAC >> simp[]", "simp[]"], timeout=3),
                         CALL_TIMEOUT_S)
    loops, good = result.candidates
    assert loops.state == "timed_out", loops
    assert "may still be stopping" in loops.message
    # Its own budget, counted from when HOL took it, or not tried with the reason: never timed out.
    assert good.state in ("proved", "not_tried"), good
    if good.state == "not_tried":
        assert "still stopping" in good.message
    after = daemon.call(m.Diagnostics(str(path), wait=WAIT_S), CALL_TIMEOUT_S)
    assert after.verdict == "OK", after.headline


LOOP = "REPEAT ALL_TAC >> simp[]"
LETGO_S = 10.0


def test_a_real_hol_looping_candidate_leaves_a_server_that_answers_the_next_calls(
        daemon_factory, write_script, real_hol):  # noqa: F811
    """transcript walk-of-a-loop: on a HOL whose walker has no time limit a walk of the looping
    candidate would hold the server for good. The next diagnostics and goalState are answered,
    by the same server or, if it ran away, by a fresh one within letgo_s and a start."""
    daemon = _daemon(daemon_factory, real_hol)
    path = write_script(SCRIPT, name="realtryScript.sml")
    assert _diagnostics_or_skip(daemon, path).verdict == "OK"
    result = daemon.call(m.Try(str(path), LINE, [LOOP, "simp[]"], timeout=3), CALL_TIMEOUT_S)
    loops, good = result.candidates
    assert loops.state == "timed_out" and not loops.goals, loops
    assert good.state == "proved", good
    after = daemon.call(m.Diagnostics(str(path), wait=LETGO_S + WAIT_S), CALL_TIMEOUT_S)
    assert after.verdict == "OK" and after.complete, after.headline
    goals = daemon.call(m.GoalState(str(path), LINE, 3, wait=LETGO_S + WAIT_S), CALL_TIMEOUT_S)
    assert goals.state == "goals", goals


def test_a_real_hol_loop_written_into_the_file_then_fixed_is_ok(
        daemon_factory, write_script, real_hol):  # noqa: F811
    daemon = _daemon(daemon_factory, real_hol)
    path = write_script(SCRIPT, name="realtryScript.sml")
    assert _diagnostics_or_skip(daemon, path).verdict == "OK"
    path.write_text(SCRIPT.replace("  simp[]\nQED\n\nTheorem add0", f"  {LOOP}\nQED\n\nTheorem add0", 1),
                    encoding="utf-8")
    looping = daemon.call(m.Diagnostics(str(path), wait=5), CALL_TIMEOUT_S)
    assert looping.verdict != "OK", looping.headline
    # Asked at the loop: HOL is not left holding a walk that never ends.
    at = daemon.call(m.GoalState(str(path), LINE, len(LOOP) + 3, wait=LETGO_S + WAIT_S), CALL_TIMEOUT_S)
    assert at.state in ("looping", "goals", "failed"), at
    path.write_text(SCRIPT, encoding="utf-8")
    fixed = daemon.call(m.Diagnostics(str(path), wait=LETGO_S + WAIT_S), CALL_TIMEOUT_S)
    assert fixed.verdict == "OK" and fixed.complete, fixed.headline
    assert not any(w.startswith("LOOPS") for w in fixed.warnings), fixed.warnings
