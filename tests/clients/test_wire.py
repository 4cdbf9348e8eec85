"""The daemon's wire format: frames, the tagged unions, refusal of garbage, and both clients.

`FakeDaemon` speaks the wire with scripted answers, so the clients' frame
loops, reconnects and cancels can be tested where the real daemon cannot be
made to misbehave; test_holmcp and test_holctl use it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import typing
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from holsrv.errors import DaemonUnreachable, FrameError, ServerBusy
from holsrv.rpc import aclient, calls, client, framing
from holsrv.rpc import messages as m

from conftest import FAILING_SCRIPT, stepped

# What the fake answers a request with: the frames to send, in order, or None
# to close the connection without answering; an awaitable waits first.
Script = Callable[[m.Request, int], "list[m.Reply] | None | typing.Awaitable[list[m.Reply] | None]"]


def _result_for(request: m.Request, n: int) -> list[m.Reply]:
    return [m.StatusResult("fake", m.PROTOCOL_VERSION, 4242, 1.0, "/fake", 4, [], 0, n)]


class FakeDaemon:
    """A daemon on `socket` that welcomes every hello and answers each request by `script`.

    `script(request, n)` gets the request and its number over all connections
    (1-based).  It records the hellos and requests it got and how many
    connections were closed by the client.
    """

    def __init__(self, socket: Path, script: Script = _result_for, welcome: m.Welcome | None = None) -> None:
        self.socket = socket
        self.script = script
        self.welcome = welcome or m.Welcome(m.PROTOCOL_VERSION, "fake", 4242, 20.0, 5.0, 5.0)
        self.hellos: list[m.Hello] = []
        self.requests: list[m.Request] = []
        self.connections = 0
        self.closed_by_client = 0
        self.close_after: set[int] = set()  # the numbers of the requests after whose answer the fake hangs up
        self._server: asyncio.AbstractServer | None = None
        self.arrived: asyncio.Event | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._dropped: set[asyncio.StreamWriter] = set()

    async def start(self) -> FakeDaemon:
        self.arrived = asyncio.Event()  # set once a request arrived
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket))
        return self

    async def drop_connections(self, last_frame: m.Reply) -> None:
        """Send `last_frame` on every connection, as a daemon closing idle ones does, then read no more
        requests on them (they stay open, so a request written later reaches the client's read)."""
        for writer in self._writers:
            writer.write(framing.encode(last_frame))
            await writer.drain()
        self._dropped.update(self._writers)

    async def first_request(self) -> None:
        assert self.arrived is not None
        async with asyncio.timeout(10):
            await self.arrived.wait()

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @contextlib.contextmanager
    def threaded(self):
        """Serve from a thread with its own loop, for blocking clients."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self.start())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        assert ready.wait(10)
        try:
            yield self
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        try:
            hello = framing.decode(framing.hello_decoder, await framing.read_body(reader))
            self.hellos.append(hello)
            writer.write(framing.encode(self.welcome))
            while (body := await framing.read_body(reader)) is not None:
                if writer in self._dropped:
                    return
                request = framing.decode(framing.request_decoder, body)
                self.requests.append(request)
                if self.arrived is not None:
                    self.arrived.set()
                n = len(self.requests)
                frames = self.script(request, n)
                if asyncio.iscoroutine(frames):
                    frames = await frames
                if frames is None:
                    return
                for frame in frames:
                    writer.write(framing.encode(frame))
                    await writer.drain()
                if n in self.close_after:
                    return  # as a daemon that restarts closes every connection once it has said so
            self.closed_by_client += 1
        except (ConnectionError, FrameError):
            self.closed_by_client += 1
        except asyncio.CancelledError:
            pass  # the test's loop is closing; asyncio would log a handler that ends cancelled
        finally:
            writer.close()


def test_every_request_round_trips_through_a_frame():
    f = "/p/aScript.sml"
    requests = [
        m.Diagnostics(f, wait=3.5, progress=True), m.GoalState(f, 4, 7, wait=1.0), m.GoalState(f, 4),
        m.Hover(f, 1, 2, wait=0.0), m.Definition(f, 3, 4), m.References(f, 5, 6), m.Completion(f, 7, 8),
        m.DocumentSymbol(f, wait=3.0), m.WorkspaceSymbol(f, "ADD_", limit=5, page=2), m.Eval(f, "1 + 1;", timeout=2.0),
        m.RetryCompile(f), m.Restart(f, max_heap_mb=0), m.Stop(f), m.Status(), m.Shutdown(), m.Metrics(),
        m.Search(f, "'arithmetic' x + y", limit=3, page=2, expect_hash="0123abcd"), m.Holmake(f, "aTheory.uo", jobs=2),
        m.Try(f, 4, ["simp[]", "metis_tac[]"], column=3, timeout=2.0), m.GoalDiff(f, 4, 6, column2=2),
    ]
    requests += [m.Logs(f, lines=5), m.EditorAttach(editor="Neovim"), m.Job("0123abcd", wait=2.0, cancel=True),
                 m.Uses(f, "arithmeticTheory.ADD_COMM", wait=2.0), m.Holes(f, wait=4.0, progress=True),
                 m.Verify(f, ["add0"], against="HEAD~1", wait=2.0), m.RestartDaemon(),
                 m.Search(f, "", scope=["list", "bool"], kind="theorem", conclusion="x <= y", hypothesis="P")]
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
        {"op": "goalState", "file": "/f", "line": 4, "column": 7, "wait": 1.0})
    assert msgspec.msgpack.encode(m.Hover("/f", 1, 2)) == msgspec.msgpack.encode(
        {"op": "hover", "file": "/f", "line": 1, "column": 2})
    assert msgspec.msgpack.encode(m.ShutdownResult("bye")) == msgspec.msgpack.encode(
        {"type": "shutdown", "message": "bye"})


def test_a_welcome_from_an_older_daemon_decodes_with_unknown_limits():
    old = msgspec.msgpack.encode({"type": "welcome", "protocol": 1, "daemon_version": "0.1", "pid": 7})
    welcome = framing.decode(framing.reply_decoder, old)
    assert welcome == m.Welcome(1, "0.1", 7)
    assert (welcome.request_timeout_s, welcome.lookup_wait_s, welcome.start_wait_s) == (0.0, 0.0, 0.0)
    assert framing.encode(welcome)[4:] == old  # and a zero limit is not sent


def test_a_reply_is_a_welcome_an_error_a_progress_frame_or_one_of_the_results():
    assert set(typing.get_args(m.Reply)) == {m.Welcome, m.ErrorReply, m.Progress, *typing.get_args(m.Result)}
    tags = [reply.__struct_config__.tag for reply in typing.get_args(m.Reply)]
    assert len(tags) == len(set(tags))


def test_reply_timeouts_grow_with_the_limits_the_daemon_announced():
    welcome = m.Welcome(1, "v", 1, request_timeout_s=60.0, lookup_wait_s=25.0, start_wait_s=25.0)
    slower = m.Welcome(1, "v", 1, request_timeout_s=600.0, lookup_wait_s=250.0, start_wait_s=250.0)
    for request in [m.Diagnostics("/f", wait=5.0), m.Hover("/f", 1, 1), m.RetryCompile("/f"), m.Eval("/f", "1;")]:
        assert calls.reply_timeout(request, slower) > calls.reply_timeout(request, welcome) > 0
    margin = calls.REPLY_MARGIN_S
    # A request's own wait, then the start and the last LSP request it may still be in.
    assert calls.reply_timeout(m.Diagnostics("/f", wait=5.0), welcome) == 5 + 25 + 60 + margin
    assert calls.reply_timeout(m.GoalState("/f", 1, 1, wait=100.0), welcome) == 100 + 25 + 60 + margin
    # A lookup: the start, the compile reaching the position, the LSP request.
    assert calls.reply_timeout(m.Completion("/f", 1, 1), welcome) == 25 + 25 + 60 + margin
    # A lookup's own wait bounds both its waits.
    assert calls.reply_timeout(m.Hover("/f", 1, 1, wait=0.0), welcome) == 60 + margin
    # eval's own timeout replaces the LSP request timeout.
    assert calls.reply_timeout(m.Eval("/f", "1;", timeout=300.0), welcome) == 25 + 300 + margin


def test_a_welcome_without_limits_falls_back_to_the_old_daemon_defaults():
    old, announced = m.Welcome(1, "v", 1), m.Welcome(1, "v", 1, 60.0, 25.0, 25.0)
    for request in [m.Diagnostics("/f"), m.Hover("/f", 1, 1), m.Eval("/f", "1;"), m.Restart("/f"), m.Status()]:
        assert calls.reply_timeout(request, old) == calls.reply_timeout(request, announced)


# -- what both clients send -----------------------------------------------------


def test_clients_pass_on_holsrv_settings_and_the_reference_tools_names_only():
    env = {"HOLSRV_MAX_HEAP_MB": "999", "HOL_BIN": "/srv/hol/bin/hol", "HOLDIR": "/srv/hol",
           "HOL_LSP_EXTRA_PATH": "/x", "HOL_LSP_MCP_MAX_SERVERS": "2", "HOME": "/home/u", "HOLSRVX": "1"}
    assert calls.given_settings(env) == {
        "HOLDIR": "/srv/hol", "HOLSRV_MAX_HEAP_MB": "999", "HOL_BIN": "/srv/hol/bin/hol",
        "HOL_LSP_EXTRA_PATH": "/x", "HOL_LSP_MCP_MAX_SERVERS": "2",
    }


def test_the_blocking_client_sends_its_settings_and_hands_progress_frames_over(short_tmp, monkeypatch):
    monkeypatch.setenv("HOLSRV_IDLE_TIMEOUT_S", "60")

    def script(request, n):
        return [m.Progress("checking proofs", 1, 2), m.Progress("checking proofs", 2, 2), *_result_for(request, n)]

    seen: list[m.Progress] = []
    with FakeDaemon(short_tmp / "fake.sock", script).threaded() as fake:
        with client.connect(fake.socket, name="test", autostart=False) as conn:
            reply = conn.call(m.Diagnostics("/f", progress=True), on_progress=seen.append)
            # Without a handler the frames are read and dropped.
            again = conn.call(m.Diagnostics("/f", progress=True))
    assert isinstance(reply, m.StatusResult) and isinstance(again, m.StatusResult)
    assert [(p.done, p.total) for p in seen] == [(1, 2), (2, 2)]
    assert fake.hellos[0].settings["HOLSRV_IDLE_TIMEOUT_S"] == "60"


# -- the asyncio client -----------------------------------------------------------


@pytest.mark.asyncio
async def test_the_async_client_keeps_one_connection_for_calls_in_turn_and_reports_progress(short_tmp):
    def script(request, n):
        return [m.Progress("loading the heap"), *_result_for(request, n)]

    fake = await FakeDaemon(short_tmp / "fake.sock", script).start()
    daemon = aclient.AsyncClient(fake.socket, name="test", autostart=False, settings={"HOL_BIN": "/h"})
    seen = []

    async def progress(frame):
        seen.append(frame.message)

    try:
        for _ in range(3):
            result, welcome = await daemon.call(m.Status(), on_progress=progress)
            assert isinstance(result, m.StatusResult) and welcome.pid == 4242
    finally:
        await daemon.aclose()
        await fake.stop()
    assert fake.connections == 1
    assert seen == ["loading the heap"] * 3
    assert fake.hellos[0].settings == {"HOL_BIN": "/h"}


@pytest.mark.asyncio
async def test_calls_in_flight_at_once_each_get_their_own_connection(short_tmp):
    gate = asyncio.Event()

    async def script(request, n):
        if n == 1:
            await gate.wait()  # the first call is slow; the second must not queue behind it
        return _result_for(request, n)

    fake = await FakeDaemon(short_tmp / "fake.sock", script).start()
    daemon = aclient.AsyncClient(fake.socket, name="test", autostart=False)
    try:
        slow = asyncio.create_task(daemon.call(m.Status()))
        await fake.first_request()
        async with asyncio.timeout(10):
            fast, _ = await daemon.call(m.Status())
        assert not slow.done() and fast.cache_misses == 2
        gate.set()
        async with asyncio.timeout(10):
            await slow
    finally:
        gate.set()
        await daemon.aclose()
        await fake.stop()
    assert fake.connections == 2


@pytest.mark.asyncio
async def test_a_cancelled_call_closes_its_connection_and_the_next_call_gets_its_own_answer(short_tmp):
    never = asyncio.Event()

    async def script(request, n):
        if n == 1:
            await never.wait()
        return _result_for(request, n)

    fake = await FakeDaemon(short_tmp / "fake.sock", script).start()
    daemon = aclient.AsyncClient(fake.socket, name="test", autostart=False)
    try:
        first = asyncio.create_task(daemon.call(m.Status()))
        await fake.first_request()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        async with asyncio.timeout(10):
            result, _ = await daemon.call(m.Status())
        # The answer to the second request, not a late one to the first.
        assert result.cache_misses == 2
    finally:
        never.set()
        await daemon.aclose()
        await fake.stop()
    assert fake.connections == 2


@pytest.mark.asyncio
async def test_a_question_whose_connection_breaks_is_asked_once_more_on_a_new_one(short_tmp):
    # The first connection closes without answering, as a daemon that exits does.
    fake = await FakeDaemon(short_tmp / "fake.sock", lambda r, n: None if n == 1 else _result_for(r, n)).start()
    daemon = aclient.AsyncClient(fake.socket, name="test", autostart=False)
    try:
        result, _ = await daemon.call(m.Hover("/f", 1, 1))
    finally:
        await daemon.aclose()
        await fake.stop()
    assert result.cache_misses == 2
    assert [type(r) for r in fake.requests] == [m.Hover, m.Hover]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "request_", [m.Eval("/f", "1;"), m.Restart("/f"), m.Stop("/f")], ids=lambda r: r.__struct_config__.tag
)
async def test_a_request_that_acts_is_never_sent_twice(short_tmp, request_):
    fake = await FakeDaemon(short_tmp / "fake.sock", lambda r, n: None if n == 1 else _result_for(r, n)).start()
    daemon = aclient.AsyncClient(fake.socket, name="test", autostart=False)
    try:
        with pytest.raises(DaemonUnreachable, match="may or may not have acted"):
            await daemon.call(request_)
    finally:
        await daemon.aclose()
        await fake.stop()
    assert len(fake.requests) == 1


@pytest.mark.asyncio
async def test_an_idle_connection_the_daemon_closed_to_make_room_is_replaced_even_for_eval(short_tmp):
    fake = await FakeDaemon(short_tmp / "fake.sock").start()
    daemon = aclient.AsyncClient(fake.socket, name="test", autostart=False)
    try:
        await daemon.call(m.Status())
        await fake.drop_connections(m.ErrorReply("connection_closed", "closed to make room"))
        result, _ = await daemon.call(m.Eval("/f", "1;"))
    finally:
        await daemon.aclose()
        await fake.stop()
    assert isinstance(result, m.StatusResult)
    assert fake.connections == 2


@pytest.mark.asyncio
async def test_a_daemon_error_is_raised_as_its_class_and_the_connection_is_kept(short_tmp):
    def script(request, n):
        return [m.ErrorReply("servers_busy", "all 4 servers are busy")] if n == 1 else _result_for(request, n)

    fake = await FakeDaemon(short_tmp / "fake.sock", script).start()
    daemon = aclient.AsyncClient(fake.socket, name="test", autostart=False)
    try:
        with pytest.raises(ServerBusy, match="all 4 servers are busy"):
            await daemon.call(m.Status())
        await daemon.call(m.Status())
    finally:
        await daemon.aclose()
        await fake.stop()
    assert fake.connections == 1


@pytest.mark.asyncio
async def test_no_daemon_and_no_autostart_is_daemon_unreachable(short_tmp):
    daemon = aclient.AsyncClient(short_tmp / "absent.sock", name="test", autostart=False)
    with pytest.raises(DaemonUnreachable, match="no holsrv daemon is listening"):
        await daemon.call(m.Status())


def test_the_async_client_reconnects_to_a_daemon_restarted_on_the_same_socket(daemon_factory, short_tmp, write_script):
    path = write_script(FAILING_SCRIPT)
    sock = short_tmp / "same.sock"
    first = daemon_factory(socket=sock)

    async def main():
        daemon = aclient.AsyncClient(sock, name="test", autostart=False)
        try:
            before, _ = await daemon.call(m.Diagnostics(str(path), wait=20))
            first.stop()  # the idle connection is now closed by the daemon
            daemon_factory(socket=sock)
            after, _ = await daemon.call(m.Diagnostics(str(path), wait=20))
            return before, after
        finally:
            await daemon.aclose()

    before, after = asyncio.run(main())
    assert before.verdict == after.verdict == "FAILED"
    assert after.server.start == "started" and after.server.pid != before.server.pid


def test_a_holmake_reply_is_awaited_as_long_as_the_daemon_lets_holmake_run():
    welcome = m.Welcome(1, "v", 1, holmake_timeout_s=600.0)
    assert calls.reply_timeout(m.Holmake("/f"), welcome) == 600.0 + calls.REPLY_MARGIN_S
    older = m.Welcome(1, "v", 1)  # says nothing of its Holmake limit
    assert calls.reply_timeout(m.Holmake("/f"), older) == calls.FALLBACK_HOLMAKE_TIMEOUT_S + calls.REPLY_MARGIN_S


def _answer(proofs: int, checked: int = 0) -> m.DiagnosticsResult:
    return m.DiagnosticsResult(
        file="/p/bigScript.sml", content_hash="abc", verdict="OK", headline="OK: all proved", complete=True,
        tally=m.Tally(proved=proofs), proofs=[m.Proof(f"t{i}", 3 + 6 * i, "proved", "∀ détail" * (i % 3))
                                          for i in range(proofs)],
        diagnostics=[m.Diagnostic(m.Range(1, 1, 1, 2), "warning", "w") for _ in range(checked)],
        cheats=[], server=m.ServerNote(pid=1),
    )


@pytest.mark.parametrize("proofs, checked, per_step", [
    (0, 0, 4), (3, 0, 4), (4, 0, 4), (5, 0, 4), (17, 20, 4), (70_000, 0, 512), (600, 600, 512),
])
def test_a_long_answer_encoded_a_part_per_step_is_the_frame_encoded_at_once(proofs, checked, per_step):
    # Arrays of every msgpack header size: up to 15 items, up to 65,535, more.
    reply = _answer(proofs, checked)
    pieces, taken = stepped(framing.encode_steps(reply, per_step))
    frame = b"".join(pieces)
    assert frame == framing.encode(reply)
    assert framing.decode(framing.reply_decoder, frame[4:]) == reply
    long = [n for n in (proofs, checked) if n > per_step]
    assert taken == sum(-(-n // per_step) for n in long)  # a step per part, none for a short answer


def test_an_answer_too_large_for_a_frame_is_refused_in_steps_too():
    reply = _answer(20_000)
    reply.proofs = [m.Proof("t", 1, "failed", "x" * 1000)] * 20_000  # 20 MB of details
    with pytest.raises(FrameError):
        stepped(framing.encode_steps(reply, 512))
