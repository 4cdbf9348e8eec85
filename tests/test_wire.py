"""The daemon's wire format: frames, the tagged unions, and refusal of garbage."""

import socket
import typing

import msgspec
import pytest

from holsrv.errors import FrameError
from holsrv.rpc import framing
from holsrv.rpc import messages as m


def test_every_request_round_trips_through_a_frame():
    f = "/p/aScript.sml"
    requests = [
        m.Diagnostics(f, wait=3.5), m.GoalState(f, 4, 7, wait=1.0), m.Hover(f, 1, 2), m.Definition(f, 3, 4),
        m.References(f, 5, 6), m.Completion(f, 7, 8), m.DocumentSymbol(f), m.WorkspaceSymbol(f, "ADD_"),
        m.Eval(f, "1 + 1;", timeout=2.0), m.RetryCompile(f), m.Restart(f, max_heap_mb=0), m.Status(), m.Shutdown(),
    ]
    assert {type(r) for r in requests} == set(typing.get_args(m.Request)), "a request type is not covered"
    for request in requests:
        frame = framing.encode(request)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        assert framing.decode(framing.request_decoder, frame[4:]) == request


def test_replies_decode_to_their_own_type():
    reply = m.ErrorReply("file_not_found", "no such file: x")
    decoded = framing.decode(framing.reply_decoder, framing.encode(reply)[4:])
    assert isinstance(decoded, m.ErrorReply) and decoded.code == "file_not_found"


def test_an_oversized_length_prefix_is_refused_before_reading():
    with pytest.raises(FrameError, match="frame of"):
        framing.body_length((framing.MAX_FRAME + 1).to_bytes(4, "big"))


def test_garbage_body_is_a_frame_error_not_a_crash():
    with pytest.raises(FrameError, match="undecodable"):
        framing.decode(framing.request_decoder, b"\xc1garbage")


def test_unknown_op_is_a_frame_error():
    body = msgspec.msgpack.encode({"op": "frobnicate", "file": "x"})
    with pytest.raises(FrameError):
        framing.decode(framing.request_decoder, body)


def test_blocking_reader_reassembles_split_frames():
    left, right = socket.socketpair()
    with left, right:
        frame = framing.encode(m.Status())
        left.sendall(frame[:2])
        left.sendall(frame[2:])
        assert framing.decode(framing.request_decoder, framing.recv_body(right)) == m.Status()
        left.close()
        assert framing.recv_body(right) is None
