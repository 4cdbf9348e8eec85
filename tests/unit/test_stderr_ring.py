"""A child's stderr kept as a ring of lines: read to the end, long lines cut, marks for what one call caused."""

from __future__ import annotations

import asyncio

import pytest

from holsrv.process.stderrring import MAX_STDERR_LINE, StderrRing


def stream(*chunks: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    for chunk in chunks:
        reader.feed_data(chunk)
    reader.feed_eof()
    return reader


@pytest.mark.asyncio
async def test_a_line_longer_than_the_limit_is_kept_cut_and_the_rest_of_it_dropped():
    ring = StderrRing(10)
    long = b"x" * 100_000  # longer than one read: its first part comes without its end
    await ring.drain(stream(b"first\n" + long[:100], long[100:] + b"\nlast"))
    assert list(ring.tail) == ["first", "x" * MAX_STDERR_LINE + " …(cut)", "last"]
    assert ring.seen == 3


@pytest.mark.asyncio
async def test_only_the_newest_lines_are_kept_and_since_a_mark_gives_what_came_after_it():
    ring = StderrRing(3)
    await ring.drain(stream(b"a\nb\n"))
    mark = ring.seen
    await ring.drain(stream(b"c\nd\ne\n"))
    assert ring.since(mark) == "c\nd\ne"
    assert ring.last(2) == "d\ne" and list(ring.tail) == ["c", "d", "e"]
    assert ring.since(ring.seen) == ""
