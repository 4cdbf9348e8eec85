"""A build unblocks its dependants: no retryCompile, no restart, no stale BLOCKED.

`top` names `base` as its ancestor, and `base` is not built, so `top`'s
server blocks. Whoever builds `base` (the daemon's holmake, or a Holmake of
the user's seen by the directory watch), the daemon retries `top`'s compile
on the same server and the next diagnostics is OK. The Holmake is
tests/fake_hol/Holmake, which builds every script of its directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from holctl.render import render
from holsrv.rpc import messages as m

from conftest import wait_until

FAKE_HOLMAKE = Path(__file__).parent.parent / "fake_hol" / "Holmake"
DEADLINE_S = 30.0

BASE = """\
Theory base

Theorem base_thm:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED
"""

TOP = """\
Theory top
Ancestors base

Theorem top_thm:
  !n:num. 0 + n = n
Proof
  gen_tac >> simp[]
QED
"""


def blocked_project(daemon, write_script, base: str = BASE) -> Path:
    """`base` unbuilt beside `top`, whose server has answered BLOCKED."""
    write_script(base, "baseScript.sml")
    top = write_script(TOP, "topScript.sml")
    first = daemon.call(m.Diagnostics(str(top), wait=DEADLINE_S))
    assert first.verdict == "BLOCKED", first.headline
    return top


def build_outside(directory: Path) -> None:
    """The user's own Holmake (the fake one), not through the daemon."""
    done = subprocess.run([sys.executable, str(FAKE_HOLMAKE)], cwd=directory, capture_output=True,
                          timeout=DEADLINE_S)
    assert done.returncode == 0, done.stdout + done.stderr


def test_holmake_unblocks_a_blocked_dependant_and_names_it(daemon, write_script):
    top = blocked_project(daemon, write_script)
    built = daemon.call(m.Holmake(str(top)))
    assert built.ok, built.message
    assert built.unblocked == [str(top)]
    assert "topScript.sml" in built.message and "no retryCompile needed" in built.message
    assert f"unblocked: {top}" in render(built)
    after = daemon.call(m.Diagnostics(str(top), wait=DEADLINE_S))  # no retryCompile, no restart
    assert after.verdict == "OK", after.headline
    assert after.server.pid == built_pid(daemon, top)


def built_pid(daemon, top: Path) -> int | None:
    """The pid of `top`'s server now (the retry keeps the same one)."""
    return next(s.pid for s in daemon.call(m.Status()).sessions if s.file == str(top))


def test_a_holmake_answer_shows_the_theories_it_built_with_a_cheat(daemon, write_script):
    top = blocked_project(daemon, write_script, base=BASE.replace("gen_tac >> simp[]", "cheat"))
    built = daemon.call(m.Holmake(str(top)))
    assert built.ok and built.cheated == ["base"], built
    assert "CHEATED: base" in built.message
    assert "cheated: base" in render(built)


def test_a_build_outside_the_daemon_unblocks_a_blocked_dependant_with_no_call(daemon, write_script):
    top = blocked_project(daemon, write_script)
    pid = built_pid(daemon, top)
    build_outside(top.parent)

    # Status only: it neither reads the file nor syncs it, so the directory watch did this.
    def proved() -> bool:
        row = next(s for s in daemon.call(m.Status()).sessions if s.file == str(top))
        return row.tally.proved == 1

    wait_until(proved, DEADLINE_S, "the watch to retry the blocked compile")
    after = daemon.call(m.Diagnostics(str(top), wait=DEADLINE_S))
    assert after.verdict == "OK" and after.server.pid == pid, after.headline


def test_a_cached_blocked_answer_does_not_outlive_a_build(daemon, write_script):
    top = blocked_project(daemon, write_script)
    again = daemon.call(m.Diagnostics(str(top), wait=DEADLINE_S))
    assert again.cached and again.verdict == "BLOCKED"
    build_outside(top.parent)
    # A build that ended a while ago: the call is what finds it, before the watch has looked.
    past = time.time() - 10
    for built in (top.parent / ".hol" / "objs").iterdir():
        os.utime(built, (past, past))
    after = daemon.call(m.Diagnostics(str(top), wait=DEADLINE_S))
    assert after.verdict == "OK", after.headline
    assert not after.cached


def test_a_blocked_answer_just_after_a_build_says_it_may_be_stale(daemon, write_script):
    top = blocked_project(daemon, write_script)
    build_outside(top.parent)
    # At once, and no wait: the build files are fresh, so the retry waits for the build to be left alone.
    quick = daemon.call(m.Diagnostics(str(top), wait=0))
    assert quick.freshness is not None
    assert quick.verdict != "BLOCKED" or quick.freshness.may_be_stale, quick
    assert quick.verdict != "BLOCKED" or any("UNBLOCKING" in r for r in quick.freshness.reasons)


def test_diagnostics_just_after_a_build_waits_for_the_retry_instead_of_answering_blocked(daemon, write_script):
    top = blocked_project(daemon, write_script)
    build_outside(top.parent)
    after = daemon.call(m.Diagnostics(str(top), wait=DEADLINE_S))  # within the build's quiet period
    assert after.verdict == "OK", after.headline
