"""What the daemon reads in a script's text, computed once per text and kept.

Diagnostics, status, goal states and syncs each need the same facts about a
text: where its proof blocks lie, their pool names, its cheats, its line
starts, its Ancestors, whether a theorem's name still appears in it.
Computing them is proportional to the text's size; asking again is a
dictionary lookup.  Pure: a function of the text alone, so one memo serves
every caller.

A new large text is computed in slices (`prepare`), so the event loop
answers other clients in between: about 13 ms of work for a 300 KB script
becomes a dozen steps of about a millisecond each.
"""

from __future__ import annotations

import asyncio
import bisect
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator

from holsrv import ancestors, positions, script, stepping
from holsrv.positions import LineIndex, Text

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
    blocks: tuple[script.ProofBlock, ...]
    names: tuple[str, ...]  # each block's pool name (see `script.pool_names`), in the blocks' order
    cheats: tuple[script.Cheat, ...]
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
    _spans: list[tuple[int, int, int]]  # `block_lines` of each named block, in order
    _firsts: list[int]  # their first lines, for bisection
    _starts: list[int]  # each block's first character, for bisection
    _cheat_lines: dict[str, int]  # each pool name's first cheat line
    _words: frozenset[str] | None

    @classmethod
    def steps(cls, text: str) -> stepping.Steps[TextInfo]:
        """The facts of `text`, computed in steps of well under a millisecond."""
        info = cls()
        info.text = text
        blocks, cheats = yield from script.scan_steps(text)
        info.blocks, info.cheats = tuple(blocks), tuple(cheats)
        info._starts = [b.start for b in blocks]
        info.names = tuple((yield from script.names_steps(blocks)))
        names: set[str] = set()
        for chunk in stepping.chunks(blocks):
            names.update(b.name.split("[", 1)[0] for b in chunk)
            yield
        info.block_names = frozenset(names)
        info.ancestors = tuple(ancestors.ancestors(text))  # one search, and the head's `open`s
        yield
        starts = yield from positions.starts_steps(text)
        info.lines, info.index = Text(text, starts), LineIndex(text, starts)
        line = info.index.line
        spans: list[tuple[int, int, int]] = []  # each named block's lines, in the text's order
        for these in stepping.chunks(info.blocks):
            spans += [(line(b.start), line(b.body_start), line(b.end)) for b in these]
            yield
        info.block_lines = dict(zip(info.names, spans, strict=True))
        info._spans = spans
        held: dict[tuple[int, int], list[str]] = {}
        for names_, blocks_ in zip(stepping.chunks(info.names), stepping.chunks(info.blocks), strict=True):
            for name, block in zip(names_, blocks_, strict=True):
                if block.local is not None:
                    held.setdefault(block.local, []).append(name)
            yield
        info.locals = tuple((line(a), line(max(a, b - 1)), tuple(n)) for (a, b), n in held.items())
        info._firsts = [first for first, _, _ in spans]
        yield
        info._cheat_lines = {}
        for some in stepping.chunks(cheats):
            for cheat in some:
                at = info.index.line(cheat.offset)
                for name in info._owners(at):
                    info._cheat_lines.setdefault(name, at)
            yield
        info._words = None
        return info

    def local_of(self, name: str) -> tuple[int, int, tuple[str, ...]] | None:
        """The `local … end` block holding theorem `name`, if any (see `locals`)."""
        return next((span for span in self.locals if name in span[2]), None)

    @property
    def named(self) -> Iterator[tuple[str, script.ProofBlock]]:
        """Each block with its pool name.  Made when asked: 30,000 pairs kept
        would be 30,000 objects more for every full collection to walk."""
        return zip(self.names, self.blocks, strict=True)

    def blocks_near(self, offset: int) -> tuple[script.ProofBlock, ...]:
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

    def words_steps(self) -> stepping.Steps[frozenset[str]]:
        """Identifiers outside comments, strings and quotations, in steps; kept."""
        if self._words is None:
            code = yield from script.blank_steps(self.text)
            words: set[str] = set()
            for start, end in script.spans(code, stepping.CHARS_PER_STEP):
                words.update(_WORD.findall(code, start, end))
                yield
            self._words = frozenset(words)
        return self._words

    def mentions(self, name: str) -> bool:
        """Whether identifier `name` appears in the text's code (not only in comments)."""
        # A block's name is such a word, and almost every name asked about is
        # one: the word set is built only for the others.
        return name in self.block_names or name in stepping.run(self.words_steps())


class TextCache:
    """A bounded LRU of `TextInfo` by text.

    Keyed by the text itself: its hash is computed once and kept by the
    string, a file read again unchanged yields the same string object
    (`files.Reader`), and an equal copy is recognised by comparing contents,
    so two texts never share an entry unless they are equal.
    """

    def __init__(self, max_entries: int = MAX_TEXTS) -> None:
        self.max_entries = max_entries
        self.computed = 0  # texts computed: for tests and the benchmark
        self._entries: OrderedDict[str, TextInfo] = OrderedDict()
        # One computation in flight per text and event loop (tests run several daemons at once).
        self._pending: dict[tuple[int, str], asyncio.Future[TextInfo]] = {}
        self._lock = threading.Lock()  # a shared memo, as lru_cache is: safe from any thread

    def of(self, text: str) -> TextInfo:
        """The facts of `text`, computed now if not known."""
        with self._lock:
            info = self._entries.get(text)
            if info is not None:
                self._entries.move_to_end(text)
                return info
        return self._keep(stepping.run(TextInfo.steps(text)))

    async def prepare(self, text: str) -> TextInfo:
        """The facts of `text`; a new large text is computed in slices, with the
        event loop free between them.  Concurrent callers share one computation."""
        info = self._entries.get(text)
        if info is not None or len(text) < SLICE_FROM_CHARS:
            return self.of(text)
        key = (id(asyncio.get_running_loop()), text)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = asyncio.ensure_future(self._sliced(text))
            pending.add_done_callback(lambda _: self._pending.pop(key, None))
        return await asyncio.shield(pending)

    async def _sliced(self, text: str) -> TextInfo:
        return self._keep(await stepping.sliced(TextInfo.steps(text)))

    def _keep(self, info: TextInfo) -> TextInfo:
        with self._lock:
            known = self._entries.get(info.text)
            if known is not None:  # another caller computed it meanwhile: keep one
                return known
            self._entries[info.text] = info
            self.computed += 1
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            return info


# A memo of a pure function, shared as `functools.lru_cache` would be: it
# holds nothing that could make two callers see different answers.
shared = TextCache()


def of(text: str) -> TextInfo:
    """The facts of `text`, from the shared cache (computed on first sight)."""
    return shared.of(text)


async def prepare(text: str) -> TextInfo:
    """`of`, for a caller on the event loop: a new large text is computed in slices."""
    return await shared.prepare(text)
