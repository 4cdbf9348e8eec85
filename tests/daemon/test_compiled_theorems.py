"""Theorems HOL checks while compiling: no pool entry, a verdict all the same.

HOL's pool never has a theorem inside `local … in … end` (the compile proves
it) nor one whose declaration does not compile.  Through the daemon and the
fake HOL, as an agent sees the answer.
"""

from __future__ import annotations

from holctl.render import render
from holsrv.rpc import messages as m

HEADER = """\
Theory demo
Ancestors arithmetic
"""

ONLY_LOCAL = HEADER + """
local
Theorem helper:
  !n:num. n * 1 = n
Proof
  gen_tac >> simp[]
QED
in
val _ = ();
end
"""

MIXED = HEADER + """
Theorem add0:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

local
Theorem helper:
  !n:num. n * 1 = n
Proof
  gen_tac >> simp[]
QED
in
Theorem inner:
  !m:num. m + 0 = m
Proof
  gen_tac >> simp[]
QED
end
"""


def test_a_script_whose_only_theorem_is_inside_a_local_block_and_proves_is_ok(daemon, write_script):
    result = daemon.call(m.Diagnostics(str(write_script(ONLY_LOCAL)), wait=20))
    assert result.verdict == "OK", result.headline
    assert result.headline == "OK: all 1 proof proved, no errors"
    assert [(p.name, p.status) for p in result.proofs] == [("helper", "proved")]
    text = render(result)
    assert "unreported" not in text and "restart" not in text
    assert "note: 1 proof (helper) checked by HOL while compiling" in text


def test_theorems_checked_while_compiling_are_explained_once_not_per_proof(daemon, write_script):
    result = daemon.call(m.Diagnostics(str(write_script(MIXED)), wait=20))
    assert result.verdict == "OK", result.headline
    assert result.tally.proved == 3 and result.tally.total == 3
    text = render(result)
    assert text.count("checked by HOL while compiling") == 1
    assert "2 proofs (helper, inner) checked by HOL while compiling" in text


def test_a_failing_theorem_inside_a_local_block_fails_the_file_naming_it(daemon, write_script):
    text = MIXED.replace("gen_tac >> simp[]\nQED\nin", 'gen_tac >> FAIL_TAC "nope"\nQED\nin')
    result = daemon.call(m.Diagnostics(str(write_script(text)), wait=20))
    assert result.verdict == "FAILED", result.headline
    assert result.headline.startswith("FAILED: 1 of 3 proofs failed (helper)")
    statuses = {p.name: (p.status, p.detail) for p in result.proofs}
    assert statuses["helper"] == ("failed", f'does not compile: Failed to prove theorem "helper" (line '
                                            f'{text.splitlines().index("local") + 1}); see diagnostics')
    assert statuses["add0"][0] == statuses["inner"][0] == "proved"
    assert 'Failed to prove theorem "helper"' in render(result)
