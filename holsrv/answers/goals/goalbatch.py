"""goalState at many positions in one call: one entry per position, in order.

The file-level work is done once for the batch: one read and sync, one wait
for the compile (a state of the file, such as compiling, is said for every
position after the first that meets it), one freshness stamp.  HOL keeps the
state after each tactic of a walk that finished (docs/protocol.md#goal-state-walks), so
positions asked down a proof run each tactic once, and each position's
answer is cached as a single goalState's is.  A position's own error (a line
past the end) is its entry's, never the call's.
"""

from __future__ import annotations

from holsrv.answers.common import Context, note, opened, replace
from holsrv.answers.goals import goals
from holsrv.answers.states import FILE_STATES, PositionState
from holsrv.disk.files import Script
from holsrv.errors import HolsrvError, ServerDied, ServerTimeout
from holsrv.pool.pool import Lease
from holsrv.rpc import limits
from holsrv.rpc import messages as m
from holsrv.text import textinfo

# States of the file, not of the position: HOL would say them at every later position too.
_ENTRY_FIELDS = [name for name in m.GoalStateEntry.__struct_fields__ if name != "code"]


async def goal_states(ctx: Context, req: m.GoalState, client: str) -> m.GoalStatesResult:
    """The goals at each of `req.positions`, within one `req.wait` for them all."""
    limits.check_positions(req.line, req.positions)
    deadline = ctx.clock() + max(0.0, req.wait)
    async with opened(ctx, req.file, client, req.wait, tolerate_start=True) as (src, lease):
        walk = Walk(ctx, src, lease, deadline)
        entries = [await walk.entry(line, column) for line, column in req.positions or []]
        # The oldest cached entry's age is the answer's; `stamp` fills in the rest.
        age = m.Freshness(src.hash, age_s=walk.oldest) if walk.oldest else None
        return m.GoalStatesResult(
            file=str(src.path), content_hash=src.hash, server=note(lease), positions=entries, freshness=age
        )


class Walk:
    """The positions of one batch, asked in turn on one opened text (`holes` walks its holes so too)."""

    def __init__(self, ctx: Context, src: Script, lease: Lease, deadline: float) -> None:
        self.ctx, self.src, self.lease, self.deadline = ctx, src, lease, deadline
        self.text = textinfo.of(src.text).lines  # split once per text, for every position
        self.said: m.GoalStateEntry | None = None  # a state of the file, or the server's error, for the rest
        self.oldest = 0.0  # seconds, of the cached answers used

    async def entry(self, line: int, column: int | None) -> m.GoalStateEntry:
        try:
            self.text.to_lsp(line, column or 1, "utf-8")  # a position not in the text: its entry's error
            if self.said is not None:
                line_text = self.text.lines[line - 1] if column is None else ""
                return replace(self.said, line=line, column=column, line_text=line_text)
            # Past the deadline a position is still asked, once: HOL only says pending then.
            result = await goals.at_position(self.ctx, self.src, self.lease, self.text, (line, column), self.deadline)
        except (ServerDied, ServerTimeout) as err:
            # No later position would fare better on this server: the same error, not asked again.
            self.said = _refused(line, column, err)
            return self.said
        except HolsrvError as err:
            return _refused(line, column, err)
        if result.cached and result.freshness is not None:
            self.oldest = max(self.oldest, result.freshness.age_s)
        entry = m.GoalStateEntry(**{name: getattr(result, name) for name in _ENTRY_FIELDS})
        if result.state in FILE_STATES:
            self.said = entry
        return entry


def _refused(line: int, column: int | None, err: HolsrvError) -> m.GoalStateEntry:
    return m.GoalStateEntry(line=line, column=column, state=PositionState.ERROR, message=str(err), code=err.code)
