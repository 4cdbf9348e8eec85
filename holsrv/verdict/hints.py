"""One short hint for a failed proof or compile error, chosen by the class of HOL's message.

An ordered table of (pattern over HOL's words, hint template); the first that
matches wins, so a message gets at most one hint.  HOL's own message is never
replaced: the hint goes beside it.  The wordings are HOL's exact ones, from
the recordings (transcripts `error-classes.jsonl`, `candidate-loops.jsonl`,
`eval-errors.jsonl`).  Pure: testable without a server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Context:
    """Where the message is about: the proof's first line (1-based), if known; and
    whether it is about a proof at all (eval's SML is not one)."""

    line: int | None = None
    in_proof: bool = True


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    template: str  # may use {name} (the pattern's group `name`) and {at} (" at line N" or "")
    # For code given to eval: None keeps the proof's hint, "" gives none (a
    # proof's advice would mislead there).
    in_eval: str | None = None


def _rule(pattern: str, template: str, in_eval: str | None = "") -> _Rule:
    return _Rule(re.compile(pattern), template, in_eval)


_RULES: tuple[_Rule, ...] = (
    # error-classes: `Value or constructor (NO_SUCH_THM) has not been declared` (unknown tactic or theorem).
    _rule(r"Value or constructor \((?P<name>[^)\s]+)\) has not been declared",
          "`{name}` is not defined here: find it with `search {name}` (holctl search / the search tool), "
          "or add the theory that defines it to Ancestors", in_eval=None),
    # error-classes: `Tactical.THEN1: goal completely solved by first tactic`.
    _rule(r"goal completely solved by first tactic",
          "the goal was already solved before a branch: drop the `>-` (or THEN1) and the tactic after it"),
    # error-classes: `Tactical.TAC_PROOF: unsolved goals`; Holmake's `first subgoal not solved`.
    _rule(r"unsolved goals|first subgoal not solved",
          "tactics ran but goals remain: ask goalState{at} at the last step to see what is left"),
    # error-classes: `Induct_on: … No var with name "m" free in goal`.
    _rule(r'No var with name "(?P<name>[^"]*)" free in goal',
          "`{name}` is not a variable of the goal: induct on one the goal quantifies (see goalState)"),
    # error-classes: `Q.EXISTS_TAC: goal not an exists` (qexists_tac on a ∀ goal).
    _rule(r"EXISTS_TAC: goal not an exists",
          "the goal is not ∃: strip the ∀ and ⇒ first (`rpt strip_tac`), then qexists_tac"),
    # error-classes: `Tactical.FIRST_ASSUM:` (first_x_assum with no assumptions).
    _rule(r"FIRST_ASSUM",
          "no assumption fitted (there may be none): move hypotheses into the assumptions with "
          "`rpt strip_tac` first"),
    # error-classes: `Tactical.FAIL_TAC: NO_TAC` (decide_tac on a goal that is not arithmetic).
    _rule(r"FAIL_TAC: NO_TAC",
          "the tactic does not apply to this goal: try a `simp[]` or `gvs[]` step first"),
    # error-classes: `folTools.FOL_FIND: no solution found`; `metis: no solution found`; numLib.DECIDE.
    _rule(r"FOL_FIND: no solution found|metis: no solution found|numLib\.DECIDE",
          "the decision procedure found no proof: give it the lemmas (`simp[LEMMA]`, `gvs[LEMMA]`, "
          "`metis_tac[LEMMA]`); keep `decide_tac` for linear arithmetic"),
    # error-classes: statements HOL cannot parse (`Don't expect to find …`); parse recovery (`expected …`).
    _rule(r"Don't expect to find|\bexpected\b|unclosed quotation",
          "a syntax error: a theorem reads `Theorem name:` ⏎ statement ⏎ `Proof` ⏎ tactics ⏎ `QED`, "
          "with terms in ‘…’ and brackets balanced",
          in_eval="an SML syntax error: give whole declarations or expressions, each ended by `;`, "
                  "with terms in ‘…’ and brackets balanced"),
    # candidate-loops / the daemon's own words: a timed-out or looping step.
    _rule(r"PROBABLY LOOPING|\btimed[ _]out\b|\bdiverged\b",
          "a step runs away: split the proof{at} and check one step at a time (goalState, try) to find it"),
)


def hint(message: str, context: Context = Context()) -> str:
    """The hint for HOL's `message`, "" when it is of no class the table knows."""
    for rule in _RULES:
        found = rule.pattern.search(message)
        if found is None:
            continue
        named = found.groupdict().get("name") or ""
        at = f" at line {context.line}" if context.line is not None else ""
        template = rule.template if context.in_proof or rule.in_eval is None else rule.in_eval
        return template.format(name=named, at=at)
    return ""
