"""Against a real HOL4: after a parse error, diagnostics and goalState tell one story.

HOL recovers from a tactic list left open and proves what follows; Holmake
stops at the first error.  Runs only where a real HOL4 is found (the
`real_hol` fixture of test_real_hol.py); skipped otherwise.
"""

from __future__ import annotations

import test_real_hol

from holsrv import errors
from holsrv.rpc import messages as m

real_hol = test_real_hol.real_hol
CALL_TIMEOUT_S = test_real_hol.CALL_TIMEOUT_S

# `rw[ADD_0` is never closed: HOL reports `expected close delimiter` at the QED
# (a warning it recovers from, recorded in parse-recovery.jsonl) and goes on.
SCRIPT = """\
Theory realstory
Ancestors arithmetic

Theorem first:
  !n:num. n + 0 = n
Proof
  rw[ADD_0
QED

Theorem later:
  !p q. p /\\ q ==> q /\\ p
Proof
  rpt strip_tac >> simp[]
QED
"""
STORY = "Holmake stops at that first error"


def test_a_real_hol_proof_after_a_parse_error_is_told_the_same_by_diagnostics_and_goal_state(
    daemon_factory, write_script, real_hol
):
    daemon = daemon_factory(hol_bin=real_hol, quiet_s=1.0, start_timeout_s=180, request_timeout_s=120)
    path = write_script(SCRIPT, name="realstoryScript.sml")
    checked = test_real_hol._diagnostics_or_skip(daemon, path)
    assert checked.verdict != "OK", checked.headline
    first_error = min(d.range.line for d in checked.diagnostics if d.severity == "error")
    by_name = {p.name: p for p in checked.proofs}
    assert by_name["first"].status == "parse_error", by_name["first"]
    later = by_name["later"]
    assert later.status == "proved", later
    assert f"earlier error at line {first_error}" in later.detail and STORY in later.detail
    line = SCRIPT.splitlines().index("  rpt strip_tac >> simp[]") + 1
    try:
        view = daemon.call(m.GoalState(str(path), line, wait=120), CALL_TIMEOUT_S)
    except errors.LspError as err:  # a server without goal states (docs/protocol.md#the-july-2026-server)
        assert "unknown method" in str(err)
        return
    assert view.content_hash == checked.content_hash
    assert view.state in ("goals", "proved_here"), view
    assert f"earlier error at line {first_error}" in view.message and STORY in view.message
    assert "does not count this proof proved" not in view.message
