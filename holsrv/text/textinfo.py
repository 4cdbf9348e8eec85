"""What the daemon reads in a script's text, computed once per text and kept:
the one door to a text's facts.

Diagnostics, status, goal states and syncs each need the same facts about a
text: where its proof blocks lie, their pool names, its cheats, its line
starts, its Ancestors, whether a theorem's name still appears in it.
Computing them is proportional to the text's size; asking again is a
dictionary lookup.  Pure: a function of the text alone, so one memo serves
every caller.

This is the one place a text's facts are computed and the one module
callers ask for them: the facts themselves (`of`, `prepare`), the view by
pool name the verdict reads (`Blocks`), the theories the script names as
ancestors (`ancestors`, read here too, since it is one search of the head),
and the proof an edit runs out of (`spilling_proof`).  The scanners below it
stay modules of their own because each is a distinct computation with its
own bounded step: `masking` (comments, strings, quotations blanked),
`scanner` (proof blocks and pool names from column-0 words), `cheats` (uses
of `cheat` in tactic code), `positions` (line starts, either encoding),
`editspan` (where two texts differ: two texts, not one text's fact, and
never memoised).  `statements` reads statements as HOL would for `verify`,
on top of these facts; `memo` is the bounded cache by text and `stepping`
the driver.  Here the scanners run with a step between slices (`stepping`).
A new large text is computed in slices (`prepare`), so the event loop
answers other clients in between: about 13 ms of work for a 300 KB script
becomes a dozen steps of about a millisecond each.
"""

from __future__ import annotations

import array
import bisect
import re
from collections.abc import Iterator

from holsrv.text import cheats, editspan, masking, memo, positions, scanner, stepping
from holsrv.text.cheats import Cheat
from holsrv.text.positions import LineIndex as LineIndex  # re-exported: a block's lines for callers
from holsrv.text.positions import Text
from holsrv.text.scanner import ProofBlock as ProofBlock  # re-exported: the type of `TextInfo.blocks`
from holsrv.text.stepping import CHARS_PER_STEP, ITEMS_PER_STEP, Steps, chunks

# Identifiers, as the tally matches theorem names against what the text still says.
_WORD = re.compile(r"[A-Za-z0-9_']+")
# Texts kept: those of the live servers (at most 16) and the ones they replace.
MAX_TEXTS = 32
# Below this many characters computing a text's facts takes well under a
# millisecond: slicing it would cost more than it saves.
SLICE_FROM_CHARS = 32 * 1024


class TextInfo:
    """The facts of one text.  Offsets are characters of the text.

    Made by `steps`: blocks, pool names, cheats and ancestors from one scan,
    then the lines, the line index and each block's lines.  The word set is
    computed when first needed (`words_steps`).
    """

    text: str
    blocks: tuple[ProofBlock, ...]
    names: tuple[str, ...]  # each block's pool name (see `scanner.pool_names`), in the blocks' order
    cheats: tuple[Cheat, ...]
    ancestors: tuple[str, ...]
    lines: Text  # the text split into lines, for converting positions (every answer needs it)
    index: LineIndex
    # Each pool name's (first line, line of the body's start, last line), 1-based.
    block_lines: dict[str, tuple[int, int, int]]
    block_names: frozenset[str]  # the theorems' names, without `#n` or `[label]`
    # Each column-0 `local … in … end` holding theorems: (first line, last line,
    # the pool names of its theorems), 1-based, in order.  HOL proves those
    # theorems while compiling; its pool never has an entry for them.
    locals: tuple[tuple[int, int, tuple[str, ...]], ...]
    # The pool names HOL's proof pool has an entry for: every block's but those
    # inside a `local … end` (the census a settled pass is judged by).
    pooled: frozenset[str]
    _spans: list[tuple[int, int, int]]  # `block_lines` of each named block, in order
    _firsts: list[int]  # their first lines, for bisection
    _starts: list[int]  # each block's first character, for bisection
    _cheat_lines: dict[str, int]  # each pool name's first cheat line
    _words: frozenset[str] | None
    _users: dict[str, array.array[int]] | None  # each identifier's blocks whose proofs mention it (`users_steps`)
    _by_name: dict[str, array.array[int]] | None  # each theorem's blocks (a name without `[label]` may have several)

    @classmethod
    def steps(cls, text: str) -> Steps[TextInfo]:
        """The facts of `text`, computed in steps of well under a millisecond."""
        info = cls()
        info.text, info._words, info._users, info._by_name = text, None, None, None
        blocks, found = yield from scan_steps(text)
        info.blocks, info.cheats = tuple(blocks), tuple(found)
        info._starts = [b.start for b in blocks]
        info.names = tuple((yield from _names_steps(blocks)))
        names: set[str] = set()
        for chunk in chunks(blocks):
            names.update(b.name.split("[", 1)[0] for b in chunk)
            yield
        info.block_names = frozenset(names)
        info.ancestors = tuple(ancestors(text))  # one search, and the head's `open`s
        yield
        starts = yield from starts_steps(text)
        info.lines, info.index = Text(text, starts), LineIndex(text, starts)
        yield from info._lines_steps()
        return info

    def _lines_steps(self) -> Steps[None]:
        """Each block's lines, the `local` blocks' lines, and each proof's first cheat line."""
        line = self.index.line
        spans: list[tuple[int, int, int]] = []  # each named block's lines, in the text's order
        for these in chunks(self.blocks):
            spans += [(line(b.start), line(b.body_start), line(b.end)) for b in these]
            yield
        self.block_lines = dict(zip(self.names, spans, strict=True))
        self._spans = spans
        held: dict[tuple[int, int], list[str]] = {}
        pooled: list[str] = []
        for names, blocks in zip(chunks(self.names), chunks(self.blocks), strict=True):
            for name, block in zip(names, blocks, strict=True):
                if block.local is not None:
                    held.setdefault(block.local, []).append(name)
                else:
                    pooled.append(name)
            yield
        self.pooled = frozenset(pooled)
        self.locals = tuple((line(a), line(max(a, b - 1)), tuple(n)) for (a, b), n in held.items())
        self._firsts = [first for first, _, _ in spans]
        yield
        self._cheat_lines = {}
        for some in chunks(self.cheats):
            for cheat in some:
                at = line(cheat.offset)
                for name in self._owners(at):
                    self._cheat_lines.setdefault(name, at)
            yield

    @property
    def named(self) -> Iterator[tuple[str, ProofBlock]]:
        """Each block with its pool name.  Made when asked: 30,000 pairs kept
        would be 30,000 objects more for every full collection to walk."""
        return zip(self.names, self.blocks, strict=True)

    def blocks_near(self, offset: int) -> tuple[ProofBlock, ...]:
        """The blocks that may hold `offset`, by bisection: the last to start at
        or before it, and the one before, which may end just there."""
        found = bisect.bisect_right(self._starts, offset)
        return self.blocks[max(0, found - 2):found]

    def owner(self, line: int) -> str | None:
        """The proof `line` belongs to; the earlier one where two meet (a missing QED)."""
        return next(iter(self._owners(line)), None)

    def _owners(self, line: int) -> list[str]:
        """The proofs whose lines hold `line`, in order: at most two, which
        meet there (a block ends where the next declaration starts, and each
        declaration starts a line of its own)."""
        found = bisect.bisect_right(self._firsts, line)
        return [self.names[i] for i in range(max(0, found - 2), found) if line <= self._spans[i][2]]

    def declared_below(self, line: int) -> str | None:
        """The proof whose declaration is the next below `line`, when only blank
        lines lie between them."""
        found = bisect.bisect_right(self._firsts, line)
        if found == len(self._firsts):
            return None
        lines = self.lines.lines
        if any(lines[between - 1].strip() for between in range(line + 1, self._firsts[found])):
            return None
        return self.names[found]

    def cheat_line(self, name: str) -> int | None:
        """The line of the first cheat in `name`'s block, if any."""
        return self._cheat_lines.get(name)

    def words_steps(self) -> Steps[frozenset[str]]:
        """Identifiers outside comments, strings and quotations, in steps; kept."""
        if self._words is None:
            code = yield from code_steps(self.text)
            words: set[str] = set()
            for start, end in _between_words(code, CHARS_PER_STEP):
                words.update(_WORD.findall(code, start, end))
                yield
            self._words = frozenset(words)
        return self._words

    def users_steps(self) -> Steps[dict[str, array.array[int]]]:
        """Each identifier outside comments, strings and quotations of the proofs, with the
        indices of the blocks whose proof mentions it, in steps; computed once for the text.
        Arrays, not lists: 30,000 proofs' worth of lists would be that many more objects
        for every full collection to walk."""
        if self._users is None:
            code = yield from code_steps(self.text)
            users: dict[str, array.array[int]] = {}
            index: dict[str, array.array[int]] = {}
            for at in range(0, len(self.blocks), ITEMS_PER_STEP // 4):  # a proof has a few dozen words
                for i in range(at, min(at + ITEMS_PER_STEP // 4, len(self.blocks))):
                    block = self.blocks[i]
                    name = block.name.split("[", 1)[0]
                    if name in index:
                        index[name].append(i)
                    else:
                        index[name] = array.array("l", (i,))
                    for word in set(_WORD.findall(code, block.body_start, block.body_end)):
                        found = users.get(word)
                        if found is None:
                            users[word] = array.array("l", (i,))
                        else:
                            found.append(i)
                yield
            self._users, self._by_name = users, index
        return self._users

    def users(self, name: str) -> tuple[str, ...]:
        """The theorems (names without `[label]`) whose proof text mentions identifier `name`, in the text's order."""
        found = stepping.run(self.users_steps()).get(name, ())
        return tuple(dict.fromkeys(self.blocks[i].name.split("[", 1)[0] for i in found))

    def proof_words(self, name: str) -> frozenset[str]:
        """The identifiers theorem `name`'s proof text mentions outside comments, strings and
        quotations (empty for no such theorem): its blocks only are read."""
        stepping.run(self.users_steps())
        assert self._by_name is not None
        words: set[str] = set()
        for i in self._by_name.get(name, ()):
            block = self.blocks[i]  # a proof body starts outside any comment or string
            words.update(_WORD.findall(masking.blank_comments_and_strings(self.text[block.body_start:block.body_end])))
        return frozenset(words)


class TextCache(memo.Memo[TextInfo]):
    """A bounded LRU of `TextInfo` by text (see `memo`)."""

    def __init__(self, max_entries: int = MAX_TEXTS) -> None:
        super().__init__(TextInfo.steps, max_entries, SLICE_FROM_CHARS)


# A memo of a pure function, shared as `functools.lru_cache` would be: it
# holds nothing that could make two callers see different answers.
shared = TextCache()


def of(text: str) -> TextInfo:
    """The facts of `text`, from the shared cache (computed on first sight)."""
    return shared.of(text)


async def prepare(text: str) -> TextInfo:
    """`of`, for a caller on the event loop: a new large text is computed in slices."""
    return await shared.prepare(text)


class Blocks:
    """The text's proof blocks by pool name, with their line spans and cheats:
    the view the verdict reads, named as it reads them."""

    def __init__(self, text: str) -> None:
        info = of(text)  # computed once per text
        self.index = info.index
        self.names = info.names
        self.lines = info.block_lines  # (first line, line of the body's start, last line), 1-based
        self.cheats = info.cheats
        self.owner = info.owner  # the proof a line belongs to, by bisection
        self.cheat_line = info.cheat_line  # the line of the first cheat in a proof's block
        self.locals = info.locals  # the `local … end` blocks, their lines and theorems
        self.text_lines = info.lines.lines
        self.declared_below = info.declared_below  # the proof declared next below a line, blank lines between


def spilling_proof(old: str, new: str, span: tuple[int, int, int] | None = None) -> ProofBlock | None:
    """The proof whose body an edit starts in and runs past the QED of, if any
    (`span`: the edit's `editspan.edit_span`, if known).

    The HOL server decides from where an edit starts whether it is confined to
    one proof.  Such an edit would be taken as tactic-only, leaving the checks
    of the proofs it also changed running on stale text.
    """
    start, old_end, _ = span or editspan.edit_span(old, new)
    for block in of(old).blocks_near(start):
        if block.body_start <= start < block.body_end:
            return block if old_end > block.body_end else None
    return None


# -- the theories a script names as its ancestors ------------------------------
# In its `Ancestors` header or, in an old-style script, with `open …Theory`
# before its first theorem.  A plain function of the text, kept with the
# text's other facts (`TextInfo.ancestors`); called directly for a text read
# only for its head (a parent's script), where the other facts would be waste.
# Whether those theories were rebuilt is `disk.ancestors`'s question.

_ANCESTORS = re.compile(r"^Ancestors\b(.*?)(?=^\S|^\s*$|\Z)", re.MULTILINE | re.DOTALL)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_']*")


def ancestors(text: str) -> list[str]:
    """The theory names in the script's `Ancestors` header (attributes dropped),
    then those its `open …Theory` declarations name (old-style scripts)."""
    names = []
    match = _ANCESTORS.search(text)
    if match is not None:
        words = re.sub(r"\[[^\]]*\]", " ", match.group(1))
        names = _NAME.findall(words)
    return list(dict.fromkeys([*names, *opened_theories(text)]))


# Old-style scripts open their ancestors before `new_theory`; later `open`s
# are local to a proof and name theories loaded already.  Only this much of
# the text is read, so the scan costs the same for any script size.
_HEADER_CHARS = 64 * 1024
_HEADER_END = re.compile(r"\bnew_theory\b|^(?:Theorem|Triviality|Definition|Datatype)\b", re.MULTILINE)
_OPEN = re.compile(r"\bopen((?:\s+[A-Za-z_][A-Za-z0-9_'.]*)+)")


def opened_theories(text: str) -> list[str]:
    """Theories (`fooTheory` → `foo`) named by `open` declarations before the
    script's first theorem or `new_theory`, outside comments and strings."""
    head = text[:_HEADER_CHARS]
    code = masking.blank_comments_and_strings(head)
    end = _HEADER_END.search(code)
    code = code[: end.start()] if end else code
    names = []
    for match in _OPEN.finditer(code):
        for word in match.group(1).split():
            if word.endswith("Theory") and len(word) > len("Theory") and "." not in word:
                names.append(word[: -len("Theory")])
    return names


# -- the scanners, run a slice at a time --------------------------------------
# Each scanner does a bounded amount of work per call: a step's worth of
# characters (CHARS_PER_STEP) or of items (ITEMS_PER_STEP), well under a
# millisecond.  Run whole over a 4 MB script of 30,000 proofs, each pass
# would hold the loop far past a slice (measured on the 2-core machine:
# masking 120 ms, column-0 words 105 ms, proof blocks 110 ms, line starts
# 45 ms, pool names and cheat words 7 ms each), so a scanner cannot be
# called on the whole text and sliced afterwards: it takes a stretch and
# says where to go on, and the steps below are the only place that loops.


def code_steps(text: str) -> Steps[str]:
    """`masking.blank_comments_and_strings(text)`, in steps."""
    pieces: list[str] = []
    at = 0
    while at < len(text):
        # A region and the code before it are two pieces: a step's worth of pieces.
        piece, at = masking.blank_regions(text, at, max(1, ITEMS_PER_STEP // 2))
        pieces.append(piece)
        yield
    return "".join(pieces)


def starts_steps(text: str) -> Steps[array.array[int]]:
    """`positions.line_starts(text)` in steps: a 4 MB script has 200,000 lines
    and takes some 40 ms in one go."""
    starts, pos = array.array("q", [0]), 0
    while pos < len(text):
        pos = positions.more_starts(starts, text, pos)
        yield
    return starts


def scan_steps(text: str) -> Steps[tuple[list[ProofBlock], list[Cheat]]]:
    """The proof blocks and cheats of `text`, computed afresh in steps."""
    code = yield from code_steps(text)
    marks = yield from _marks_steps(code)
    blocks = yield from _blocks_steps(code, marks)
    return blocks, (yield from _cheats_steps(code, marks, blocks))


def _marks_steps(code: str) -> Steps[scanner.Marks]:
    marks, padded, at = scanner.Marks(), scanner.padded(code), 0
    while at < len(padded):
        at = scanner.mark(marks, padded, at, ITEMS_PER_STEP)
        yield
    return marks


def _blocks_steps(code: str, marks: scanner.Marks) -> Steps[list[ProofBlock]]:
    blocks: list[ProofBlock] = []
    for heads in chunks(marks.heads, ITEMS_PER_STEP):
        blocks += scanner.blocks(code, marks, heads)
        yield
    return blocks


def _names_steps(blocks: list[ProofBlock]) -> Steps[list[str]]:
    seen: dict[str, int] = {}
    names: list[str] = []
    for some in chunks(blocks, ITEMS_PER_STEP):
        names += scanner.pool_names(some, seen)
        yield
    return names


def _cheats_steps(code: str, marks: scanner.Marks, blocks: list[ProofBlock]) -> Steps[list[Cheat]]:
    terms = yield from _terms_steps(code, marks, blocks)
    term_starts = [start for start, _ in terms]
    yield
    block_starts = [b.start for b in blocks]
    yield
    owners = cheats.Owners(terms, term_starts, blocks, block_starts)
    found: list[Cheat] = []
    for words in chunks((yield from _cheat_words_steps(code)), ITEMS_PER_STEP):
        found += owners.cheats(words)
        yield
    return found


def _terms_steps(code: str, marks: scanner.Marks, blocks: list[ProofBlock]) -> Steps[list[tuple[int, int]]]:
    """Where `cheat` is only a name (see `cheats`), merged."""
    regions: list[tuple[int, int]] = []
    for some in chunks(blocks, ITEMS_PER_STEP):
        regions += cheats.statements(some)
        yield
    regions += cheats.theory_lines(code, marks)
    for heads in chunks(marks.term_heads, ITEMS_PER_STEP):
        regions += cheats.term_bodies(code, marks, heads)
        yield
    # Two runs already in order (blocks, then term bodies): the sort merges them in one pass.
    regions.sort()
    yield
    merged: list[tuple[int, int]] = []
    for stretch in chunks(regions, ITEMS_PER_STEP):
        cheats.merge(stretch, merged)
        yield
    return merged


def _cheat_words_steps(code: str) -> Steps[list[int]]:
    words: list[int] = []
    for word in cheats.WORDS:
        for start in range(0, len(code), CHARS_PER_STEP):
            words += cheats.occurrences(code, word, start, start + CHARS_PER_STEP)
            yield
    words.sort()
    yield
    return words


_NON_WORD = re.compile(r"[^A-Za-z0-9_']")


def _between_words(text: str, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) spans covering `text`, each about `size` characters and
    ending between words, so a word pattern finds the same in each as in all."""
    start = 0
    while start < len(text):
        cut = _NON_WORD.search(text, start + size)
        end = len(text) if cut is None else cut.start()
        yield start, end
        start = end
