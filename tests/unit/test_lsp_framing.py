"""What the daemon writes to and reads from a HOL server, byte for byte."""

from __future__ import annotations

import asyncio
import json
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holsrv.errors import FrameError
from holsrv.lsp import framing, replies
from holsrv.lsp.client import LspClient
from holsrv.text import stepping
from holsrv.verdict.filestate import FileState

from conftest import stepped


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
    pieces, taken = stepped(framing.encode_steps(message))
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


def _frame(message: dict) -> bytes:
    return framing.encode(message)


def test_a_proof_batch_is_decoded_a_state_at_a_time_and_any_other_shape_stays_json():
    states = [{"pos": {"line": 3, "character": 0}, "name": "add0", "status": "checking"},
              {"pos": {"line": 9, "character": 0}, "name": "bad", "status": "failed", "detail": "Exception"}]
    body = _frame({"jsonrpc": "2.0", "method": "$/proofStates", "params": {"uri": "file:///p", "states": states}})
    params = framing.decode(body.split(b"\r\n\r\n", 1)[1], replies.TYPED_PARAMS)["params"]
    assert isinstance(params, replies.ProofStates) and params.uri == "file:///p"
    decoded = [replies.proof_state(state) for state in params.states]  # as the fold does, a slice at a time
    assert [(s.name, s.status, s.pos.line, s.detail) for s in decoded] == [
        ("add0", "checking", 3, ""), ("bad", "failed", 9, "Exception")]
    odd = b'{"jsonrpc":"2.0","method":"$/proofStates","params":{"uri":"file:///p","states":[{"name":7,"pos":1}, 3]}}'
    params = framing.decode(odd, replies.TYPED_PARAMS)["params"]
    assert [replies.proof_state(s) for s in params.states] == [replies.ProofState(name="7"), replies.ProofState()]
    not_an_object = b'{"jsonrpc":"2.0","method":"$/proofStates","params":[1]}'
    assert framing.decode(not_an_object, replies.TYPED_PARAMS)["params"] == [1]
    # Either form folds into the same tally.
    typed, plain = FileState("file:///p"), FileState("file:///p")
    typed.apply("$/proofStates", framing.decode(body.split(b"\r\n\r\n", 1)[1], replies.TYPED_PARAMS)["params"], 1.0)
    plain.apply("$/proofStates", {"uri": "file:///p", "states": states}, 1.0)
    assert typed.proofs == plain.proofs and set(typed.proofs) == {"add0", "bad"}


@pytest.mark.asyncio
async def test_a_notification_folded_in_slices_is_done_before_the_next_message_is_read():
    reader = asyncio.StreamReader()
    for number in range(3):
        reader.feed_data(_frame({"jsonrpc": "2.0", "method": "$/note", "params": {"n": number}}))
    reader.feed_eof()
    seen: list[str] = []

    async def fold(number: int) -> None:
        for step in range(3):
            seen.append(f"{number}.{step}")
            await asyncio.sleep(0)

    def on_notify(method: str, params: dict):
        seen.append(f"{params['n']} read")
        return fold(params["n"]) if params["n"] == 1 else None

    writer = mock.Mock()
    await asyncio.wait_for(LspClient(reader, writer, on_notify).run(), 5)
    assert seen == ["0 read", "1 read", "1.0", "1.1", "1.2", "2 read"]
