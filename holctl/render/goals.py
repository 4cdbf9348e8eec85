"""The text of answers about goals: a goal state, a trial's candidates, the goals' diff."""

from __future__ import annotations

from holctl.render.common import _footer, _indented, _range
from holsrv.rpc.messages import (
    Applied,
    Goal,
    GoalsDiff,
    GoalStateEntry,
    GoalStateResult,
    GoalStatesResult,
    Hole,
    HolesResult,
    TryCandidate,
    TryResult,
)
from holsrv.rpc.words import duration

SEPARATOR = "-" * 36
# "ok" is what a daemon of protocol 1 said for "goals" and "proved_here".
_GOAL_STATES = ("goals", "proved_here", "cheated", "failed", "ok")


def _goal_state(reply: GoalStateResult) -> list[str]:
    return _at(reply) + _footer(reply.content_hash, reply.server, reply.cached)


def _goal_states(reply: GoalStatesResult) -> list[str]:
    """One block per position, headed by it, in the order asked; one footer for them all."""
    lines = []
    for entry in reply.positions:
        at = f"line {entry.line}" + (f", column {entry.column}" if entry.column is not None else "")
        lines += [f"== {at}{' (cached)' if entry.cached else ''} ==",
                  *([f"{entry.code}: {entry.message}"] if entry.state == "error" else _at(entry))]
    return lines + _footer(reply.content_hash, reply.server)


def _holes(reply: HolesResult) -> list[str]:
    """A headline, then one block per hole, headed by its kind and place; one footer for them all."""
    n = len(reply.holes)
    if n:
        head = f"HOLES: {n} unfinished proof hole{'s' if n != 1 else ''} (verdict {reply.verdict})"
    else:
        head = f"NO HOLES: every proof is finished (verdict {reply.verdict})"
    lines = [head]
    if reply.verdict not in ("OK", "FAILED", "CHEATS") or not reply.complete:
        lines.append(reply.headline)
    for hole in reply.holes:
        lines += _hole(hole)
    if reply.message:
        lines.append(reply.message)
    return lines + _footer(reply.content_hash, reply.server)


def _hole(hole: Hole) -> list[str]:
    at = f"line {hole.line}" + (f", column {hole.column}" if hole.column is not None else "")
    lines = [f"== {hole.kind}: {hole.theorem} (line {hole.theorem_line}), hole at {at} =="]
    if hole.detail and hole.kind not in ("cheat",):
        first, *rest = hole.detail.strip().splitlines() or [""]
        lines += [f"{hole.kind}: {first}", *("    " + line for line in rest)]
    if hole.goals is None:
        return lines + ([f"not walked: {hole.unwalked}"] if hole.unwalked else [])
    if hole.goals.state == "error":
        return lines + [f"{hole.goals.code}: {hole.goals.message}"]
    return lines + _at(hole.goals)


def _at(reply: GoalStateResult | GoalStateEntry) -> list[str]:
    """The goals at one position, without the footer."""
    if reply.state not in _GOAL_STATES:
        return [reply.message]
    lines = [f"theorem {reply.theorem}, step {reply.step}"]
    if reply.column is None and reply.line_text:
        lines.append(f"line {reply.line}: {reply.line_text.strip()}")
    if reply.provisional:
        lines.append("provisional: the file is still compiling, so this answer may change; ask again")
    if reply.message:
        lines.append(reply.message)
    lines += reply.context
    if reply.note:
        lines.append(f"note: {reply.note}")
    if reply.error:
        where = f" at {_range(reply.failed_range)}" if reply.failed_range else ""
        first, *rest = reply.error.splitlines() or [""]
        lines += [f"error{where}: {first}", *("    " + line for line in rest)]
    if reply.before is not None:
        lines += ["before the line:", *_goals(reply.before, "  "), "after the line:"]
    # No goals after cheat is not a proof: the message says so, and nothing reads "proved".
    proved = not reply.error and reply.state != "cheated"
    return lines + _goals(reply.goals, "  " if reply.before is not None else "", proved=proved)


def _goals(goals: list[Goal], indent: str = "", proved: bool = True) -> list[str]:
    """Numbered goals in HOL's layout; none at all reads as proved (unless a tactic failed)."""
    if not goals:
        return [indent + "no goals: proved at this point"] if proved else []
    lines = []
    for n, goal in enumerate(goals, 1):
        lines += [f"{indent}goal {n} of {len(goals)}:", *(indent + line for line in _goal(goal))]
    return lines


def _goal(goal: Goal) -> list[str]:
    """HOL's own layout: numbered assumptions, a rule, then the goal."""
    lines = []
    for n, asm in enumerate(goal.asms):
        first, *rest = asm.splitlines() or [""]
        lines += [f"  {n}.  {first}", *("      " + line for line in rest)]
    if goal.asms:
        lines.append("  " + SEPARATOR)
    return lines + _indented(goal.goal, "  ")


def _diff(d: GoalsDiff) -> list[str]:
    """The summary, then each changed goal's hypotheses and conclusion."""
    lines = [f"diff: {d.summary}"]
    for c in d.changed:
        lines += [f"  goal {c.before_index} → {c.after_index}:"]
        lines += [f"    + {h}" for h in c.hyps_added] + [f"    - {h}" for h in c.hyps_removed]
        if c.rewritten:
            lines += [f"    was: {c.goal_before}", f"    now: {c.goal_after}"]
    return lines


# -- trials


def _try(reply: TryResult) -> list[str]:
    whole = "the whole proof " if reply.whole_proof else ""
    lines = [f"theorem {reply.theorem}, line {reply.line}: tried in place of {whole}{reply.replaced!r}", reply.message]
    if reply.blocked is None:  # a blocked file has no goals, which must not read as proved
        lines += ["goals before:", *_goals(reply.before, "  ")]
    for n, candidate in enumerate(reply.candidates, 1):
        lines += _candidate(n, candidate)
    footer = _footer(reply.content_hash, reply.server) if reply.server else []
    return lines + _applied(reply.applied) + [f"({duration(reply.time_s)} in all)", *footer]


def _applied(a: Applied | None) -> list[str]:
    """What --apply did to the file (its message is in the trial's)."""
    if a is None:
        return []
    why = f" ({a.reason})" if a.reason else ""
    written = f", content {a.content_hash[:12]}" if a.content_hash else ""
    return [f"applied: {a.state.upper()}{why}: {_range(a.range)} {a.text!r}{written}"]


def _candidate(n: int, c: TryCandidate) -> list[str]:
    proof = f"; proof {c.proof.status}" if c.proof else ""
    taken = f", after HOL took {duration(c.taken_s)} to take it" if c.taken_s is not None and c.taken_s >= 1.0 else ""
    first, *more = c.tactic.strip().splitlines() or [""]
    shown = f"{first} … ({len(more) + 1} lines)" if more else first  # a whole proof: its first line
    lines = [f"[{n}] {shown}: {c.state.upper()} in {duration(c.time_s)}{taken}{proof}"]
    if c.message:
        lines.append("    " + c.message)
    if c.error:
        where = f" at {_range(c.failed_range)}" if c.failed_range else ""
        if c.candidate_range is not None:
            where += f" ({_range(c.candidate_range)} of the candidate)"
        first, *rest = c.error.splitlines() or [""]
        lines += [f"    error{where}: {first}", *("      " + line for line in rest)]
    if c.proof and c.proof.detail and c.state != "proved":
        lines.append(f"    proof: {c.proof.detail}")
    if c.hint:
        lines.append(f"    hint: {c.hint}")
    if c.state == "goals":
        lines += _goals(c.goals, "    ")
    elif c.state == "proved" and c.goals:
        lines += ["    after it (closed by the tactics that follow):", *_goals(c.goals, "      ")]
    if c.diff is not None and c.state == "goals":
        lines += ["    " + line for line in _diff(c.diff)[1:]]
    return lines
