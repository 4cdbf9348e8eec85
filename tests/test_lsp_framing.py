"""What the daemon writes to and reads from a HOL server, byte for byte."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holsrv import stepping
from holsrv.errors import FrameError
from holsrv.lsp import framing


def expected(message: dict) -> bytes:
    """The frame as the standard library writes it."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def did_change(*texts: str) -> dict:
    return {"jsonrpc": "2.0", "method": "textDocument/didChange",
            "params": {"textDocument": {"uri": "file:///p/aScript.sml", "version": 3},
                       "contentChanges": [{"text": t} for t in texts]}}


@pytest.mark.parametrize("texts", [
    ("",),
    ("Theorem a:\n  ∀x. x = x\nProof\n  simp[] (* ‘q’ *)\nQED\n",),
    ("a\"b\\c\t\x01\x7f\u2028𝔸" * 40_000,),  # escapes and astral characters across slice ends
    ("x" * stepping.CHARS_PER_STEP, "y" * (stepping.CHARS_PER_STEP + 1), "∀" * (3 * stepping.CHARS_PER_STEP + 7)),
])
def test_a_message_is_the_json_the_standard_library_writes_however_long_its_text(texts):
    message = did_change(*texts)
    steps = framing.encode_steps(message)
    taken = 0
    while True:
        try:
            next(steps)
            taken += 1
        except StopIteration as done:
            pieces = done.value
            break
    assert b"".join(pieces) == expected(message) == framing.encode(message)
    # A long text is escaped a slice per step, not in one go.
    assert taken == sum(-(-len(t) // stepping.CHARS_PER_STEP) for t in texts if len(t) > stepping.CHARS_PER_STEP)


@settings(max_examples=100, deadline=None, database=None)
@given(st.text(), st.integers(1, 9))
def test_any_text_cut_into_any_slices_encodes_as_a_whole(text, step):
    old = stepping.CHARS_PER_STEP
    stepping.CHARS_PER_STEP = step
    try:
        message = did_change(text)
        assert framing.encode(message) == expected(message)
    finally:
        stepping.CHARS_PER_STEP = old


async def _read(data: bytes):
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return await framing.read_message(reader)


@pytest.mark.asyncio
async def test_invalid_utf8_from_hol_is_read_with_replacement_characters_not_refused():
    body = b'{"jsonrpc":"2.0","method":"window/logMessage","params":{"message":"bad \xff\xfe byte"}}'
    message = await _read(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert message["params"]["message"] == "bad \ufffd\ufffd byte"


@pytest.mark.asyncio
@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'"just a string"'])
async def test_a_body_that_is_not_a_json_object_is_a_frame_error(body):
    with pytest.raises(FrameError):
        await _read(b"Content-Length: %d\r\n\r\n" % len(body) + body)
