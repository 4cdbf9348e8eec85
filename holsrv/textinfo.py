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
import functools
import re
import threading
from collections import OrderedDict
from typing import TypeVar

from holsrv import ancestors, positions, script
from holsrv.positions import LineIndex, Text

T = TypeVar("T")

# Identifiers, as the tally matches theorem names against what the text still says.
_WORD = re.compile(r"[A-Za-z0-9_']+")
# Texts kept: those of the live servers (at most 16) and the ones they replace.
MAX_TEXTS = 32
# Below this many characters computing a text's facts takes well under a
# millisecond: slicing it would cost more than it saves.
SLICE_FROM_CHARS = 32 * 1024


class TextInfo:
    """The facts of one text.  Offsets are characters of the text.

    Blocks, pool names, cheats and ancestors come from one scan; the line
    index and the word set are computed when first asked for.
    """

    def __init__(self, text: str, blocks: list[script.ProofBlock], cheats: list[script.Cheat]) -> None:
        self.text = text
        self.blocks: tuple[script.ProofBlock, ...] = tuple(blocks)
        self.named: tuple[tuple[str, script.ProofBlock], ...] = tuple(script.named_blocks(blocks))
        self.cheats: tuple[script.Cheat, ...] = tuple(cheats)
        self.ancestors: tuple[str, ...] = tuple(ancestors.ancestors(text))
        self._block_names = frozenset(b.name.split("[", 1)[0] for b in blocks)

    @classmethod
    def steps(cls, text: str) -> script.Steps[TextInfo]:
        """The facts of `text`, computed in steps of about a millisecond."""
        blocks, cheats = yield from script.scan_steps(text)
        info = cls(text, blocks, cheats)
        yield
        # The split and the line starts of a 4 MB script take some 15 and 30 ms: in steps too.
        split = yield from positions.split_steps(text)
        info.lines = Text(text, split)
        info.index = LineIndex(text, (yield from positions.starts_steps(split)))
        yield
        info.block_lines  # noqa: B018  # with the line index: in a step of its own, not in an answer
        return info

    @functools.cached_property
    def index(self) -> LineIndex:
        return LineIndex(self.text)

    @functools.cached_property
    def lines(self) -> Text:
        """The text split into lines, for converting positions (every answer needs it)."""
        return Text(self.text)

    @functools.cached_property
    def block_lines(self) -> dict[str, tuple[int, int, int]]:
        """Each pool name's (first line, line of the body's start, last line), 1-based."""
        line = self.index.line
        return {name: (line(b.start), line(b.body_start), line(b.end)) for name, b in self.named}

    @functools.cached_property
    def words(self) -> frozenset[str]:
        """Identifiers outside comments, strings and quotations."""
        return frozenset(_WORD.findall(script.blank_comments_and_strings(self.text)))

    def mentions(self, name: str) -> bool:
        """Whether identifier `name` appears in the text's code (not only in comments)."""
        # A block's name is such a word, and almost every name asked about is
        # one: the word set is built only for the others.
        return name in self._block_names or name in self.words


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
        return self._keep(script.run(TextInfo.steps(text)))

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
        return self._keep(await sliced(TextInfo.steps(text)))

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


async def sliced(steps: script.Steps[T]) -> T:
    """Take `steps` to the end with the event loop free between them: the way
    work proportional to a script's size runs on the loop without holding up
    other clients."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        await asyncio.sleep(0)  # let the loop serve others


# A memo of a pure function, shared as `functools.lru_cache` would be: it
# holds nothing that could make two callers see different answers.
shared = TextCache()


def of(text: str) -> TextInfo:
    """The facts of `text`, from the shared cache (computed on first sight)."""
    return shared.of(text)


async def prepare(text: str) -> TextInfo:
    """`of`, for a caller on the event loop: a new large text is computed in slices."""
    return await shared.prepare(text)
