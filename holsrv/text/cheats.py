"""A script's uses of `cheat`, read from its masked code and its proof blocks.

HOL's pool reports a proof that uses `cheat` (CHEAT_TAC, mk_thm) as
proved; the daemon finds the uses itself.  Each counts in tactic or SML
code only: comments and strings are masked already, and a theorem's
statement, a definition's body and the Theory line are terms or names
(`terms`), where `cheat` is only an identifier.

Plain functions over a text, below a text's facts (`textinfo`, which runs
them a bounded slice at a time): each takes a stretch of the code or a
slice of items.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

import msgspec

from holsrv.text.scanner import Marks, ProofBlock, first

# `cheat` is CHEAT_TAC; mk_thm makes a theorem without proof.  Each counts
# as a whole word only, and not as a qualified name's last part (`Foo.cheat`).
WORDS = ("cheat", "CHEAT_TAC", "mk_thm")
_NOT_BEFORE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_'.")
_NOT_AFTER = _NOT_BEFORE - {"."}


class Cheat(msgspec.Struct, frozen=True, gc=False):
    theorem: str  # "" when not inside a theorem
    offset: int


def occurrences(code: str, word: str, start: int, stop: int) -> list[int]:
    """Offsets of `word` as a whole word in `code` starting in [start, stop),
    in order (str.find beats a regex with lookarounds by an order of magnitude here)."""
    found = []
    # A word starting before `stop` may end past it.
    at, reach = code.find(word, start, stop + len(word) - 1), stop + len(word) - 1
    while 0 <= at < stop:
        end = at + len(word)
        if (at == 0 or code[at - 1] not in _NOT_BEFORE) and (end == len(code) or code[end] not in _NOT_AFTER):
            found.append(at)
        at = code.find(word, at + 1, reach)
    return found


def statements(blocks: Iterable[ProofBlock]) -> list[tuple[int, int]]:
    """Each block's declaration up to its proof: a term, where `cheat` is a name."""
    return [(b.start, b.body_start) for b in blocks]


def theory_lines(code: str, marks: Marks) -> list[tuple[int, int]]:
    """Each `Theory` line: names only."""
    regions = []
    for at in marks.theories:
        line_end = code.find("\n", at)
        regions.append((at, len(code) if line_end < 0 else line_end))
    return regions


def term_bodies(code: str, marks: Marks, heads: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The bodies of the definition-like declarations `heads` (some of
    `marks.term_heads`): each up to its `End` or `Termination`, and never past
    the next top-level declaration, so a missing `End` cannot hide the code after it."""
    regions = []
    for at, keyword_end in heads:
        limit = marks.limit(at, len(code))
        end = first(marks.term_ends, keyword_end, limit)
        regions.append((at, limit if end is None else end))
    return regions


def merge(regions: Iterable[tuple[int, int]], merged: list[tuple[int, int]]) -> None:
    """Add sorted half-open `regions` (following those merged before) to `merged`,
    joining those that overlap, so one bisection finds the one holding an offset."""
    for start, end in regions:
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))


class Owners:
    """What decides whether a cheat word counts, and in which theorem."""

    def __init__(self, terms: list[tuple[int, int]], term_starts: list[int],
                 blocks: Sequence[ProofBlock], block_starts: list[int]) -> None:
        """`terms` merged (see `merge`); the starts are theirs and the blocks', for bisection."""
        self.terms, self.term_starts = terms, term_starts
        self.blocks, self.block_starts = blocks, block_starts

    def cheats(self, words: Iterable[int]) -> list[Cheat]:
        """The cheats among the cheat words at `words`: those outside terms."""
        found = []
        for at in words:
            region = bisect.bisect_right(self.term_starts, at) - 1
            if region >= 0 and at < self.terms[region][1]:
                continue
            # Blocks do not overlap: each ends before the next declaration.
            block = bisect.bisect_right(self.block_starts, at) - 1
            owner = self.blocks[block].name if block >= 0 and at < self.blocks[block].end else ""
            found.append(Cheat(owner, at))
        return found
