"""Calls nobody waits for, HOL servers that answer nothing, and processes that hoard connections.

An eval whose caller hung up is cancelled in HOL and frees its server; a
caller's `wait` bounds its call even on a hung server; a server that let a
request time out without a word is shown `hung`, later calls fail at once,
and a restart kills it within one stop step; one process's idle connections
cannot push another's out.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
import textwrap

import pytest
from test_fairness import _open_hello, _reply

from holsrv import errors, facilities
from holsrv.rpc import framing
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, client_messages, pid_alive, wait_until


def _evals(log) -> list[dict]:
    return [msg for msg in client_messages(log) if msg.get("method") == "$/eval"]


def _waiting(daemon) -> int:
    return sum(s.waiting_calls for s in daemon.call(m.Status()).sessions)


def test_an_eval_whose_caller_hangs_up_is_cancelled_in_hol_and_frees_its_server(daemon, write_script, monkeypatch,
                                                                                tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    sock = _open_hello(daemon)
    try:
        sock.sendall(framing.encode(m.Eval(str(path), "while true do ();", timeout=3600)))
        # The call counts as waiting a moment before the daemon writes it to HOL: wait for the wire.
        wait_until(lambda: _evals(log), what="the eval to reach HOL")
        [evaluated] = _evals(log)
        assert _waiting(daemon) == 1
    finally:
        sock.close()  # the agent process went away
    wait_until(lambda: _waiting(daemon) == 0, what="the abandoned eval to end")
    wait_until(
        lambda: {"id": evaluated["id"]} in [msg.get("params") for msg in client_messages(log)
                                            if msg.get("method") == "$/cancelRequest"],
        what="HOL to be told to stop evaluating",
    )
    # The server is free: another caller's eval runs at once.
    assert daemon.call(m.Eval(str(path), "1 + 1;", timeout=30)).output.strip().endswith("2")


def test_a_caller_that_closes_only_its_writing_half_still_gets_its_answer(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    sock = _open_hello(daemon)
    try:
        sock.sendall(framing.encode(m.Diagnostics(str(path), wait=20)))
        sock.shutdown(socket.SHUT_WR)  # `printf request | nc -U`: done sending, still reading
        sock.settimeout(60)
        reply = _reply(sock)
        assert isinstance(reply, m.DiagnosticsResult) and reply.verdict == "OK"
    finally:
        sock.close()


def test_a_callers_wait_bounds_goal_state_on_a_hung_server(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_HANG_ON", "$/hol/goalState")
    # The daemon's own request timeout is far beyond the client's patience below.
    daemon = daemon_factory(request_timeout_s=300, stop_timeout_s=0.3)
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    with pytest.raises(errors.ServerTimeout, match=r"did not answer \$/hol/goalState within 2.0s"):
        daemon.call(m.GoalState(str(path), 7, 3, wait=2), timeout=60)


def test_a_hung_server_is_shown_hung_fails_later_calls_at_once_and_restarts_in_one_stop_step(
    daemon_factory, write_script, monkeypatch, caplog
):
    monkeypatch.setenv("FAKE_HOL_HANG_ON", "textDocument/hover")
    monkeypatch.setenv("FAKE_HOL_IGNORE_SIGTERM", "1")  # only SIGKILL ends it
    daemon = daemon_factory(request_timeout_s=1.0, stop_timeout_s=1.0)
    path = write_script(GOOD_SCRIPT)
    first = daemon.call(m.Diagnostics(str(path), wait=20))
    with pytest.raises(errors.ServerTimeout, match="did not answer textDocument/hover"):
        daemon.call(m.Hover(str(path), 7, 3))
    [status] = daemon.call(m.Status()).sessions
    assert status.state == "hung"
    with pytest.raises(errors.ServerTimeout, match=r"is hung: it did not answer textDocument/hover within 1\.0s"):
        daemon.call(m.Definition(str(path), 7, 3))
    caplog.set_level(logging.INFO, logger="holsrv")
    caplog.clear()
    restarted = daemon.call(m.Restart(str(path)))
    assert not pid_alive(first.server.pid)
    stop_lines = [r.getMessage() for r in caplog.records if "closed the input" in r.getMessage()
                  or "sending SIG" in r.getMessage()]
    # No goodbye and no wait on its closed input: SIGTERM (ignored), one step, SIGKILL.
    assert [line.split()[1] for line in stop_lines[:2]] == ["SIGTERM", "SIGKILL"], stop_lines
    assert restarted.old_pid == first.server.pid and restarted.new_pid != first.server.pid
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "OK"


_HOG = textwrap.dedent("""
    import socket, sys, time
    sys.path[:0] = sys.argv[3:]
    from holsrv.rpc import framing
    from holsrv.rpc import messages as m
    socks = []
    for _ in range(int(sys.argv[2])):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(15)
        s.connect(sys.argv[1])
        s.sendall(framing.encode(m.Hello(m.PROTOCOL_VERSION, "hog")))
        assert isinstance(framing.decode(framing.reply_decoder, framing.recv_body(s)), m.Welcome)
        socks.append(s)
    print("opened", flush=True)
    sys.stdin.read()  # hold them until the test is done
""")


@pytest.mark.skipif(facilities.peer_check() != "SO_PEERCRED",
                    reason="no peer pid without SO_PEERCRED (portable mode): no per-process idle limit")
def test_one_processs_idle_connections_cannot_push_out_anothers(daemon_factory):
    # No grace: the hog's connections, never asked anything, are idle at once.
    daemon = daemon_factory(max_connections=8, max_idle_per_peer=3, idle_grace_s=0)
    mine = [_open_hello(daemon) for _ in range(2)]
    try:
        with subprocess.Popen(
            [sys.executable, "-c", _HOG, str(daemon.socket), "10", *sys.path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        ) as hog:
            try:
                assert hog.stdout is not None
                assert hog.stdout.readline().strip() == "opened"
                for sock in mine:  # both still open and answered
                    sock.sendall(framing.encode(m.Status()))
                    assert isinstance(_reply(sock), m.StatusResult)
                hogged = [c for c in daemon.daemon.connections._open.values() if c.peer == hog.pid]
                assert len(hogged) == 3, f"the hog keeps {len(hogged)} idle connections"
            finally:
                hog.kill()
    finally:
        for sock in mine:
            sock.close()


# Opens N connections, each with its hello, and asks `status` on each; then opens N more and asks on
# all of them: prints what each of the last round got back.
_MANY = _HOG.replace("print(\"opened\", flush=True)\nsys.stdin.read()  # hold them until the test is done", """
def ask(socks):
    got = []
    for s in socks:
        try:
            s.sendall(framing.encode(m.Status()))
            reply = framing.decode(framing.reply_decoder, framing.recv_body(s))
            got.append(reply.code if isinstance(reply, m.ErrorReply) else type(reply).__name__)
        except OSError as err:
            got.append(type(err).__name__)
    return got
ask(socks)
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(15)
    s.connect(sys.argv[1])
    s.sendall(framing.encode(m.Hello(m.PROTOCOL_VERSION, "many")))
    framing.recv_body(s)
    socks.append(s)
print(" ".join(ask(socks)), flush=True)
""")


def test_a_process_busy_on_many_connections_at_once_has_each_answered(daemon_factory):
    # Past its idle allowance, but each connection waited for its next request only a moment: none is idle.
    daemon = daemon_factory(max_idle_per_peer=3, idle_grace_s=60)
    with subprocess.Popen(
        [sys.executable, "-c", _MANY, str(daemon.socket), "10", *sys.path], stdout=subprocess.PIPE, text=True,
    ) as many:
        try:
            assert many.stdout is not None
            assert many.stdout.readline().split() == ["StatusResult"] * 20
        finally:
            many.kill()


@pytest.mark.asyncio
async def test_an_agent_cancelling_an_eval_stops_it_in_hol(daemon, write_script, monkeypatch, tmp_path):
    from mcp import Client

    from holmcp.server import build_server

    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))

    def evals() -> int:
        return sum(msg.get("method") == "$/eval" for msg in client_messages(log))

    before = evals()
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        call = asyncio.create_task(
            client.call_tool("eval", {"file": path.name, "code": "while true do ();", "timeout": 3600})
        )
        # Waited for in a thread: this loop runs holmcp, which must go on meanwhile.  A call counts as
        # waiting before its request is written: cancelled then, it never reached HOL to be cancelled there.
        await asyncio.to_thread(wait_until, lambda: _waiting(daemon) == 1 and evals() > before,
                                what="the eval to reach HOL")
        call.cancel()  # the agent's host gave up on the call
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.to_thread(wait_until, lambda: _waiting(daemon) == 0, what="the cancelled eval to end")
    # The fake logs the notification when it reads it, a moment after it was sent.
    wait_until(lambda: any(msg.get("method") == "$/cancelRequest" for msg in client_messages(log)),
               what="HOL to be told to stop evaluating")


def test_a_trial_whose_caller_hangs_up_stops_and_gives_the_server_the_files_text_back(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    sock = _open_hello(daemon)
    sock.sendall(framing.encode(m.Try(str(path), 13, ["LOOP_TAC"], timeout=600)))
    wait_until(lambda: _waiting(daemon) == 1, what="the trial to start")
    [session] = daemon.daemon.pool.sessions.values()
    wait_until(lambda: session.data != path.read_bytes(), what="the candidate to reach HOL")
    sock.close()
    wait_until(lambda: _waiting(daemon) == 0, what="the abandoned trial to end")
    assert session.data == path.read_bytes()
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "OK"


def test_a_hung_server_is_replaced_by_itself_once_it_does_not_let_go_of_a_cancelled_request(
    daemon_factory, write_script, monkeypatch
):
    monkeypatch.setenv("FAKE_HOL_HANG_ON", "textDocument/hover")
    daemon = daemon_factory(request_timeout_s=1.0, letgo_s=1.0)
    path = write_script(GOOD_SCRIPT)
    first = daemon.call(m.Diagnostics(str(path), wait=20))
    with pytest.raises(errors.ServerTimeout, match="did not answer textDocument/hover"):
        daemon.call(m.Hover(str(path), 7, 3))
    # Not answered within letgo_s of its cancel: a runaway, killed and replaced with no call.
    wait_until(lambda: not pid_alive(first.server.pid), what="the hung server killed")
    status = daemon.call(m.Status())
    assert status.runaways == 1 and "did not let go of textDocument/hover" in status.last_runaway, status
    again = daemon.call(m.Diagnostics(str(path), wait=20))
    assert again.verdict == "OK" and again.server.pid != first.server.pid
