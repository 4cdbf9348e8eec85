"""What a tactic did to the goals: a structured diff of two goal lists.

Pure: goals in, a `GoalsDiff` out.  Goals that are equal (same conclusion,
same hypotheses as a multiset) on both sides are unchanged, wherever they
moved; the rest pair up in order, because HOL replaces the goal a tactic
acts on with its results in place (goals[0] before → the first new goals).
A before goal left without a partner was closed, an after goal without one
was added.
"""

from __future__ import annotations

from collections import Counter

from holsrv.rpc import messages as m


def diff(before: list[m.Goal], after: list[m.Goal]) -> m.GoalsDiff:
    """How `after` differs from `before` (both in HOL's order, the current goal first)."""
    left = list(range(len(before)))
    right = list(range(len(after)))
    unchanged = 0
    for j in list(right):
        i = next((i for i in left if _same(before[i], after[j])), None)
        if i is not None:
            left.remove(i)
            right.remove(j)
            unchanged += 1
    changed = [_change(i, before[i], j, after[j]) for i, j in zip(left, right, strict=False)]
    paired = min(len(left), len(right))
    closed = [before[i] for i in left[paired:]]
    added = [after[j] for j in right[paired:]]
    result = m.GoalsDiff(
        goals_before=len(before), goals_after=len(after), unchanged=unchanged,
        closed=closed, added=added, changed=changed,
    )
    result.summary = summary(result)
    return result


def _same(a: m.Goal, b: m.Goal) -> bool:
    return a.goal == b.goal and Counter(a.asms) == Counter(b.asms)


def _change(i: int, a: m.Goal, j: int, b: m.Goal) -> m.GoalChange:
    was, now = Counter(a.asms), Counter(b.asms)
    return m.GoalChange(
        before_index=i + 1, after_index=j + 1,
        hyps_added=list((now - was).elements()), hyps_removed=list((was - now).elements()),
        rewritten=a.goal != b.goal,
        # The conclusions only when they differ: the hypotheses say the rest.
        goal_before=a.goal if a.goal != b.goal else "", goal_after=b.goal if a.goal != b.goal else "",
    )


def summary(d: m.GoalsDiff) -> str:
    """One line an agent can read instead of the goals."""
    if d.goals_before and not d.goals_after:
        return f"all {_goals(d.goals_before)} closed"
    if not d.closed and not d.added and not d.changed:
        return "no change to the goals"
    parts = []
    if d.closed:
        parts.append(f"{_goals(len(d.closed))} closed")
    if d.added:
        parts.append(f"{_goals(len(d.added))} added")
    for c in d.changed:
        what = []
        if c.hyps_added:
            what.append(f"+{len(c.hyps_added)} hypothes{'is' if len(c.hyps_added) == 1 else 'es'}")
        if c.hyps_removed:
            what.append(f"-{len(c.hyps_removed)} hypothes{'is' if len(c.hyps_removed) == 1 else 'es'}")
        if c.rewritten:
            what.append("conclusion rewritten")
        parts.append(f"goal {c.before_index} → {c.after_index}: {', '.join(what)}")
    return "; ".join(parts)


def _goals(n: int) -> str:
    return f"{n} goal{'' if n == 1 else 's'}"
