"""The names of the states answers give, each defined once: a goalState position's, a `try`
candidate's, and what `try --apply` did to the file.

`StrEnum`s: a member is its wire string (msgspec encodes it as that string), so the wire is
unchanged; the messages' fields stay `str`, since a client compares strings and an older client
must still decode a state it does not know.
"""

from __future__ import annotations

import enum


class PositionState(enum.StrEnum):
    """What a goalState answer says of a position (`GoalStateResult.state`)."""

    GOALS = "goals"  # goals below
    PROVED_HERE = "proved_here"  # no goals are left at this point
    CHEATED = "cheated"  # none are left only because of cheat: not proved
    FAILED = "failed"  # the tactic here fails (or a compile error comes first)
    NOT_IN_PROOF = "not_in_proof"  # not inside Proof…QED
    COMPILING = "compiling"  # ask again shortly
    STARTING = "starting"  # ask again shortly
    BLOCKED = "blocked"  # the file's dependencies could not be loaded
    LOOPING = "looping"  # the proof here loops, so HOL is not asked
    UNSUPPORTED = "unsupported"  # this HOL server has no goal-state walker
    ERROR = "error"  # in a batch (`GoalStatesResult`): this position alone was refused


# The states that are the file's, not the position's: asking again later may say more.
FILE_STATES = frozenset({PositionState.STARTING, PositionState.COMPILING, PositionState.BLOCKED})
UNSETTLED = frozenset({PositionState.COMPILING, PositionState.STARTING})


class CandidateState(enum.StrEnum):
    """What `try` says of one candidate (`TryCandidate.state`)."""

    PROVED = "proved"  # the proof checks with it in place
    PROVED_HERE = "proved_here"  # no goals left at this point, but the proof does not check
    GOALS = "goals"
    FAILED = "failed"
    TIMED_OUT = "timed_out"  # cut off at the timeout (a loop, or very slow); never walked
    NOT_TRIED = "not_tried"  # HOL never took its text, see its message


class AppliedState(enum.StrEnum):
    """What `try` with `apply` did to the file (`Applied.state`)."""

    KEPT = "kept"
    ROLLED_BACK = "rolled_back"
    ROLLBACK_SKIPPED = "rollback_skipped"
    REFUSED = "refused"


class CheckStatus(enum.StrEnum):
    """One of `verify`'s checks (`VerifyCheck.status`)."""

    PASSED = "passed"
    FAILED = "failed"
    UNCHECKED = "unchecked"  # it could not be made (its message says why)
