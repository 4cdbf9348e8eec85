"""A script's proof blocks, read from its masked code (`masking`).

The HOL server is the authority on compiling; the daemon only needs the
block structure: where each `Theorem … Proof … QED` lies (for edits that run
from one proof into the next, and to name the proof a line belongs to) and
the name HOL's proof pool gives it.  Everything is found from the
column-0 words of the code, in one regex pass (`mark`).

Plain functions over a text, below a text's facts (`textinfo`, which runs
them a bounded slice at a time, so a 4 MB script never holds the event
loop): each takes a stretch (`mark`: a count of words from an offset) or a
slice of items (`blocks`, `pool_names`), so its cost is bounded by its
caller.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Sequence

import msgspec

# Any column-0 word that starts a new top-level declaration ends the previous one.
_DECLS = frozenset(
    "Theorem Triviality Resume Definition Inductive CoInductive Datatype Type Overload Theory "
    "Finalise val fun open local structure datatype type".split()
)
# Every column-0 word that matters, found in one pass over the code with a
# newline put in front (`padded`: a pattern that starts with a literal
# newline is searched far faster than one that starts with `^`).  A match's
# start in the padded code is its word's offset in the code.
# A column-0 `end` closes a column-0 `local` (its theorems HOL proves while
# compiling, outside its proof pool).
_LINE_WORD = re.compile(r"\n(" + "|".join(sorted(_DECLS | {"Proof", "QED", "End", "Termination", "end"})) + r")\b")
_HEAD_NAME = re.compile(r"[ \t]+([A-Za-z0-9_']+(?:\[[^\]\n]*\])?)")
_PROOF_HEADS = frozenset({"Theorem", "Triviality", "Resume"})
# Declarations whose text is HOL terms and names, up to `End` (or `Termination`,
# whose tactics are code); the old `Datatype `…`` form is a quotation anyway.
_TERM_HEADS = frozenset({"Definition", "Inductive", "CoInductive"})
_DATATYPE_COLON = re.compile(r"\s*:")


# A script's facts are kept per text, one object per proof and cheat:
# structs the cycle collector never tracks (they hold only strings and
# ints), so a file of 30,000 proofs adds nothing to the daemon's full
# collections, which otherwise grow to tens of milliseconds on the loop.
class ProofBlock(msgspec.Struct, frozen=True, gc=False):
    """One `Theorem name: … Proof … QED` (or `Resume …: … QED`), as character offsets."""

    name: str
    start: int  # first character of the declaration keyword
    body_start: int  # first character after `Proof` (or the Resume `:`)
    body_end: int  # first character of `QED` (or the declaration's end if QED is missing)
    end: int  # just past `QED`
    # The `local … in … end` holding it, as (offset of `local`, just past `end`);
    # None at top level.  HOL's pool never sees such a theorem: the compile proves it.
    local: tuple[int, int] | None = None


class Marks:
    """Where the column-0 words of a masked code are, by kind, in order."""

    def __init__(self) -> None:
        self.decls: list[int] = []
        self.heads: list[tuple[int, str]] = []  # Theorem, Triviality, Resume
        self.proofs: list[int] = []
        self.qeds: list[int] = []
        self.term_heads: list[tuple[int, int]] = []  # (start, end of the keyword)
        self.term_ends: list[int] = []  # End, Termination
        self.theories: list[int] = []
        self.locals: list[int] = []
        self.local_ends: list[int] = []

    def limit(self, at: int, end: int) -> int:
        """Where the declaration starting at `at` ends at the latest: the next one."""
        following = bisect.bisect_right(self.decls, at)
        return self.decls[following] if following < len(self.decls) else end


def padded(code: str) -> str:
    """The code as `mark` reads it."""
    return "\n" + code


def mark(marks: Marks, padded: str, at: int, count: int) -> int:
    """Add the next `count` column-0 words of `padded` from offset `at` to
    `marks`; where to go on (`len(padded)` once none remain)."""
    found = 0
    for match in itertools.islice(_LINE_WORD.finditer(padded, at), count):
        _mark(marks, padded, match.start(), match.group(1))
        found, at = found + 1, match.end()
    return at if found == count else len(padded)


def _mark(marks: Marks, padded: str, at: int, word: str) -> None:
    if word in _DECLS:
        marks.decls.append(at)
        if word in _PROOF_HEADS:
            marks.heads.append((at, word))
        elif word in _TERM_HEADS or (word == "Datatype" and _DATATYPE_COLON.match(padded, at + 9)):
            marks.term_heads.append((at, at + len(word)))
        elif word == "Theory":
            marks.theories.append(at)
        elif word == "local":
            marks.locals.append(at)
    elif word == "Proof":
        marks.proofs.append(at)
    elif word == "QED":
        marks.qeds.append(at)
    elif word == "end":
        marks.local_ends.append(at)
    else:
        marks.term_ends.append(at)


def first(offsets: list[int], low: int, high: int) -> int | None:
    """The first of sorted `offsets` in [low, high), if any."""
    index = bisect.bisect_left(offsets, low)
    return offsets[index] if index < len(offsets) and offsets[index] < high else None


def blocks(code: str, marks: Marks, heads: Iterable[tuple[int, str]]) -> list[ProofBlock]:
    """The proof blocks that `heads` (some of `marks.heads`) start, in order."""
    found = []
    for at, kind in heads:
        block = _block(code, marks, at, kind)
        if block is not None:
            found.append(block)
    return found


def _block(code: str, marks: Marks, at: int, kind: str) -> ProofBlock | None:
    name_match = _HEAD_NAME.match(code, at + len(kind))
    if name_match is None:
        return None
    limit = marks.limit(at, len(code))
    name = name_match.group(1)
    if kind == "Resume":
        colon = code.find(":", name_match.end(), limit)
        if colon < 0:
            return None
        body_start = colon + 1
    else:
        name = name.split("[", 1)[0]
        proof = first(marks.proofs, name_match.end(), limit)
        if proof is None:
            return None
        body_start = proof + len("Proof")
    local = _local_at(marks, at, len(code)) if marks.locals else None
    qed = first(marks.qeds, body_start, limit)
    if qed is None:
        return ProofBlock(name, at, body_start, limit, limit, local)
    return ProofBlock(name, at, body_start, qed, qed + len("QED"), local)


def _local_at(marks: Marks, at: int, end: int) -> tuple[int, int] | None:
    """The column-0 `local … end` around offset `at`, if any (the last `local`
    before it, closed by the first column-0 `end` after that)."""
    opened = bisect.bisect_right(marks.locals, at) - 1
    if opened < 0:
        return None
    start = marks.locals[opened]
    closed = bisect.bisect_right(marks.local_ends, start)
    stop = marks.local_ends[closed] + len("end") if closed < len(marks.local_ends) else end
    return (start, stop) if at < stop else None


def pool_names(blocks: Sequence[ProofBlock], seen: dict[str, int]) -> list[str]:
    """The name HOL's proof pool gives each of `blocks` (docs/protocol.md#proof-names),
    `seen` counting the names of the blocks before them (and updated).

    A rebound theorem is `foo#2`, `foo#3`, …; a Resume block keeps `thm[label]`.
    """
    names = []
    for block in blocks:
        count = seen[block.name] = seen.get(block.name, 0) + 1
        names.append(block.name if count == 1 or "[" in block.name else f"{block.name}#{count}")
    return names
