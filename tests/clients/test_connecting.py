"""Reaching the daemon (`holsrv.rpc.connecting`): each failure of connect-start-hello gives its stable
code in all three clients, and a call caught in a daemon's restart is sent once more when that is safe.

The daemon is `test_wire.FakeDaemon` (real sockets, real framing), which can
say what a real daemon says only in the middle of a restart.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from test_wire import FakeDaemon, _result_for

from holctl.lsp import link
from holsrv import errors
from holsrv.rpc import aclient, client, connecting, framing
from holsrv.rpc import editor as e
from holsrv.rpc import messages as m

RESTARTING = m.ErrorReply("daemon_restarting", "the daemon is restarting to hand its servers over; ask again")
STOPPING = m.ErrorReply("daemon_stopping", "the daemon is shutting down and stopped this call")


# -- connect, hello, welcome: one helper, three clients ------------------------------------


def _blocking(path: Path) -> None:
    client.connect(path, name="test", autostart=False).close()


def _async(path: Path) -> None:
    async def main() -> None:
        daemon = aclient.AsyncClient(path, name="test", autostart=False)
        try:
            await daemon.call(m.Status())
        finally:
            await daemon.aclose()

    asyncio.run(main())


def _editor(path: Path) -> None:
    async def main() -> None:
        (await link.connect(path, "pytest", autostart_daemon=False)).close()

    asyncio.run(main())


CLIENTS = {"holctl": _blocking, "holmcp": _async, "holctl lsp": _editor}


@pytest.fixture(params=list(CLIENTS))
def connects(request) -> Callable[[Path], None]:
    return CLIENTS[request.param]


def _welcoming(short_tmp: Path, first: m.Reply) -> FakeDaemon:
    """A fake daemon that answers every hello with `first`."""
    return FakeDaemon(short_tmp / "fake.sock", welcome=first)  # type: ignore[arg-type]


def test_no_daemon_and_no_start_is_daemon_unreachable_saying_how_to_start_one(short_tmp, connects):
    with pytest.raises(errors.HolsrvError) as raised:
        connects(short_tmp / "absent.sock")
    assert raised.value.code == "daemon_unreachable"
    assert "no holsrv daemon is listening" in str(raised.value) and "`holsrv`" in str(raised.value)


def test_a_daemon_that_speaks_another_protocol_is_protocol_mismatch_saying_how_to_match(short_tmp, connects):
    with _welcoming(short_tmp, m.Welcome(m.PROTOCOL_VERSION + 1, "9.9", 4242)).threaded() as fake:
        with pytest.raises(errors.HolsrvError) as raised:
            connects(fake.socket)
    assert raised.value.code == "protocol_mismatch"
    assert f"speaks protocol {m.PROTOCOL_VERSION + 1}" in str(raised.value) and "kill 4242" in str(raised.value)


def test_the_daemons_word_on_an_old_client_is_protocol_mismatch_in_its_words(short_tmp, connects):
    word = m.ErrorReply("protocol_mismatch", "protocol mismatch: client test speaks protocol 0; restart the daemon")
    with _welcoming(short_tmp, word).threaded() as fake:
        with pytest.raises(errors.HolsrvError) as raised:
            connects(fake.socket)
    assert (raised.value.code, str(raised.value)) == ("protocol_mismatch", word.message)


def test_a_daemon_of_another_user_is_peer_refused(short_tmp, connects):
    word = m.ErrorReply("peer_refused", "this daemon serves uid 1000 only")
    with _welcoming(short_tmp, word).threaded() as fake:
        with pytest.raises(errors.HolsrvError) as raised:
            connects(fake.socket)
    assert (raised.value.code, str(raised.value)) == ("peer_refused", word.message)


def test_a_socket_that_hangs_up_without_a_word_is_daemon_unreachable(short_tmp, connects):
    path = short_tmp / "mute.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()

    def hang_up() -> None:
        conn, _ = listener.accept()
        conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        with pytest.raises(errors.HolsrvError) as raised:
            connects(path)
    finally:
        listener.close()
    assert raised.value.code == "daemon_unreachable"
    assert "handshake" in str(raised.value)


# -- a call caught in the switch -------------------------------------------------------


def _refusing(short_tmp: Path, refusals: int, word: m.ErrorReply = RESTARTING) -> FakeDaemon:
    """A fake daemon that refuses the first `refusals` requests with `word` and hangs up after each, as a
    daemon that restarts closes every connection; then answers."""
    fake = FakeDaemon(short_tmp / "fake.sock", lambda r, n: [word] if n <= refusals else _result_for(r, n))
    fake.close_after = set(range(1, refusals + 1))
    return fake


@pytest.mark.parametrize("request_", [m.Status(), m.Hover("/f", 1, 1)], ids=["status", "hover"])
def test_the_blocking_client_sends_a_call_refused_as_restarting_once_more_and_gets_its_answer(short_tmp, request_):
    with _refusing(short_tmp, 1).threaded() as fake, client.connect(fake.socket, name="t", autostart=False) as conn:
        result = conn.call(request_)
    assert isinstance(result, m.StatusResult) and result.cache_misses == 2
    assert [type(r) for r in fake.requests] == [type(request_)] * 2 and fake.connections == 2


def test_the_blocking_client_refused_twice_says_the_daemon_was_restarting_and_to_ask_again(short_tmp):
    with _refusing(short_tmp, 2).threaded() as fake, client.connect(fake.socket, name="t", autostart=False) as conn:
        with pytest.raises(errors.DaemonRestarting, match="the daemon was restarting during Status; ask again"):
            conn.call(m.Status())
    assert len(fake.requests) == 2  # once more, not again and again


@pytest.mark.parametrize("request_", [m.Eval("/f", "1;"), m.Restart("/f"), m.Stop("/f")],
                         ids=lambda r: r.__struct_config__.tag)
def test_a_request_that_acts_refused_as_restarting_is_not_sent_again_and_told_to_ask_again(short_tmp, request_):
    # daemon_restarting also answers a call cut short at the end of the drain: an eval may have run.
    with _refusing(short_tmp, 1).threaded() as fake, client.connect(fake.socket, name="t", autostart=False) as conn:
        with pytest.raises(errors.DaemonRestarting, match="the daemon was restarting during .*; ask again"):
            conn.call(request_)
    assert len(fake.requests) == 1


def test_an_eval_cut_short_by_a_stopping_daemon_is_not_sent_again_and_gets_the_daemons_word(short_tmp):
    # daemon_stopping is also said of a call stopped in flight: the eval may have run.
    with _refusing(short_tmp, 1, STOPPING).threaded() as fake, \
            client.connect(fake.socket, name="t", autostart=False) as conn:
        with pytest.raises(errors.DaemonStopping) as raised:
            conn.call(m.Eval("/f", "1;"))
    assert str(raised.value).startswith(STOPPING.message) and len(fake.requests) == 1


def test_a_question_cut_short_by_a_stopping_daemon_is_asked_again(short_tmp):
    with _refusing(short_tmp, 1, STOPPING).threaded() as fake, \
            client.connect(fake.socket, name="t", autostart=False) as conn:
        result = conn.call(m.Hover("/f", 1, 1))
    assert isinstance(result, m.StatusResult) and len(fake.requests) == 2


def test_the_blocking_client_asks_once_more_when_the_daemon_hangs_up_before_its_answer(short_tmp):
    fake = FakeDaemon(short_tmp / "fake.sock", lambda r, n: None if n == 1 else _result_for(r, n))
    with fake.threaded(), client.connect(fake.socket, name="t", autostart=False) as conn:
        result = conn.call(m.Hover("/f", 1, 1))
    assert isinstance(result, m.StatusResult) and [type(r) for r in fake.requests] == [m.Hover, m.Hover]


def test_the_blocking_client_never_sends_an_eval_twice_when_the_daemon_hangs_up_before_its_answer(short_tmp):
    fake = FakeDaemon(short_tmp / "fake.sock", lambda r, n: None if n == 1 else _result_for(r, n))
    with fake.threaded(), client.connect(fake.socket, name="t", autostart=False) as conn:
        with pytest.raises(errors.DaemonUnreachable, match="may or may not have acted"):
            conn.call(m.Eval("/f", "1;"))
    assert len(fake.requests) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("request_", [m.Status(), m.Hover("/f", 1, 1)], ids=["status", "hover"])
async def test_the_async_client_sends_a_call_refused_as_restarting_once_more_and_gets_its_answer(
        short_tmp, request_):
    fake = await _refusing(short_tmp, 1).start()
    daemon = aclient.AsyncClient(fake.socket, name="test", autostart=False)
    try:
        result, _ = await daemon.call(request_)
    finally:
        await daemon.aclose()
        await fake.stop()
    assert isinstance(result, m.StatusResult) and result.cache_misses == 2
    assert fake.connections == 2


@pytest.mark.asyncio
async def test_the_async_client_never_sends_an_eval_refused_as_restarting_again(short_tmp):
    fake = await _refusing(short_tmp, 1).start()
    daemon = aclient.AsyncClient(fake.socket, name="test", autostart=False)
    try:
        with pytest.raises(errors.DaemonRestarting, match="the daemon was restarting during Eval; ask again"):
            await daemon.call(m.Eval("/f", "1;"))
    finally:
        await daemon.aclose()
        await fake.stop()
    assert len(fake.requests) == 1


@pytest.mark.asyncio
async def test_the_async_client_refused_twice_says_the_daemon_was_restarting_and_to_ask_again(short_tmp):
    fake = await _refusing(short_tmp, 2).start()
    daemon = aclient.AsyncClient(fake.socket, name="test", autostart=False)
    try:
        with pytest.raises(errors.DaemonRestarting, match="the daemon was restarting during Status; ask again"):
            await daemon.call(m.Status())
    finally:
        await daemon.aclose()
        await fake.stop()
    assert len(fake.requests) == 2


@pytest.mark.asyncio
async def test_a_call_caught_in_the_switch_waits_for_the_next_daemon_within_a_bound(short_tmp, monkeypatch):
    monkeypatch.setattr(connecting, "RESTART_WAIT_S", 60.0)  # generous: the machine is shared
    fake = FakeDaemon(short_tmp / "fake.sock")

    async def going(request, n):
        fake._server.close()  # no daemon takes connections for a while: the call must wait for the next
        return [RESTARTING]

    fake.script, fake.close_after = going, {1}
    await fake.start()
    daemon = aclient.AsyncClient(fake.socket, name="test", autostart=False)
    try:
        call = asyncio.create_task(daemon.call(m.Status()))
        await fake.first_request()
        async with asyncio.timeout(60):
            while fake._server.is_serving():
                await asyncio.sleep(0.01)  # polls a condition (bounded above), not a synchronisation by time
        second = await FakeDaemon(fake.socket).start()
        try:
            async with asyncio.timeout(60):
                result, _ = await call
        finally:
            await second.stop()
    finally:
        await daemon.aclose()
        await fake.stop()
    assert isinstance(result, m.StatusResult) and len(fake.requests) == len(second.requests) == 1


class _Draining(FakeDaemon):
    """A fake daemon whose first `refusals` connections are refused at the hello with daemon_restarting
    (a daemon draining for a restart), and that serves as FakeDaemon after."""

    refusals = 1

    async def _serve(self, reader, writer) -> None:
        if self.connections < self.refusals:
            self.connections += 1
            await framing.read_body(reader)
            writer.write(framing.encode(RESTARTING))
            await writer.drain()
            writer.close()
            return
        await super()._serve(reader, writer)


def _attaching(request: m.Request, n: int) -> list:
    """What the fake answers: an editor's channel opened for an attach (the editor bridge), else a status."""
    return [e.EditorAttached()] if isinstance(request, m.EditorAttach) else _result_for(request, n)


def test_a_hello_refused_by_a_restarting_daemon_waits_for_the_next_one(short_tmp, connects):
    with _Draining(short_tmp / "fake.sock", _attaching).threaded() as fake:
        connects(fake.socket)
    assert fake.connections == 2 and len(fake.hellos) == 1


def test_a_daemon_restarting_past_the_bound_is_daemon_restarting(short_tmp, connects, monkeypatch):
    monkeypatch.setattr(connecting, "RESTART_WAIT_S", 0.5)
    fake = _Draining(short_tmp / "fake.sock")
    fake.refusals = 10**6
    with fake.threaded():
        with pytest.raises(errors.DaemonRestarting):
            connects(fake.socket)
    assert fake.hellos == [] and fake.connections >= 2
