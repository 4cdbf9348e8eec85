"""The goal diff, pure: what a tactic did to the goals, from the goals before and after."""

from __future__ import annotations

from holsrv.answers.trials import goaldiff
from holsrv.rpc import messages as m


def g(text: str) -> m.Goal:
    """A goal as HOL's reply gives it, from `a, b ⊢ c` (no comma inside a hypothesis)."""
    asms, _, goal = text.rpartition("⊢")
    return m.Goal(asms=[a.strip() for a in asms.split(",") if a.strip()], goal=goal.strip())


def test_closing_the_only_goal_closes_it_all():
    d = goaldiff.diff([g("p ⊢ p")], [])
    assert (d.goals_before, d.goals_after, d.closed, d.added, d.changed) == (1, 0, [g("p ⊢ p")], [], [])
    assert d.summary == "all 1 goal closed"


def test_splitting_a_conjunction_rewrites_the_goal_and_adds_one():
    d = goaldiff.diff([g("p, q ⊢ q ∧ p")], [g("p, q ⊢ q"), g("p, q ⊢ p")])
    assert d.closed == [] and d.added == [g("p, q ⊢ p")]
    [change] = d.changed
    assert (change.before_index, change.after_index, change.rewritten) == (1, 1, True)
    assert (change.goal_before, change.goal_after, change.hyps_added, change.hyps_removed) == ("q ∧ p", "q", [], [])
    assert d.summary == "1 goal added; goal 1 → 1: conclusion rewritten"


def test_stripping_moves_antecedents_into_the_hypotheses():
    d = goaldiff.diff([g("⊢ p ∧ q ⇒ r")], [g("p, q ⊢ r")])
    [change] = d.changed
    assert change.hyps_added == ["p", "q"] and change.hyps_removed == [] and change.rewritten
    assert d.summary == "goal 1 → 1: +2 hypotheses, conclusion rewritten"


def test_a_hypothesis_removed_without_touching_the_conclusion_names_only_the_hypothesis():
    d = goaldiff.diff([g("p, q ⊢ r")], [g("q ⊢ r")])
    [change] = d.changed
    assert change.hyps_removed == ["p"] and not change.rewritten and change.goal_before == change.goal_after == ""


def test_goals_that_only_moved_are_unchanged_and_the_first_closed_is_named():
    before = [g("⊢ a"), g("⊢ b"), g("⊢ c")]
    d = goaldiff.diff(before, [g("⊢ c"), g("⊢ b")])
    assert (d.unchanged, d.closed, d.added, d.changed) == (2, [g("⊢ a")], [], [])
    assert d.summary == "1 goal closed"


def test_hypotheses_compare_as_a_multiset():
    assert goaldiff.diff([g("p, q ⊢ r")], [g("q, p ⊢ r")]).summary == "no change to the goals"
    d = goaldiff.diff([g("p ⊢ r")], [g("p, p ⊢ r")])
    assert d.changed[0].hyps_added == ["p"]


def test_from_no_goals_every_goal_is_added():
    d = goaldiff.diff([], [g("⊢ a")])
    assert d.added == [g("⊢ a")] and d.summary == "1 goal added"
