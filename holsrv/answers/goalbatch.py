"""goalState at many positions in one call: one entry per position, in order.

The file-level work is done once for the batch: one read and sync, one wait
for the compile (a state of the file, such as compiling, is said for every
position after the first that meets it), one freshness stamp.  HOL keeps the
state after each tactic of a walk that finished (PROTOCOL.md §11.5), so
positions asked down a proof run each tactic once, and each position's
answer is cached as a single goalState's is.  A position's own error (a line
past the end) is its entry's, never the call's.
"""

from __future__ import annotations

from holsrv import textinfo
from holsrv.answers import goals
from holsrv.answers.common import Context, note, opened, replace
from holsrv.errors import HolsrvError, ServerDied, ServerTimeout
from holsrv.rpc import limits
from holsrv.rpc import messages as m

# States of the file, not of the position: HOL would say them at every later position too.
_FILE_STATES = frozenset({"starting", "compiling", "blocked"})
_ENTRY_FIELDS = [name for name in m.GoalStateEntry.__struct_fields__ if name != "code"]


async def goal_states(ctx: Context, req: m.GoalState, client: str) -> m.GoalStatesResult:
    """The goals at each of `req.positions`, within one `req.wait` for them all."""
    limits.check_positions(req.line, req.positions)
    positions = req.positions or []
    deadline = ctx.clock() + max(0.0, req.wait)
    async with opened(ctx, req.file, client, req.wait, tolerate_start=True) as (src, lease):
        text = textinfo.of(src.text).lines  # split once per text, for every position
        entries: list[m.GoalStateEntry] = []
        ages = [0.0]
        said: m.GoalStateEntry | None = None  # a state of the file, or the server's error, for the rest
        for line, column in positions:
            try:
                text.to_lsp(line, column or 1, "utf-8")  # a position not in the text: its entry's error
                if said is not None:
                    line_text = text.lines[line - 1] if column is None else ""
                    entries.append(replace(said, line=line, column=column, line_text=line_text))
                    continue
                # Past the deadline a position is still asked, once: HOL only says pending then.
                result = await goals.at_position(ctx, src, lease, text, (line, column), deadline)
            except (ServerDied, ServerTimeout) as err:
                # No later position would fare better on this server: the same error, not asked again.
                said = _refused(line, column, err)
                entries.append(said)
                continue
            except HolsrvError as err:
                entries.append(_refused(line, column, err))
                continue
            if result.cached and result.freshness is not None:
                ages.append(result.freshness.age_s)
            entries.append(m.GoalStateEntry(**{name: getattr(result, name) for name in _ENTRY_FIELDS}))
            if result.state in _FILE_STATES:
                said = entries[-1]
        # The oldest cached entry's age is the answer's; `stamp` fills in the rest.
        age = m.Freshness(src.hash, age_s=max(ages)) if max(ages) else None
        return m.GoalStatesResult(
            file=str(src.path), content_hash=src.hash, server=note(lease), positions=entries, freshness=age
        )


def _refused(line: int, column: int | None, err: HolsrvError) -> m.GoalStateEntry:
    return m.GoalStateEntry(line=line, column=column, state="error", message=str(err), code=err.code)
