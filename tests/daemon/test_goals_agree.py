"""goalState never says what the file's diagnostics contradict at the same text.

Through the daemon and the fake HOL: a cheat is named as a cheat, the QED line
of a proof diagnostics calls proved says it is proved, and a compile error at
or before the position comes first.
"""

from __future__ import annotations

from holctl.render import render
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT


def line_of(text: str, needle: str, nth: int = 1) -> int:
    found = [n for n, line in enumerate(text.splitlines(), 1) if needle in line]
    return found[nth - 1]


def test_a_cheat_line_says_the_goal_is_not_proved_and_agrees_with_diagnostics(daemon, write_script):
    text = GOOD_SCRIPT.replace("gen_tac >> simp[]", "gen_tac >> cheat")
    path = write_script(text)
    checked = daemon.call(m.Diagnostics(str(path), wait=20))
    assert checked.verdict == "CHEATS"
    view = daemon.call(m.GoalState(str(path), line_of(text, "cheat")))
    assert view.content_hash == checked.content_hash
    assert view.state == "cheated" and view.goals == []
    assert "prove the goal" not in view.message
    assert "only because of cheat" in view.message and "not proved" in view.message
    assert "not proved" in render(view)


def test_the_qed_line_of_a_proof_diagnostics_calls_proved_says_it_is_proved(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    checked = daemon.call(m.Diagnostics(str(path), wait=20))
    assert checked.verdict == "OK"
    view = daemon.call(m.GoalState(str(path), line_of(GOOD_SCRIPT, "QED")))
    assert view.content_hash == checked.content_hash
    assert (view.state, view.goals) == ("proved_here", [])
    assert "what is left" not in view.message and "prove the goal" not in view.message
    assert view.message == (
        "This is the QED line: diagnostics reports add0 proved, so nothing is left at the end of the proof."
    )


def test_the_qed_line_of_a_cheated_proof_says_it_uses_cheat(daemon, write_script):
    text = GOOD_SCRIPT.replace("gen_tac >> simp[]", "gen_tac >> cheat")
    path = write_script(text)
    daemon.call(m.Diagnostics(str(path), wait=20))
    view = daemon.call(m.GoalState(str(path), line_of(text, "QED")))
    cheat = line_of(text, "cheat")
    assert view.message.startswith(f"This is the QED line: add0 is not proved: it uses cheat at line {cheat}.")


def test_a_line_at_or_after_a_compile_error_in_its_proof_shows_that_error_first(daemon, write_script):
    text = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "rpt strip_tac >> not_a_tactic\n  >> simp[]")
    path = write_script(text)
    checked = daemon.call(m.Diagnostics(str(path), wait=20))
    assert checked.verdict == "FAILED"
    error_line = line_of(text, "not_a_tactic")
    for line in (error_line, error_line + 1):
        view = daemon.call(m.GoalState(str(path), line))
        assert view.state == "failed", view
        assert "Value or constructor (not_a_tactic) has not been declared" in view.error
        assert view.failed_range is not None and view.failed_range.line == error_line
        assert view.message.startswith(f"HOL reports a compile error in conj_comm, at line {error_line}")
        shown = render(view).splitlines()
        said = next(i for i, text_line in enumerate(shown) if text_line.startswith("HOL reports a compile error"))
        assert all(not text_line.startswith(("error", "goal", "before")) for text_line in shown[:said])
    # The other proof compiles: its goals are untouched by the error below it.
    other = daemon.call(m.GoalState(str(path), line_of(text, "gen_tac")))
    assert other.state == "proved_here" and other.error == ""
