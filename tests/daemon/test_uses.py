"""uses: what a theorem's proof depends on (HOL's tags, or the proof text) and who in the open scripts uses it."""

from __future__ import annotations

import pytest

from holctl.render import render
from holsrv import errors
from holsrv.rpc import messages as m

USING = """\
Theory demo
Ancestors arithmetic

Theorem add0:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[ADD_CLAUSES]
QED

Theorem add0_again:
  !n:num. 0 + n + 0 = n
Proof
  simp[add0, ADD_COMM, CONJ_COMM] (* not MULT_COMM: a comment *)
QED
"""

OTHER = """\
Theory other
Ancestors arithmetic

Theorem swap:
  !m n:num. m + n = n + m
Proof
  metis_tac[ADD_COMM]
QED
"""


def test_a_stored_theorem_lists_what_hols_tags_say_it_used_and_who_here_uses_it(daemon, write_script):
    path = str(write_script(USING))
    reply = daemon.call(m.Uses(path, "ADD_COMM"))
    assert (reply.theory, reply.depends_from) == ("arithmetic", "tags")
    # The fake's tags for ADD_COMM: ADD_0, ADD_CLAUSES and a theorem of num no stored name has.
    assert [(d.theory, d.name) for d in reply.depends_on] == [
        ("arithmetic", "ADD_0"), ("arithmetic", "ADD_CLAUSES"), ("num", "num#9")]
    assert [(u.name, u.path, u.line) for u in reply.used_by] == [("add0_again", "demoScript.sml", 10)]
    text = render(reply)
    assert "arithmetic.ADD_0" in text and "add0_again (demoScript.sml:10)" in text
    assert daemon.call(m.Uses(path, "MULT_COMM")).used_by == []  # named in a comment only
    qualified = daemon.call(m.Uses(path, "arithmeticTheory.ADD_COMM"))
    assert [d.name for d in qualified.depends_on] == ["ADD_0", "ADD_CLAUSES", "num#9"]


def test_a_theorem_of_the_script_lists_the_theorems_its_proof_text_names(daemon, write_script):
    path = str(write_script(USING))
    reply = daemon.call(m.Uses(path, "add0_again"))
    assert (reply.theory, reply.depends_from) == ("demo", "text")
    # Its own add0 with its line; ADD_COMM and CONJ_COMM stored below it; not simp, nor the comment's name.
    assert [(d.theory, d.name, d.line) for d in reply.depends_on] == [
        ("", "add0", 4), ("arithmetic", "ADD_COMM", 0), ("bool", "CONJ_COMM", 0)]
    assert reply.used_by == []
    first = daemon.call(m.Uses(path, "add0"))
    assert [d.name for d in first.depends_on] == ["ADD_CLAUSES"]
    assert [u.name for u in first.used_by] == ["add0_again"]


def test_users_are_found_in_every_open_script(daemon, write_script):
    here = write_script(USING)
    there = write_script(OTHER, name="otherScript.sml", dir=here.parent / "sub")
    daemon.call(m.Diagnostics(str(there), wait=20.0))  # its server is up: an open script
    reply = daemon.call(m.Uses(str(here), "ADD_COMM"))
    assert [(u.name, u.path) for u in reply.used_by] == [
        ("add0_again", "demoScript.sml"), ("swap", "sub/otherScript.sml")]


def test_a_name_nobody_stores_says_so(daemon, write_script):
    path = str(write_script(USING))
    reply = daemon.call(m.Uses(path, "NO_SUCH_THM"))
    assert reply.depends_on == [] and reply.depends_from == "" and "no theorem NO_SUCH_THM" in reply.message
    missing = daemon.call(m.Uses(path, "arithmetic.NO_SUCH_THM"))
    assert missing.depends_on == [] and "theorem arithmetic$NO_SUCH_THM not found" in missing.message


@pytest.mark.parametrize("name", ["", "a b", "x.y.z", "1abc", "A" * 201])
def test_a_bad_name_is_refused_with_what_to_write(daemon, write_script, name):
    path = str(write_script(USING))
    with pytest.raises(errors.BadRequest, match="is not a theorem name"):
        daemon.call(m.Uses(path, name))
