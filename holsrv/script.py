"""What the daemon itself reads from a HOL script's text.

The HOL server is the authority on compiling; the daemon only needs the
block structure (where each `Theorem … Proof … QED` lies, for edits that run
from one proof into the next) and the uses of `cheat` (which the server's
pool reports as proved).  Both skip comments, which nest in SML, and string
literals.

Everything here is a pure function of the text.  The public functions answer
from `textinfo`, which computes each text's facts once and keeps them.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import msgspec

from holsrv import editspan
from holsrv.masking import blank_regions
from holsrv.positions import LineIndex  # noqa: F401  # re-exported: callers use script.LineIndex
from holsrv.stepping import CHARS_PER_STEP, ITEMS_PER_STEP, Steps, chunks, run

if TYPE_CHECKING:
    from holsrv.textinfo import TextInfo


# `cheat` is CHEAT_TAC; mk_thm makes a theorem without proof.  HOL's pool
# reports proofs using any of them as proved.  Each counts as a whole word
# only, and not as a qualified name's last part (`Foo.cheat`).
_CHEAT_WORDS = ("cheat", "CHEAT_TAC", "mk_thm")
_NOT_BEFORE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_'.")
_NOT_AFTER = _NOT_BEFORE - {"."}
# Any column-0 word that starts a new top-level declaration ends the previous one.
_DECLS = frozenset(
    "Theorem Triviality Resume Definition Inductive CoInductive Datatype Type Overload Theory "
    "Finalise val fun open local structure datatype type".split()
)
# Every column-0 word that matters, found in one pass over the text with a
# newline put in front (a pattern that starts with a literal newline is
# searched far faster than one that starts with `^`).  A match's start in
# that text is its word's offset in the original.
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


class Cheat(msgspec.Struct, frozen=True, gc=False):
    theorem: str  # "" when not inside a theorem
    offset: int


def blank_steps(text: str) -> Steps[str]:
    """`blank_comments_and_strings` in steps."""
    pieces: list[str] = []
    at = 0
    while at < len(text):
        piece, at = blank_regions(text, at, max(1, ITEMS_PER_STEP // 2))
        pieces.append(piece)
        yield
    return "".join(pieces)


def proof_blocks(text: str) -> list[ProofBlock]:
    """Every proof block in `text`, in order."""
    return list(_facts(text).blocks)


def pool_names(text: str) -> list[tuple[str, ProofBlock]]:
    """Each proof block with the name HOL's proof pool gives it (PROTOCOL.md §10.2).

    A rebound theorem is `foo#2`, `foo#3`, …; a Resume block keeps `thm[label]`.
    """
    return list(_facts(text).named)


def cheats(text: str) -> list[Cheat]:
    """Every use of `cheat` (or CHEAT_TAC, mk_thm) in tactic or SML code, with its theorem.

    Comments, strings and HOL terms are skipped: a theorem's statement, a
    definition's body and the Theory line are terms or names, where `cheat`
    is only an identifier.
    """
    return list(_facts(text).cheats)


def _facts(text: str) -> TextInfo:
    # textinfo builds on this module, so it is imported when first needed.
    from holsrv import textinfo

    return textinfo.of(text)


def scan(text: str) -> tuple[list[ProofBlock], list[Cheat]]:
    """The proof blocks and cheats of `text`, computed afresh (callers want the
    cached `proof_blocks` and `cheats`)."""
    return run(scan_steps(text))


def scan_steps(text: str) -> Steps[tuple[list[ProofBlock], list[Cheat]]]:
    """`scan` as steps: it yields after about a millisecond of work at most, so
    an event loop can answer others between steps (see `stepping`)."""
    code = yield from blank_steps(text)
    marks = yield from _marks_steps(code)
    blocks = yield from _blocks_steps(code, marks)
    return blocks, (yield from _cheats(code, marks, blocks))


def names_steps(blocks: list[ProofBlock]) -> Steps[list[str]]:
    """The pool name of each of `blocks`, in steps."""
    seen: dict[str, int] = {}
    names = []
    for chunk in chunks(blocks):
        for block in chunk:
            count = seen[block.name] = seen.get(block.name, 0) + 1
            names.append(block.name if count == 1 or "[" in block.name else f"{block.name}#{count}")
        yield
    return names


_NON_WORD = re.compile(r"[^A-Za-z0-9_']")


def spans(text: str, size: int = CHARS_PER_STEP) -> Iterator[tuple[int, int]]:
    """(start, end) spans covering `text`, each about `size` characters and
    ending between words, so a word pattern finds the same in each as in all."""
    start = 0
    while start < len(text):
        cut = _NON_WORD.search(text, start + size)
        end = len(text) if cut is None else cut.start()
        yield start, end
        start = end


class _Marks:
    """Where the column-0 words of a blanked text are, by kind, in order."""

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


def _marks_steps(code: str) -> Steps[_Marks]:
    marks = _Marks()
    for seen, match in enumerate(_LINE_WORD.finditer("\n" + code), 1):
        at, word = match.start(), match.group(1)
        if word in _DECLS:
            marks.decls.append(at)
            if word in _PROOF_HEADS:
                marks.heads.append((at, word))
            elif word in _TERM_HEADS or (word == "Datatype" and _DATATYPE_COLON.match(code, at + 8)):
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
        if seen % ITEMS_PER_STEP == 0:
            yield
    return marks


def _first(offsets: list[int], low: int, high: int) -> int | None:
    """The first of sorted `offsets` in [low, high), if any."""
    index = bisect.bisect_left(offsets, low)
    return offsets[index] if index < len(offsets) and offsets[index] < high else None


def _local_at(marks: _Marks, at: int, end: int) -> tuple[int, int] | None:
    """The column-0 `local … end` around offset `at`, if any (the last `local`
    before it, closed by the first column-0 `end` after that)."""
    opened = bisect.bisect_right(marks.locals, at) - 1
    if opened < 0:
        return None
    start = marks.locals[opened]
    closed = bisect.bisect_right(marks.local_ends, start)
    stop = marks.local_ends[closed] + len("end") if closed < len(marks.local_ends) else end
    return (start, stop) if at < stop else None


def _blocks_steps(code: str, marks: _Marks) -> Steps[list[ProofBlock]]:
    blocks = []
    for seen, (at, kind) in enumerate(marks.heads, 1):
        if seen % ITEMS_PER_STEP == 0:
            yield
        local = _local_at(marks, at, len(code)) if marks.locals else None
        name_match = _HEAD_NAME.match(code, at + len(kind))
        if name_match is None:
            continue
        limit = marks.limit(at, len(code))
        name = name_match.group(1)
        if kind == "Resume":
            colon = code.find(":", name_match.end(), limit)
            if colon < 0:
                continue
            body_start = colon + 1
        else:
            name = name.split("[", 1)[0]
            proof = _first(marks.proofs, name_match.end(), limit)
            if proof is None:
                continue
            body_start = proof + len("Proof")
        qed = _first(marks.qeds, body_start, limit)
        if qed is None:
            blocks.append(ProofBlock(name, at, body_start, limit, limit, local))
        else:
            blocks.append(ProofBlock(name, at, body_start, qed, qed + len("QED"), local))
    return blocks


def _cheats(code: str, marks: _Marks, blocks: list[ProofBlock]) -> Steps[list[Cheat]]:
    regions = []
    for chunk in chunks(blocks):
        regions += [(b.start, b.body_start) for b in chunk]
        yield
    regions += yield from _term_regions(code, marks)
    terms = yield from _merged(regions)
    term_starts = [start for start, _ in terms]
    yield
    block_starts = [b.start for b in blocks]
    yield
    words = yield from _cheat_words(code)
    found = []
    for some in chunks(words):
        for at in some:
            region = bisect.bisect_right(term_starts, at) - 1
            if region >= 0 and at < terms[region][1]:
                continue
            # Blocks do not overlap: each ends before the next declaration.
            block = bisect.bisect_right(block_starts, at) - 1
            owner = blocks[block].name if block >= 0 and at < blocks[block].end else ""
            found.append(Cheat(owner, at))
        yield
    return found


def _cheat_words(code: str) -> Steps[list[int]]:
    """Offsets of the cheat words in `code`, in order (str.find beats a regex
    with lookarounds by an order of magnitude here), a step's worth of
    characters searched at a time."""
    found = []
    for word in _CHEAT_WORDS:
        for start in range(0, len(code), CHARS_PER_STEP):
            # A word starting in this step's characters, possibly ending past them.
            at, stop = code.find(word, start, start + CHARS_PER_STEP + len(word) - 1), start + CHARS_PER_STEP
            while 0 <= at < stop:
                end = at + len(word)
                if (at == 0 or code[at - 1] not in _NOT_BEFORE) and (end == len(code) or code[end] not in _NOT_AFTER):
                    found.append(at)
                at = code.find(word, at + 1, stop + len(word) - 1)
            yield
    found.sort()
    yield
    return found


def _merged(regions: list[tuple[int, int]]) -> Steps[list[tuple[int, int]]]:
    """Half-open regions sorted and merged, so one bisection finds the one holding an offset."""
    # Two runs already in order (blocks, then term regions): the sort merges them in one pass.
    regions = sorted(regions)
    yield
    merged: list[tuple[int, int]] = []
    for chunk in chunks(regions):
        for start, end in chunk:
            if start >= end:
                continue
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        yield
    return merged


def _term_regions(code: str, marks: _Marks) -> Steps[list[tuple[int, int]]]:
    """Definition-like bodies and the Theory line: where `cheat` is only a name.

    Each ends at its `End` or `Termination`, and never past the next
    top-level declaration, so a missing `End` cannot hide the code after it.
    """
    regions = []
    for at in marks.theories:
        line_end = code.find("\n", at)
        regions.append((at, len(code) if line_end < 0 else line_end))
    for chunk in chunks(marks.term_heads):
        for at, keyword_end in chunk:
            limit = marks.limit(at, len(code))
            end = _first(marks.term_ends, keyword_end, limit)
            regions.append((at, limit if end is None else end))
        yield
    return regions


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of a character offset."""
    return _facts(text).index.line_col(offset)


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
    for block in _facts(old).blocks_near(start):
        if block.body_start <= start < block.body_end:
            return block if old_end > block.body_end else None
    return None
