"""A build unblocks its dependants, against a real HOL4 and its Holmake.

The project of transcript `blocked-then-built`: `top` names `base` as its
ancestor, and `base` is not built when `top` is opened, so HOL blocks it.
The daemon's holmake builds both; the daemon retries `top`'s compile by
itself (a real server retries the load only on `$/hol/retryCompile`), so the
next diagnostics is OK with no retryCompile and no restart.

Skipped without a real HOL4 and a Holmake beside it, as test_real_holmake.py.
"""

from __future__ import annotations

import test_real_hol
import test_real_holmake

from holsrv.rpc import messages as m

real_hol = test_real_hol.real_hol
holmake = test_real_holmake.holmake
WAIT_S = test_real_hol.WAIT_S
CALL_TIMEOUT_S = test_real_hol.CALL_TIMEOUT_S

BASE = """\
Theory base

Definition double_def:
  double (n:num) = n + n
End
"""

TOP = """\
Theory top
Ancestors base

Theorem double_2:
  double 2 = 4
Proof
  simp[double_def]
QED
"""


_diagnostics = test_real_hol.diagnostics_with_one_more_wait


def test_holmake_unblocks_a_dependant_opened_before_its_ancestor_was_built(daemon_factory, tmp_path, real_hol,
                                                                           holmake):
    daemon = daemon_factory(hol_bin=real_hol, quiet_s=1.0, start_timeout_s=180, request_timeout_s=120,
                            stop_timeout_s=10, memory_budget_mb=0)
    (tmp_path / "baseScript.sml").write_text(BASE)
    top = tmp_path / "topScript.sml"
    top.write_text(TOP)
    request = m.Diagnostics(str(top), wait=WAIT_S)

    first = _diagnostics(daemon, request)
    assert first.verdict == "BLOCKED", first.headline
    assert "baseTheory" in first.headline

    built = daemon.call(m.Holmake(str(top)), CALL_TIMEOUT_S)
    assert built.ok, f"{built.message}\n{built.log_tail}"
    assert built.unblocked == [str(top)], built.message

    after = _diagnostics(daemon, request)  # no retryCompile, no restart
    assert after.verdict == "OK", after.headline
    assert after.server.pid == first.server.pid  # the same server: it had loaded nothing
