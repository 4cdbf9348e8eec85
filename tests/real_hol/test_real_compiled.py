"""Against a real HOL4: theorems inside `local … in … end`, which HOL proves while compiling.

HOL's pool never has an entry for them; the verdict must still be OK when
Holmake would build the file, and FAILED, naming the theorem, when one fails.
Runs only where a real HOL4 is found (the `real_hol` fixture of
test_real_hol.py); skipped otherwise.
"""

from __future__ import annotations

import test_real_hol

from holsrv.rpc import messages as m

real_hol = test_real_hol.real_hol
WAIT_S = test_real_hol.WAIT_S
CALL_TIMEOUT_S = test_real_hol.CALL_TIMEOUT_S

SCRIPT = """\
Theory reallocal
Ancestors arithmetic

local
Theorem helper:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED
in
val _ = ();
end
"""


def test_a_real_hol_local_block_theorem_that_proves_is_ok_and_one_that_fails_is_failed_by_name(
    daemon_factory, write_script, real_hol
):
    daemon = daemon_factory(hol_bin=real_hol, quiet_s=1.0, start_timeout_s=180, request_timeout_s=120)
    path = write_script(SCRIPT, name="reallocalScript.sml")
    good = test_real_hol._diagnostics_or_skip(daemon, path)
    assert good.verdict == "OK", (good.headline, good.proofs, good.diagnostics)
    assert [(p.name, p.status) for p in good.proofs] == [("helper", "proved")]
    assert "checked by HOL while compiling" in good.note

    path.write_text(SCRIPT.replace("gen_tac >> simp[]", "DECIDE_TAC").replace("n + 0 = n", "1 + 1 = 3"))
    bad = daemon.call(m.Diagnostics(str(path), wait=WAIT_S), CALL_TIMEOUT_S)
    assert bad.verdict == "FAILED", (bad.headline, bad.proofs, bad.diagnostics)
    assert "helper" in bad.headline
    assert [(p.name, p.status) for p in bad.proofs] == [("helper", "failed")]
