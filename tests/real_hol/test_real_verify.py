"""verify against a real HOL4 and its Holmake: HOL's own record of cheats and axioms.

The script of transcript `theorem-tags` (a proved theorem, a cheated one, a
`new_axiom` and a theorem proved from it), committed in a git repository
made in a temporary directory: verify must name the cheat and the axiom from
HOL's record after the build, and the build CHEATED.  The same script
without the cheat and the axiom is VERIFIED.  This is the check that the
tag question (`holsrv/answers/oracles.py`) compiles and reads as the fake
says it does: a real `load` of the built theory in the file's server.

Skipped without a real HOL4 and a Holmake beside it, as test_real_holmake.py.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import test_real_hol
import test_real_holmake

from holctl.render import render
from holsrv.rpc import messages as m

real_hol = test_real_hol.real_hol
holmake = test_real_holmake.holmake
WAIT_S = test_real_hol.WAIT_S
CALL_TIMEOUT_S = test_real_hol.CALL_TIMEOUT_S + 600.0  # and a cold Holmake

CLEAN = """\
Theory tags
Ancestors arithmetic

Theorem good:
  ∀n. n + 0 = n
Proof
  simp[]
QED
"""

GAMED = CLEAN + """
Theorem cheaty:
  ∀n. n * 1 = n
Proof
  cheat
QED

val ax = new_axiom ("my_ax", ``∀n:num. n < n + 1``);

Theorem uses_ax:
  ∀n:num. n < n + 1
Proof
  ACCEPT_TAC ax
QED
"""


def _git(directory: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "HOME": str(directory), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=directory, env=env, check=True, capture_output=True, timeout=60)


def _committed(directory: Path, text: str) -> Path:
    directory.mkdir()
    _git(directory, "init", "-q")
    path = directory / "tagsScript.sml"
    path.write_text(text, encoding="utf-8")
    _git(directory, "add", "tagsScript.sml")
    _git(directory, "commit", "-qm", "statements")
    return path


def _daemon(daemon_factory, real_hol):
    return daemon_factory(hol_bin=real_hol, quiet_s=1.0, start_timeout_s=180, request_timeout_s=120,
                          stop_timeout_s=10, memory_budget_mb=0)


def test_verify_names_a_cheat_and_an_axiom_from_hols_record(daemon_factory, real_hol, holmake, tmp_path):
    daemon = _daemon(daemon_factory, real_hol)
    path = _committed(tmp_path / "gamed", CLEAN)
    path.write_text(GAMED, encoding="utf-8")  # two new theorems: allowed as statements, not as proofs
    reply = daemon.call(m.Verify(str(path), wait=WAIT_S), CALL_TIMEOUT_S)
    assert isinstance(reply, m.VerifyResult), reply
    shown = render(reply)
    checks = {c.name: c for c in reply.checks}
    assert not reply.verified, shown
    assert checks["statements"].status == "passed", shown
    assert checks["build"].status == "failed" and "CHEATED" in checks["build"].summary, shown
    oracles = checks["oracles"]
    assert oracles.status == "failed", shown
    assert "cheaty rests on cheat" in oracles.summary, shown
    assert "tags.my_ax" in oracles.summary, shown


def test_verify_says_verified_for_a_clean_committed_script(daemon_factory, real_hol, holmake, tmp_path):
    daemon = _daemon(daemon_factory, real_hol)
    path = _committed(tmp_path / "clean", CLEAN)
    reply = daemon.call(m.Verify(str(path), wait=WAIT_S), CALL_TIMEOUT_S)
    assert isinstance(reply, m.VerifyResult), reply
    assert reply.verified, render(reply)
    # The built theory stays loaded in the file's server (an eval's effects stay): a compile from the
    # top, which makes theory `tags` again, must still go through (design.md: a known risk).
    path.write_text("(* edited at the top *)\n" + CLEAN, encoding="utf-8")
    after = daemon.call(m.Diagnostics(str(path), wait=WAIT_S), CALL_TIMEOUT_S)
    assert after.verdict == "OK", after.headline
