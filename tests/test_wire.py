"""The daemon's wire format: frames, the tagged unions, and refusal of garbage."""

import socket
import typing

import msgspec
import pytest

from holsrv.errors import FrameError
from holsrv.rpc import client, framing
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


def test_the_base_structs_leave_the_wire_bytes_as_they_were():
    # Tag first, then the fields in declaration order: what every older peer sends and expects.
    assert msgspec.msgpack.encode(m.GoalState("/f", 4, 7, wait=1.0)) == msgspec.msgpack.encode(
        {"op": "goalState", "file": "/f", "line": 4, "col": 7, "wait": 1.0})
    assert msgspec.msgpack.encode(m.Hover("/f", 1, 2)) == msgspec.msgpack.encode(
        {"op": "hover", "file": "/f", "line": 1, "col": 2})
    assert msgspec.msgpack.encode(m.ShutdownResult("bye")) == msgspec.msgpack.encode(
        {"type": "shutdown", "message": "bye"})


def test_a_welcome_from_an_older_daemon_decodes_with_unknown_limits():
    old = msgspec.msgpack.encode({"type": "welcome", "protocol": 1, "daemon_version": "0.1", "pid": 7})
    welcome = framing.decode(framing.reply_decoder, old)
    assert welcome == m.Welcome(1, "0.1", 7)
    assert (welcome.request_timeout_s, welcome.lookup_wait_s, welcome.start_wait_s) == (0.0, 0.0, 0.0)
    assert framing.encode(welcome)[4:] == old  # and a zero limit is not sent


def test_a_reply_is_a_welcome_an_error_or_one_of_the_results():
    assert set(typing.get_args(m.Reply)) == {m.Welcome, m.ErrorReply, *typing.get_args(m.Result)}
    tags = [reply.__struct_config__.tag for reply in typing.get_args(m.Reply)]
    assert len(tags) == len(set(tags))


def test_reply_timeouts_grow_with_the_limits_the_daemon_announced():
    welcome = m.Welcome(1, "v", 1, request_timeout_s=60.0, lookup_wait_s=25.0, start_wait_s=25.0)
    slower = m.Welcome(1, "v", 1, request_timeout_s=600.0, lookup_wait_s=250.0, start_wait_s=250.0)
    for request in [m.Diagnostics("/f", wait=5.0), m.Hover("/f", 1, 1), m.RetryCompile("/f"), m.Eval("/f", "1;")]:
        assert client.reply_timeout(request, slower) > client.reply_timeout(request, welcome) > 0
    margin = client.REPLY_MARGIN_S
    # A request's own wait, then the start and the last LSP request it may still be in.
    assert client.reply_timeout(m.Diagnostics("/f", wait=5.0), welcome) == 5 + 25 + 60 + margin
    assert client.reply_timeout(m.GoalState("/f", 1, 1, wait=100.0), welcome) == 100 + 25 + 60 + margin
    # A lookup: the start, the compile reaching the position, the LSP request.
    assert client.reply_timeout(m.Completion("/f", 1, 1), welcome) == 25 + 25 + 60 + margin
    # eval's own timeout replaces the LSP request timeout.
    assert client.reply_timeout(m.Eval("/f", "1;", timeout=300.0), welcome) == 25 + 300 + margin


def test_a_welcome_without_limits_falls_back_to_the_old_daemon_defaults():
    old, announced = m.Welcome(1, "v", 1), m.Welcome(1, "v", 1, 60.0, 25.0, 25.0)
    for request in [m.Diagnostics("/f"), m.Hover("/f", 1, 1), m.Eval("/f", "1;"), m.Restart("/f"), m.Status()]:
        assert client.reply_timeout(request, old) == client.reply_timeout(request, announced)
