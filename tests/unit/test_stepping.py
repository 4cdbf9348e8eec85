"""Work in steps: slices of about a millisecond, shared by all that run at once."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

import pytest

from holsrv.text import stepping

# On the fake clock a slice is 1 s and each step takes an eighth of it
# (binary fractions: sums are exact).
SLICE_S, STEP_S = 1.0, 0.125


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def counted(clock: FakeClock, name: str, steps: int, log: list[str]) -> stepping.Steps[str]:
    for _ in range(steps):
        clock.now += STEP_S
        log.append(name)
        yield
    return name


def runs(log: list[str]) -> list[tuple[str, int]]:
    """The log as (name, steps taken in a row)."""
    return [(name, len(list(group))) for name, group in itertools.groupby(log)]


@contextlib.asynccontextmanager
async def turns(monkeypatch):
    """(the fake clock, a log of steps where "turn" marks each turn of the loop)."""
    clock = FakeClock()
    monkeypatch.setattr(stepping.time, "perf_counter", clock)
    monkeypatch.setattr(stepping, "SLICE_S", SLICE_S)
    log: list[str] = []

    async def mark() -> None:
        while True:
            log.append("turn")
            await asyncio.sleep(0)

    ticker = asyncio.create_task(mark())
    await asyncio.sleep(0)
    try:
        yield clock, log
    finally:
        ticker.cancel()


@pytest.mark.asyncio
async def test_a_computation_takes_a_slice_of_steps_then_lets_the_loop_serve_others(monkeypatch):
    async with turns(monkeypatch) as (clock, log):
        assert await stepping.sliced(counted(clock, "a", 40, log)) == "a"
    slices = [n for name, n in runs(log) if name == "a"]
    assert slices == [8, 8, 8, 8, 8], runs(log)


@pytest.mark.asyncio
async def test_computations_at_once_share_one_slice_a_turn(monkeypatch):
    async with turns(monkeypatch) as (clock, log):
        done = await asyncio.gather(*(stepping.sliced(counted(clock, name, 40, log)) for name in "abcd"))
    assert done == list("abcd") and stepping._running == 0
    per_turn = [len(turn.split()) for turn in " ".join(log).split("turn") if turn.strip()]
    # Once all four run, a turn of the loop holds one slice of work in all
    # (a quarter each, rounded up to whole steps), not four slices: others
    # wait about a slice however many run.
    assert max(per_turn[1:]) <= SLICE_S / STEP_S + 3, per_turn
    assert sum(per_turn) == 4 * 40


def test_run_takes_every_step_at_once():
    clock = FakeClock()
    log: list[str] = []
    assert stepping.run(counted(clock, "a", 25, log)) == "a" and log == ["a"] * 25
