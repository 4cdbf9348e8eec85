"""Against a real HOL4: search finds ADD_COMM, an unparsable pattern is explained, Holmake builds.

Runs only where a real HOL4 is found (the `real_hol` fixture of
test_real_hol.py), with a Holmake beside it for the build; skipped otherwise.
"""

from __future__ import annotations

import pytest
import test_real_hol

from holsrv import errors
from holsrv.rpc import messages as m

real_hol = test_real_hol.real_hol
WAIT_S = test_real_hol.WAIT_S
CALL_TIMEOUT_S = test_real_hol.CALL_TIMEOUT_S

SCRIPT = """\
Theory realsearch
Ancestors arithmetic

Theorem add_zero:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED
"""


def _real_daemon(daemon_factory, real_hol):
    return daemon_factory(hol_bin=real_hol, quiet_s=1.0, start_timeout_s=180, request_timeout_s=120)


def test_a_real_hol_finds_add_comm_by_name_theory_and_pattern(daemon_factory, write_script, real_hol):
    daemon = _real_daemon(daemon_factory, real_hol)
    path = str(write_script(SCRIPT, name="realsearchScript.sml"))
    assert daemon.call(m.Diagnostics(path, wait=WAIT_S), CALL_TIMEOUT_S).verdict == "OK"
    try:
        by_name = daemon.call(m.Search(path, '"ADD_COMM"', limit=50), CALL_TIMEOUT_S)
    except errors.LspError as err:
        if "unknown method" in str(err):
            pytest.skip(f"this HOL4's server has no $/hol/search: {err}")
        raise
    hit = next(h for h in by_name.hits if h.name == "ADD_COMM")
    assert hit.theory == "arithmetic" and hit.kind == "theorem" and "+" in hit.statement
    assert by_name.freshness is not None and by_name.freshness.settled
    narrowed = daemon.call(m.Search(path, "'arithmetic' x + y = y + x", limit=50), CALL_TIMEOUT_S)
    assert "ADD_COMM" in [h.name for h in narrowed.hits], narrowed
    broken = daemon.call(m.Search(path, "'arithmetic' x + + y"), CALL_TIMEOUT_S)
    assert broken.hits == [] and broken.empty_because in ("unparsable", "no_match"), broken
    assert broken.message


def test_a_real_holmake_builds_a_small_directory(daemon_factory, write_script, real_hol):
    daemon = _real_daemon(daemon_factory, real_hol)
    try:
        daemon.settings.holmake_command()
    except errors.HolNotFound as err:
        pytest.skip(f"no Holmake beside {real_hol}: {err}")
    path = write_script(SCRIPT, name="realsearchScript.sml")
    reply = daemon.call(m.Holmake(str(path)), CALL_TIMEOUT_S + daemon.settings.holmake_timeout_s)
    assert reply.ok, f"{reply.message}\n{reply.log_tail}"
