"""A child's footprint: itself and its descendants, resident plus swapped."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator

import psutil
import pytest
import pytest_asyncio

from holsrv import facilities
from holsrv.process import footprint
from holsrv.process.process import ChildProcess

# A parent holding ~40 MB that forks a child holding ~40 MB more, both alive
# until their stdin closes.
_FAMILY = """
import os, sys
held = bytearray(40 << 20); held[::4096] = b"x" * len(held[::4096])
if os.fork() == 0:
    more = bytearray(40 << 20); more[::4096] = b"y" * len(more[::4096])
print("ready", flush=True)
sys.stdin.read()
"""


@pytest_asyncio.fixture
async def family(tmp_path) -> AsyncIterator[ChildProcess]:
    """A child running `_FAMILY` (the watchdog, the program and its fork), both forks ready."""
    child = ChildProcess("family", stderr_lines=10, stop_timeout_s=5)
    stdout, stdin = await child.spawn([sys.executable, "-c", _FAMILY], str(tmp_path), dict(os.environ))
    try:
        assert (await stdout.readline()).startswith(b"ready")
        await stdout.readline()  # both said so
        yield child
    finally:
        stdin.close()
        await child.stop()
        # The forked child holds stdout too: read to its end, or the loop may close with the pipe open.
        async with asyncio.timeout(30):
            await stdout.read()


@pytest.mark.asyncio
async def test_the_footprint_counts_the_child_and_its_descendants_from_cheap_counters(family, monkeypatch):
    members = [psutil.Process(family.pid), *psutil.Process(family.pid).children(recursive=True)]
    assert len(members) == 3  # the watchdog, the program and its fork
    expected = sum(p.memory_full_info().rss + p.memory_full_info().swap for p in members) / 2**20

    def page_table_walk(self):
        raise AssertionError("smaps_rollup: tens of ms for a large HOL heap, on the event loop")

    monkeypatch.setattr(psutil.Process, "memory_full_info", page_table_walk)
    measured = family.footprint_mb()
    assert measured is not None and measured > 80
    assert abs(measured - expected) < 8, (measured, expected)  # the same counters, read a moment apart


def test_held_bytes_are_the_kernels_resident_and_swap_counters_for_the_process():
    info = psutil.Process().memory_full_info()
    assert abs(footprint.held_bytes(os.getpid()) - (info.rss + info.swap)) < 8 * 2**20  # read a moment apart


@pytest.mark.skipif(not facilities.proc_counters(), reason="no /proc children lists (portable mode): psutil's scan")
@pytest.mark.asyncio
async def test_the_footprint_walks_the_kernels_children_lists_not_every_process(family, monkeypatch):
    members = sorted(p.pid for p in psutil.Process(family.pid).children(recursive=True))
    assert sorted(footprint.descendants(family.pid)) == members
    walked = family.footprint_mb() or 0

    def scan(*args, **kwargs):
        raise AssertionError("psutil's children(recursive=True) reads every process's /proc/PID/stat")

    monkeypatch.setattr(psutil.Process, "children", scan)
    assert abs((family.footprint_mb() or 0) - walked) < 8
    # A kernel without children lists: the scan is the way, with the same answer.
    monkeypatch.undo()
    monkeypatch.setattr(footprint, "children_listed", lambda: False)
    assert abs((family.footprint_mb() or 0) - walked) < 8


def test_a_process_that_is_gone_has_no_footprint():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert footprint.footprint_mb(proc.pid) is None
