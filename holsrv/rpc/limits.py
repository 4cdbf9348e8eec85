"""The bounds on what a request may ask for, shared by the daemon and its clients.

The daemon refuses a request outside them with `bad_request` before doing
any work; clients check the same bounds so a typo fails before it is sent,
and size their reply timeouts from bounded values.  Standard library only:
holctl imports it.
"""

from __future__ import annotations

import math

from holsrv.errors import BadRequest, TooManyPositions

# Longest `wait` (and eval `timeout`) a request may ask for.  A wait that
# runs out cancels nothing, so a longer one is better spent as a second call.
MAX_WAIT_S = 3600.0
# How long a trial waits for HOL to take a candidate's text: HOL first stops
# the check of the candidate before (about 2 s for a looping one on a real
# HOL), and that is not the candidate's own time.
TRY_RELEASE_FLOOR_S = 10.0


# A request to a healthy server (a walk, a hover) may take a second or two even
# when the caller's wait is spent: that much it always gets.
MIN_REQUEST_S = 2.0
# Positions one goalState call may ask about: enough to step through a long
# proof a line at a time, few enough that one call cannot hold a server long.
MAX_POSITIONS = 64


def check_positions(line: int, positions: list | None) -> None:
    """BadRequest unless a goalState names exactly one of `line` (0: none) and `positions`,
    and `positions` holds 1 to MAX_POSITIONS of them (TooManyPositions past it)."""
    if positions is None:
        return
    if line:
        raise BadRequest("goalState: give line (and column) for one position or positions for several, not both")
    if not positions:
        raise BadRequest("goalState: positions is empty: give at least one [line, column] (column optional)")
    if len(positions) > MAX_POSITIONS:
        raise TooManyPositions(
            f"goalState: {len(positions)} positions, more than the {MAX_POSITIONS} one call answers: "
            "split them over several calls (answers already given are cached)"
        )


def try_release_s(timeout: float) -> float:
    """The most a trial waits for HOL to take one candidate whose own limit is `timeout`."""
    return max(timeout, TRY_RELEASE_FLOOR_S)


# Request fields that are seconds, and what to do instead of a bad value.
_ADVICE = {
    "wait": "0 answers with what is known now; nothing is cancelled when a wait runs out, so to wait "
    "longer call again",
    "timeout": "the default is 120",
    "defer_after": "past it the call answers with a job handle and goes on as a job; leave it out to wait "
    "for the answer",
}


def seconds_problem(name: str, value: object) -> str | None:
    """Why `value` is not a usable number of seconds for field `name`, or None if it is."""
    if value is None:
        return None  # the daemon's default
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{name} must be a number of seconds, not {type(value).__name__}"
    if not (math.isfinite(value) and 0 <= value <= MAX_WAIT_S):
        return (
            f"{name} must be a finite number of seconds from 0 to {MAX_WAIT_S:g}, not {value!r}: "
            f"pass one such as 25 ({_ADVICE.get(name, 'or leave it out for the default')})"
        )
    return None


def check_request(request: object) -> None:
    """Raise BadRequest if a seconds field of `request` is NaN, infinite, negative or over MAX_WAIT_S."""
    for name in _ADVICE:
        value = getattr(request, name, None)
        if value is None or (type(value) is float or type(value) is int) and 0 <= value <= MAX_WAIT_S:
            continue  # the usual case, at once (every call takes this): NaN and infinities fail the comparison
        problem = seconds_problem(name, value)
        if problem is not None:
            raise BadRequest(f"{_op(request)}: {problem}")


def _op(request: object) -> str:
    """The request's name as clients spell it (`eval`, `goalState`), not its class's (`Eval`)."""
    config = getattr(type(request), "__struct_config__", None)
    tag = getattr(config, "tag", None)
    return tag if isinstance(tag, str) else type(request).__name__


def bounded(seconds: float) -> float:
    """`seconds` clamped to 0..MAX_WAIT_S (NaN as 0): what a client sizes a reply timeout from."""
    return min(MAX_WAIT_S, seconds) if seconds > 0 else 0.0
