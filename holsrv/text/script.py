"""What callers ask of a HOL script's text: its proof blocks and where an
edit of it runs (its pool names, cheats and positions are `textinfo.of`'s).

The HOL server is the authority on compiling; the daemon only needs the
block structure (where each `Theorem … Proof … QED` lies, for edits that run
from one proof into the next) and the uses of `cheat` (which the server's
pool reports as proved).  Both skip comments, which nest in SML, and string
literals.

Each answer comes from `textinfo`, which computes a text's facts once (by
the plain scanners below it) and keeps them: asking again costs a lookup.
"""

from __future__ import annotations

from collections.abc import Callable

from holsrv.text import editspan, textinfo
from holsrv.text.positions import LineIndex  # noqa: F401  # re-exported: callers use script.LineIndex
from holsrv.text.scanner import ProofBlock
from holsrv.text.stepping import CHARS_PER_STEP, Steps, run


def proof_blocks(text: str) -> list[ProofBlock]:
    """Every proof block in `text`, in order."""
    return list(textinfo.of(text).blocks)


def edit_span(old: str, new: str) -> tuple[int, int, int]:
    """(first differing offset, end of the changed region in old, end in new)."""
    return run(edit_span_steps(old, new))


def edit_span_steps(old: str, new: str) -> Steps[tuple[int, int, int]]:
    """`edit_span` in steps: comparing two 4 MB texts takes milliseconds."""
    start = yield from _agreeing(editspan.prefix_within, old, new, min(len(old), len(new)))
    same_tail = yield from _agreeing(editspan.suffix_within, old, new, min(len(old), len(new)) - start)
    return start, len(old) - same_tail, len(new) - same_tail


def _agreeing(within: Callable[[str, str, int, int], int], a: str, b: str, limit: int) -> Steps[int]:
    """How far `a` and `b` agree (at most `limit`), a step's worth of characters compared at a time."""
    at = 0
    while at < limit:
        end = min(at + CHARS_PER_STEP, limit)
        found = within(a, b, at, end)
        if found < end:
            return found
        at = end
        yield
    return limit


def spilling_proof(old: str, new: str, span: tuple[int, int, int] | None = None) -> ProofBlock | None:
    """The proof whose body an edit starts in and runs past the QED of, if any
    (`span`: the edit's `edit_span`, if known).

    The HOL server decides from where an edit starts whether it is confined to
    one proof.  Such an edit would be taken as tactic-only, leaving the checks
    of the proofs it also changed running on stale text.
    """
    start, old_end, _ = span or edit_span(old, new)
    for block in textinfo.of(old).blocks_near(start):
        if block.body_start <= start < block.body_end:
            return block if old_end > block.body_end else None
    return None
