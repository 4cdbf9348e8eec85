"""Work proportional to a script's size, in steps the event loop can interleave.

The daemon is one thread on one event loop (it spawns HOL servers with a
`preexec_fn`, which a threaded process must not): every answer it computes
holds up every other client while it runs.  A large script's facts, a
diagnostics answer over 30,000 proofs, a 4 MB file's decoding take tens of
milliseconds in one go.  Each is written as a generator that yields after a
bounded slice of work (`Steps`); `sliced` takes the steps with the loop free
between slices of about a millisecond, `run` takes them all at once (tests,
small texts, callers off the loop).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")
# A computation in steps: each `next` does a bounded slice of the work; the
# generator's return value is the result.
Steps = Generator[None, None, T]

# Work per step, well under a millisecond on a 2020s machine: items a Python
# loop handles one by one, and characters C code reads.  `sliced` takes as
# many steps as fit in a slice: SLICE_S among all it is taking at once.
ITEMS_PER_STEP = 512
CHARS_PER_STEP = 256 * 1024
SLICE_S = 0.001


def run(steps: Steps[T]) -> T:
    """Take `steps` to the end at once; its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


# Computations `sliced` is taking now.  The loop runs one slice of each per
# turn, so each slice is SLICE_S shared among them: other clients wait about
# SLICE_S a turn however many large texts are being worked on at once.
_running = 0


async def sliced(steps: Steps[T]) -> T:
    """Take `steps` to the end with the event loop free between slices, so
    other clients are answered meanwhile.  Steps may be far shorter than a
    slice: several are taken in one."""
    global _running
    clock = time.perf_counter
    _running += 1
    try:
        while True:
            until = clock() + SLICE_S / _running
            try:
                next(steps)  # at least one step a slice, however many share the loop
                while clock() < until:
                    next(steps)
            except StopIteration as done:
                return done.value
            await asyncio.sleep(0)  # let the loop serve others
    finally:
        _running -= 1


def chunks(items: Sequence[T], size: int = ITEMS_PER_STEP) -> Iterator[Sequence[T]]:
    """`items` a step's worth at a time."""
    for start in range(0, len(items), size):
        yield items[start:start + size]
