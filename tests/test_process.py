"""A child's footprint: itself and its descendants, resident plus swapped."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import psutil
import pytest

from holsrv import footprint
from holsrv.process import ChildProcess

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


@pytest.mark.asyncio
async def test_the_footprint_counts_the_child_and_its_descendants_from_cheap_counters(tmp_path, monkeypatch):
    child = ChildProcess("family", stderr_lines=10, stop_timeout_s=5)
    stdout, stdin = await child.spawn([sys.executable, "-c", _FAMILY], str(tmp_path), dict(os.environ))
    try:
        assert (await stdout.readline()).startswith(b"ready")
        await stdout.readline()  # both said so
        family = [psutil.Process(child.pid), *psutil.Process(child.pid).children(recursive=True)]
        assert len(family) == 3  # the watchdog, the program and its fork
        expected = sum(p.memory_full_info().rss + p.memory_full_info().swap for p in family) / 2**20

        def page_table_walk(self):
            raise AssertionError("smaps_rollup: tens of ms for a large HOL heap, on the event loop")

        monkeypatch.setattr(psutil.Process, "memory_full_info", page_table_walk)
        footprint = child.footprint_mb()
        assert footprint is not None and footprint > 80
        assert abs(footprint - expected) < 8, (footprint, expected)  # the same counters, read a moment apart
    finally:
        stdin.close()
        await child.stop()
        # The forked child holds stdout too: read to its end, or the loop may close with the pipe open.
        async with asyncio.timeout(30):
            await stdout.read()


def test_held_bytes_are_the_kernels_resident_and_swap_counters_for_the_process():
    info = psutil.Process().memory_full_info()
    assert abs(footprint.held_bytes(os.getpid()) - (info.rss + info.swap)) < 8 * 2**20  # read a moment apart


@pytest.mark.asyncio
async def test_the_footprint_walks_the_kernels_children_lists_not_every_process(tmp_path, monkeypatch):
    child = ChildProcess("family", stderr_lines=10, stop_timeout_s=5)
    stdout, stdin = await child.spawn([sys.executable, "-c", _FAMILY], str(tmp_path), dict(os.environ))
    try:
        assert (await stdout.readline()).startswith(b"ready")
        await stdout.readline()
        family = sorted(p.pid for p in psutil.Process(child.pid).children(recursive=True))
        assert sorted(footprint.descendants(child.pid)) == family
        walked = child.footprint_mb()

        def scan(*args, **kwargs):
            raise AssertionError("psutil's children(recursive=True) reads every process's /proc/PID/stat")

        monkeypatch.setattr(psutil.Process, "children", scan)
        assert abs((child.footprint_mb() or 0) - (walked or 0)) < 8
        # A kernel without children lists: the scan is the way, with the same answer.
        monkeypatch.undo()
        monkeypatch.setattr(footprint, "children_listed", lambda: False)
        assert abs((child.footprint_mb() or 0) - (walked or 0)) < 8
    finally:
        stdin.close()
        await child.stop()
        async with asyncio.timeout(30):
            await stdout.read()


def test_a_process_that_is_gone_has_no_footprint():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert footprint.footprint_mb(proc.pid) is None
