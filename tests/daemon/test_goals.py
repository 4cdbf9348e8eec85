"""goalState through the daemon: the line view, the QED line, and the state an agent branches on."""

from __future__ import annotations

import pytest

from holsrv.rpc import messages as m

from conftest import FAILING_SCRIPT, GOOD_SCRIPT, client_messages

# The fake walks this as rpt strip_tac, conj_tac, simp[], simp[] (see
# tests/fake_hol/README.md, "Goal-state walk"); the second proof stops short,
# and the fake's pool fails it too (a false ground equation), as a real HOL would.
SCRIPT = """\
Theory demo
Ancestors arithmetic

Theorem swap:
  !p q. p /\\ q ==> q /\\ p
Proof
  rpt strip_tac >>
  conj_tac

  >- simp[]
  >- simp[]
QED

Theorem unfinished:
  1 + 1 = 3
Proof
  rpt strip_tac
QED
"""
STATEMENT = "∀p q. p ∧ q ⇒ q ∧ p"
RESUMED = """
Theorem parent:
  !p. p ==> p
Proof
  rpt strip_tac >> suspend "lab"
QED

Resume parent[lab]:
  simp[]
QED
"""


def line_of(text: str, needle: str, nth: int = 1) -> int:
    return [i for i, line in enumerate(text.split("\n"), 1) if needle in line][nth - 1]


def goals(goal_list: list[m.Goal] | None) -> list[str]:
    assert goal_list is not None
    return [g.goal for g in goal_list]


def hol_goal_requests(log) -> int:
    return len(client_messages(log, "$/hol/goalState"))


def test_a_line_shows_the_goals_before_its_first_tactic_and_after_its_last(daemon, write_script):
    path = write_script(SCRIPT)
    line = line_of(SCRIPT, "conj_tac")
    view = daemon.call(m.GoalState(str(path), line))
    assert (view.state, view.column, view.line_text) == ("goals", None, "  conj_tac")
    assert goals(view.before) == ["q ∧ p"]
    assert goals(view.goals) == ["q", "p"]
    assert view.goals[0].asms == ["p", "q"] and view.theorem == "swap"


def test_a_resume_line_shows_the_goal_it_resumes_from_its_colon(daemon, write_script):
    text = SCRIPT + RESUMED
    path = write_script(text)
    view = daemon.call(m.GoalState(str(path), line_of(text, "Resume parent[lab]")))
    # HOL answers from the colon on (docs/protocol.md#where-a-goal-state-applies); the fake starts a Resume
    # walk from `T`.
    assert (view.state, view.theorem, goals(view.before), goals(view.goals)) == ("goals", "parent[lab]", ["T"], ["T"])


def test_the_last_tactic_line_before_qed_shows_what_it_proved(daemon, write_script):
    path = write_script(SCRIPT)
    view = daemon.call(m.GoalState(str(path), line_of(SCRIPT, ">- simp[]", nth=2)))
    assert (view.state, goals(view.before), view.goals) == ("proved_here", ["p"], [])
    assert "No goals are left" in view.message


def test_a_blank_line_in_a_proof_shows_the_goals_at_that_point(daemon, write_script):
    path = write_script(SCRIPT)
    blank = line_of(SCRIPT, "conj_tac") + 1
    view = daemon.call(m.GoalState(str(path), blank))
    assert (view.state, view.line_text, goals(view.goals), goals(view.before)) == ("goals", "", ["q", "p"], ["q", "p"])
    assert "no tactic" in view.message


def test_a_line_outside_any_proof_is_not_in_proof_and_names_the_nearest(daemon, write_script):
    path = write_script(SCRIPT)
    view = daemon.call(m.GoalState(str(path), line_of(SCRIPT, "Theorem swap")))
    assert (view.state, view.line_text, view.before, view.goals) == ("not_in_proof", "Theorem swap:", None, [])
    assert view.message.startswith("Line 4 is not inside a Proof") and "swap" in view.message


def test_the_qed_line_shows_what_is_left_at_the_end_of_the_proof(daemon, write_script):
    path = write_script(SCRIPT)
    qed = line_of(SCRIPT, "QED", nth=2)
    view = daemon.call(m.GoalState(str(path), qed))
    assert (view.state, view.line_text, view.theorem) == ("goals", "QED", "unfinished")
    assert goals(view.goals) == goals(view.before) == ["1 + 1 = 3"]
    assert "QED line" in view.message
    done = daemon.call(m.GoalState(str(path), line_of(SCRIPT, "QED")))
    assert (done.state, done.goals) == ("proved_here", [])


@pytest.mark.parametrize("column", [2, 4])
def test_any_column_of_the_qed_line_shows_the_end_of_the_proof(daemon, write_script, column):
    path = write_script(SCRIPT)
    at = daemon.call(m.GoalState(str(path), line_of(SCRIPT, "QED", nth=2), column))
    assert (at.state, at.column, at.theorem, goals(at.goals)) == ("goals", column, "unfinished", ["1 + 1 = 3"])


def test_a_failing_tactic_is_failed_with_the_goals_it_was_given(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    line = line_of(FAILING_SCRIPT, "FAIL_TAC")
    text = FAILING_SCRIPT.split("\n")[line - 1]
    start = text.index("FAIL_TAC") + 1
    under = daemon.call(m.GoalState(str(path), line, start))
    # A position shows the goals before the tactic under it: not yet run.
    assert (under.state, under.error, goals(under.goals)) == ("goals", "", ["q"])
    past = daemon.call(m.GoalState(str(path), line, len(text) + 1))
    assert (past.state, goals(past.goals), past.goals[0].asms) == ("failed", ["q"], ["p", "q"])
    assert "FAIL_TAC" in past.error
    assert past.failed_range == m.Range(line, start, line, len(text) + 1)
    assert f"line {line}" in past.message
    view = daemon.call(m.GoalState(str(path), line))
    assert (view.state, goals(view.before), goals(view.goals)) == ("failed", ["∀p q. p ∧ q ⇒ q"], ["q"])
    assert view.failed_range == past.failed_range


def test_the_line_after_a_failing_tactic_points_back_at_it(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    line = line_of(FAILING_SCRIPT, "FAIL_TAC")
    after = daemon.call(m.GoalState(str(path), line + 1))
    assert after.state == "failed" and after.failed_range.line == line
    assert after.message.startswith(f"An earlier tactic, at line {line}")


def test_a_walk_that_runs_out_of_time_is_failed_and_says_what_to_try(daemon, write_script):
    text = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "rpt strip_tac >> LOOP_TAC")
    path = write_script(text)
    line = line_of(text, "LOOP_TAC")
    view = daemon.call(m.GoalState(str(path), line))
    assert (view.state, view.goals, goals(view.before)) == ("failed", [], [STATEMENT])
    assert "timed out" in view.error
    assert "earlier line" in view.message and "split" in view.message and "diagnostics" in view.message
    assert not daemon.call(m.GoalState(str(path), line)).cached


def test_a_line_view_asks_hol_twice_and_is_then_cached(daemon_factory, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    daemon = daemon_factory(prefetch_per_pass=0)  # `unfinished` fails: nothing asked ahead at its step
    path = write_script(SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    line = line_of(SCRIPT, "conj_tac")
    first = daemon.call(m.GoalState(str(path), line))
    assert hol_goal_requests(log) == 2
    second = daemon.call(m.GoalState(str(path), line))
    assert second.cached and not first.cached and hol_goal_requests(log) == 2
    assert (goals(second.before), goals(second.goals)) == (["q ∧ p"], ["q", "p"])


def test_a_line_view_while_the_file_compiles_says_compiling(daemon, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_DECL_MS", "5000")
    path = write_script(SCRIPT)
    view = daemon.call(m.GoalState(str(path), line_of(SCRIPT, "conj_tac"), wait=3))
    assert (view.state, view.line_text, view.goals, view.before) == ("compiling", "  conj_tac", [], None)
    assert "Ask again" in view.message


def test_a_line_view_while_the_server_starts_says_starting(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_STARTUP_MS", "15000")
    daemon = daemon_factory(stop_timeout_s=0.5)  # stopping a server mid-start waits this twice
    path = write_script(SCRIPT)
    view = daemon.call(m.GoalState(str(path), line_of(SCRIPT, "conj_tac"), wait=0))
    assert (view.state, view.line_text) == ("starting", "  conj_tac")
    assert "ask again" in view.message


def test_a_line_view_in_a_blocked_file_says_blocked(daemon, write_script):
    text = SCRIPT.replace("Ancestors arithmetic", "Ancestors arithmetic mylib")
    path = write_script(text)
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "BLOCKED"
    view = daemon.call(m.GoalState(str(path), line_of(text, "conj_tac")))
    assert view.state == "blocked" and "mylibTheory" in view.message
