"""Every bad input gets its stable code and a message saying what to do, through the raw socket, holctl and holmcp.

And a malformed connection costs the log one WARNING line, never a traceback.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from mcp import Client

from holctl.cli import cli
from holmcp.server import build_server
from holsrv import errors
from holsrv.rpc import framing, limits
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, wait_until

BAD_SECONDS = [math.nan, math.inf, -math.inf, 1e308, -1.0, limits.MAX_WAIT_S + 1]
NOBODY = 65534


def _requests_with_seconds(path: str, seconds: float) -> list[m.Request]:
    return [
        m.Diagnostics(path, wait=seconds), m.GoalState(path, 7, 3, wait=seconds), m.Hover(path, 7, 3, wait=seconds),
        m.DocumentSymbol(path, wait=seconds), m.WorkspaceSymbol(path, "add", wait=seconds),
        m.Eval(path, "1 + 1;", timeout=seconds),
    ]


@pytest.mark.parametrize("seconds", BAD_SECONDS, ids=repr)
def test_a_wait_or_timeout_that_is_nan_infinite_huge_or_negative_is_bad_request_saying_the_range(
    daemon, write_script, seconds
):
    path = str(write_script(GOOD_SCRIPT))
    for request in _requests_with_seconds(path, seconds):
        with pytest.raises(errors.BadRequest) as caught:
            daemon.call(request, timeout=10)
        assert caught.value.code == "bad_request"
        assert f"from 0 to {limits.MAX_WAIT_S:g}" in str(caught.value) and "finite" in str(caught.value)
    assert daemon.call(m.Status()).sessions == [], "a refused request started a HOL server"


def test_a_bad_seconds_field_is_named_after_the_request_as_clients_spell_it(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    for request, op in ((m.Eval(path, "1;", timeout=-1.0), "eval"), (m.GoalState(path, 7, 3, wait=-1.0), "goalState")):
        with pytest.raises(errors.BadRequest) as caught:
            daemon.call(request, timeout=10)
        assert str(caught.value).startswith(f"{op}: "), str(caught.value)


@pytest.mark.parametrize("seconds", [math.nan, math.inf, 1e308], ids=repr)
def test_the_client_helper_sizes_its_reply_timeout_from_a_bounded_wait_and_gets_bad_request(
    daemon, write_script, seconds
):
    path = str(write_script(GOOD_SCRIPT))
    with daemon.client() as client:  # no timeout given: sized from the request's own wait
        for request in (m.Diagnostics(path, wait=seconds), m.Hover(path, 7, 3, wait=seconds),
                        m.Eval(path, "1;", timeout=seconds)):
            assert math.isfinite(client.reply_timeout(request))
            with pytest.raises(errors.BadRequest):
                client.call(request)


def test_the_largest_wait_allowed_is_accepted(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    assert daemon.call(m.Diagnostics(path, wait=limits.MAX_WAIT_S), timeout=60).verdict == "OK"


def test_a_raw_client_sending_nan_gets_bad_request_on_a_connection_that_survives(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    with _hello(daemon) as sock:
        sock.sendall(_raw_frame({"op": "diagnostics", "file": path, "wait": math.nan}))
        reply = _reply(sock)
        assert isinstance(reply, m.ErrorReply) and reply.code == "bad_request", reply
        sock.sendall(framing.encode(m.Status()))
        assert isinstance(_reply(sock), m.StatusResult)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e308", "3601", "-1"])
def test_holctl_refuses_a_wait_or_timeout_out_of_range_before_sending_it(tmp_path, value):
    sock = str(tmp_path / "absent.sock")  # never reached: the value is refused first
    for args in (["diagnostics", "aScript.sml", "--wait", value], ["hover", "aScript.sml", "1", "1", "--wait", value],
                 ["eval", "aScript.sml", "1;", "--timeout", value]):
        result = CliRunner().invoke(cli, ["--socket", sock, "--no-start", *args])
        assert result.exit_code == 2, (args, result.output)
        assert "finite number of seconds from 0 to 3600" in result.stderr, result.stderr


@pytest.mark.asyncio
async def test_holmcp_passes_a_huge_wait_on_and_the_agent_gets_bad_request(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        for tool, arguments in [("diagnostics", {"file": str(path), "wait": 1e308}),
                                ("hover", {"file": str(path), "line": 7, "column": 3, "wait": 1e308}),
                                ("eval", {"file": str(path), "code": "1;", "timeout": 1e308})]:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, result.content)
            assert result.content[0].text.startswith("bad_request: "), result.content[0].text
            assert "from 0 to 3600" in result.content[0].text


# -- file names ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("a\x00Script.sml", "NUL byte"),
        ("a" * 300 + "Script.sml", "names are limited to 255 bytes"),
        ("/".join(["d" * 200] * 25) + "/aScript.sml", "paths are limited to 4095 bytes"),
    ],
    ids=["nul", "name-over-NAME_MAX", "path-over-PATH_MAX"],
)
def test_a_path_no_file_can_have_is_bad_request_and_starts_nothing(daemon, tmp_path, name, says):
    for request in (m.Diagnostics(f"{tmp_path}/{name}", wait=1), m.Hover(f"{tmp_path}/{name}", 1, 1),
                    m.Restart(f"{tmp_path}/{name}"), m.Stop(f"{tmp_path}/{name}")):
        with pytest.raises(errors.BadRequest, match=says):
            daemon.call(request, timeout=10)
    assert daemon.call(m.Status()).sessions == []


def test_holctl_with_a_file_name_that_is_not_utf8_says_so_with_not_utf8(daemon, tmp_path):
    # On Linux a file name is bytes; Python hands holctl undecodable ones as surrogates.
    name = os.fsencode(tmp_path) + b"/caf\xe9Script.sml"
    Path(os.fsdecode(name)).write_text(GOOD_SCRIPT)
    done = subprocess.run(
        [sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "--no-start", "diagnostics", name],
        capture_output=True, timeout=60,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 3, stderr
    assert stderr.startswith("holctl: not_utf8: ") and "Traceback" not in stderr
    assert r"caf\xe9Script.sml" in stderr and "Rename the file" in stderr


def test_a_frame_whose_file_name_is_not_utf8_is_bad_frame_and_the_connection_survives(daemon):
    body = msgspec.msgpack.encode({"op": "diagnostics", "file": "/tmp/xxxxScript.sml"})
    body = body.replace(b"xxxx", b"\xe9\xff\xfe\xe9")
    with _hello(daemon) as sock:
        sock.sendall(len(body).to_bytes(4, "big") + body)
        reply = _reply(sock)
        assert isinstance(reply, m.ErrorReply) and reply.code == "bad_frame" and "UTF-8" in reply.message
        sock.sendall(framing.encode(m.Status()))
        assert isinstance(_reply(sock), m.StatusResult)


def test_a_link_into_a_directory_whose_name_is_not_utf8_is_not_utf8(daemon, tmp_path):
    odd = Path(os.fsdecode(os.fsencode(tmp_path) + b"/\xff"))
    odd.mkdir()
    (odd / "aScript.sml").write_text(GOOD_SCRIPT)
    (tmp_path / "linked").symlink_to(odd)
    with pytest.raises(errors.NotUtf8, match="rename the directory"):
        daemon.call(m.Diagnostics(str(tmp_path / "linked" / "aScript.sml"), wait=1), timeout=10)
    assert daemon.call(m.Status()).sessions == []


# -- permissions ---------------------------------------------------------------


@pytest.fixture
def open_tmp():
    """A directory anyone may enter (pytest's own are private to their user)."""
    path = Path(tempfile.mkdtemp(prefix="hs-open-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_file_in_a_directory_the_daemon_cannot_enter_is_permission_denied(daemon, open_tmp):
    locked = open_tmp / "locked"
    locked.mkdir()
    (locked / "aScript.sml").write_text(GOOD_SCRIPT)
    with _unreadable_for_the_daemon(daemon, locked, mode=0):
        with pytest.raises(errors.HolsrvError) as caught:
            daemon.call(m.Diagnostics(str(locked / "aScript.sml"), wait=1), timeout=10)
        holctl = subprocess.run(
            [sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "--no-start", "goalState",
             str(locked / "aScript.sml"), "7", "3"],
            capture_output=True, text=True, timeout=60,
        )
    assert caught.value.code == "permission_denied"
    assert "permission denied" in str(caught.value) and "chmod" in str(caught.value)
    assert holctl.returncode == 3 and holctl.stderr.startswith("holctl: permission_denied: "), holctl.stderr
    assert daemon.call(m.Status()).sessions == []


def test_a_file_the_daemon_may_not_read_is_permission_denied_not_not_a_file(daemon, open_tmp):
    path = open_tmp / "aScript.sml"
    path.write_text(GOOD_SCRIPT)
    with _unreadable_for_the_daemon(daemon, path, mode=0), pytest.raises(errors.HolsrvError) as caught:
        daemon.call(m.Diagnostics(str(path), wait=1), timeout=10)
    assert caught.value.code == "permission_denied"


# -- positions -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "column"), [(0, 1), (1, 0), (-1, 1), (1, -7), (2**63, 1), (1, 2**63), (2**64 - 1, 2**64 - 1)]
)
def test_a_line_or_column_of_zero_negative_or_huge_is_position_out_of_range(daemon, write_script, line, column):
    path = str(write_script(GOOD_SCRIPT))
    daemon.call(m.Diagnostics(path, wait=20))
    for request in (m.GoalState(path, line, column, wait=5), m.Hover(path, line, column, wait=5),
                    m.Completion(path, line, column, wait=5)):
        with pytest.raises(errors.PositionOutOfRange, match="out of range"):
            daemon.call(request, timeout=30)
    if column == 1:
        with pytest.raises(errors.PositionOutOfRange):
            daemon.call(m.GoalState(path, line, None, wait=5), timeout=30)


def test_a_line_past_the_end_is_refused_without_starting_a_server(daemon, write_script):
    path = str(write_script(GOOD_SCRIPT))
    past = GOOD_SCRIPT.count("\n") + 5
    for request in (m.GoalState(path, past, None, wait=5), m.GoalState(path, past, 1, wait=5),
                    m.Hover(path, past, 1, wait=5), m.Definition(path, 1, 999, wait=5)):
        with pytest.raises(errors.PositionOutOfRange) as caught:
            daemon.call(request, timeout=30)
        assert caught.value.code == "position_out_of_range"
    assert daemon.call(m.Status()).sessions == [], "a refused position started a HOL server"


# -- frames --------------------------------------------------------------------


def test_a_frame_over_the_limit_after_the_hello_gets_bad_frame_then_the_connection_closes(daemon, caplog):
    caplog.set_level(logging.INFO)
    with _hello(daemon) as sock:
        sock.sendall((framing.MAX_FRAME + 1).to_bytes(4, "big"))
        reply = _reply(sock)
        assert isinstance(reply, m.ErrorReply) and reply.code == "bad_frame"
        assert f"limit {framing.MAX_FRAME}" in reply.message and "closes this connection" in reply.message
        assert framing.recv_body(sock) is None, "the connection stayed open after a frame it cannot skip"
    _assert_one_warning_line(caplog, "frame of")
    assert isinstance(daemon.call(m.Status()), m.StatusResult)


def test_a_frame_cut_short_by_the_client_closing_is_one_warning_line_and_no_traceback(daemon, caplog):
    caplog.set_level(logging.INFO)
    with _hello(daemon) as sock:
        frame = framing.encode(m.Status())
        sock.sendall(frame[:-1])
        sock.shutdown(socket.SHUT_WR)
        assert _reply(sock).code == "bad_frame"  # said to a client that may still be reading
        assert framing.recv_body(sock) is None
    _wait_for_log(daemon, caplog, "inside a frame body")
    _assert_one_warning_line(caplog, "inside a frame body")
    assert isinstance(daemon.call(m.Status()), m.StatusResult)


def test_a_frame_that_stalls_halfway_is_dropped_after_the_frame_deadline_with_bad_frame(daemon_factory):
    daemon = daemon_factory(frame_timeout_s=0.5)
    with _hello(daemon) as sock:
        sock.settimeout(15)
        sock.sendall(framing.encode(m.Status())[:3])  # inside the length prefix
        reply = _reply(sock)
        assert isinstance(reply, m.ErrorReply) and reply.code == "bad_frame"
        assert "did not come within 0.5s" in reply.message and "whole" in reply.message
        assert framing.recv_body(sock) is None
    with _hello(daemon) as sock:
        sock.settimeout(15)
        sock.sendall(framing.encode(m.Diagnostics("/x/aScript.sml"))[:10])  # inside the body
        assert _reply(sock).code == "bad_frame"


def test_a_hello_that_never_comes_is_bad_frame_naming_the_frame_expected(daemon_factory):
    daemon = daemon_factory(hello_timeout_s=0.5)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(15)
        sock.connect(str(daemon.socket))
        reply = _reply(sock)
    assert isinstance(reply, m.ErrorReply) and reply.code == "bad_frame"
    assert reply.message.startswith("no hello within 0.5s: a connection must begin with a Hello frame")
    assert f"'protocol': {m.PROTOCOL_VERSION}" in reply.message


def test_a_request_instead_of_a_hello_names_the_frame_expected(daemon):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(15)
        sock.connect(str(daemon.socket))
        sock.sendall(framing.encode(m.Status()))
        reply = _reply(sock)
    assert reply.code == "bad_frame" and "must begin with a Hello frame" in reply.message


def test_each_malformed_connection_is_one_warning_line_and_never_a_traceback(daemon_factory, caplog):
    daemon = daemon_factory(frame_timeout_s=0.5, hello_timeout_s=0.5)
    caplog.set_level(logging.DEBUG)
    garbage = [
        b"\x00\x00\x00\x05hello",  # not msgpack, before the hello
        b"\xff\xff\xff\xff",  # a length over the limit, before the hello
        b"\x00\x00",  # half a prefix, then the end
    ]
    for data in garbage:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(15)
            sock.connect(str(daemon.socket))
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            _drain(sock)
    after_hello = [
        _raw_frame({"op": "frobnicate"}) * 5,  # five undecodable requests: still one WARNING
        (framing.MAX_FRAME + 5).to_bytes(4, "big"),
        framing.encode(m.Status())[:-2],
    ]
    for data in after_hello:
        with _hello(daemon) as sock:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            _drain(sock)
    _wait_for_log(daemon, caplog, "inside a frame body")
    records = [r for r in caplog.records if r.name.startswith("holsrv")]
    warnings = [r for r in records if r.levelno >= logging.WARNING]
    assert len(warnings) == len(garbage) + len(after_hello), [r.getMessage() for r in warnings]
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in warnings)
    assert all("\n" not in r.getMessage() for r in warnings)
    assert not any(r.exc_info for r in records), "a traceback was logged"


# -- helpers -------------------------------------------------------------------


@contextlib.contextmanager
def _hello(daemon):
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(15)
    sock.connect(str(daemon.socket))
    sock.sendall(framing.encode(m.Hello(m.PROTOCOL_VERSION, "bad-input-test")))
    assert isinstance(_reply(sock), m.Welcome)
    with sock:
        yield sock


def _reply(sock: socket.socket):
    body = framing.recv_body(sock)
    assert body is not None, "the daemon closed the connection without a reply"
    return framing.decode(framing.reply_decoder, body)


def _drain(sock: socket.socket) -> None:
    while sock.recv(65536):
        pass


def _raw_frame(obj) -> bytes:
    body = msgspec.msgpack.encode(obj)
    return len(body).to_bytes(4, "big") + body


def _assert_one_warning_line(caplog, containing: str) -> None:
    found = [r for r in caplog.records if r.name.startswith("holsrv") and r.levelno >= logging.WARNING]
    assert [r.levelno for r in found] == [logging.WARNING], [r.getMessage() for r in found]
    assert containing in found[0].getMessage() and "\n" not in found[0].getMessage()
    assert found[0].exc_info is None


def _wait_for_log(daemon, caplog, text: str) -> None:
    """Wait until the daemon's log has `text`: a connection's end is logged after the client sees it."""
    wait_until(lambda: any(text in r.getMessage() for r in caplog.records), what=f"a log line with {text!r}")


@contextlib.contextmanager
def _unreadable_for_the_daemon(daemon, path: Path, mode: int):
    """`path` chmodded to `mode`, and the daemon unable to get past that.

    Root passes every permission check, so under root the daemon's thread
    alone takes nobody's file identity (Linux's fsuid is per thread) and
    meets the check a user's daemon meets.
    """
    root = os.geteuid() == 0
    path.chmod(mode)
    try:
        if root:
            daemon.run(_set_fsuid(NOBODY))
        yield
    finally:
        if root:
            daemon.run(_set_fsuid(0))
        path.chmod(0o755)


async def _set_fsuid(uid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.setfsuid(uid)
    if libc.setfsuid(uid) != uid:
        pytest.skip("cannot change the daemon thread's file identity")
