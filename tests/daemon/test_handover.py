"""`restart-daemon`: the daemon restarts in place (`exec`) and keeps every warm HOL server.

The daemon runs as a process of its own here (an `exec` in the test's process
would replace pytest); each test kills it by its pid at the end, should it
survive, and every HOL server it ran with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import shlex
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from holctl.render import render
from holsrv import __version__, errors, facilities
from holsrv.pool import handover
from holsrv.rpc import calls, framing
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages as m
from holsrv.rpc.aclient import AsyncClient

from conftest import FAKE_HOL, GOOD_SCRIPT, client_messages, living, pid_alive, wait_until

NAMES = ("aScript.sml", "bScript.sml", "cScript.sml")
HELPER = "holsrv-handover-test-helper"  # marks the helpers a wrapped `hol` leaves, in their argv


class Daemon:
    """A daemon process on `socket`, its log in `log`."""

    def __init__(self, socket: Path, log: Path, proc: subprocess.Popen) -> None:
        self.socket, self.log, self.proc = socket, log, proc
        self.seen: list[psutil.Process] = []  # processes a test looked at: killed at the end, should they survive

    def call(self, request: m.Request, timeout: float = 60.0):
        with rpc_client.connect(self.socket, name="test", autostart=False) as client:
            return client.call(request, timeout)

    def said(self, request: m.Request, timeout: float = 60.0) -> m.Reply:
        """The daemon's own reply to `request` on a connection of its own: no client's retry in between."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(self.socket))
            sock.sendall(framing.encode(calls.hello("test")))
            body = framing.recv_body(sock)
            assert body is not None
            calls.welcomed(framing.decode(framing.reply_decoder, body))
            sock.sendall(framing.encode(request))
            body = framing.recv_body(sock)
            assert body is not None, "the daemon closed the connection without a reply"
            return framing.decode(framing.reply_decoder, body)

    def restart(self) -> m.StatusResult:
        """`restart-daemon`, then the status of the daemon once it is back (bounded)."""
        before = self.call(m.Status()).restarts
        asked = self.call(m.RestartDaemon())
        assert isinstance(asked, m.RestartDaemonResult) and asked.pid == self.proc.pid
        back: list[m.StatusResult] = []

        def restarted() -> bool:
            try:
                status = self.call(m.Status(), 30)
            except (errors.HolsrvError, OSError):
                return False  # the switch
            if status.restarts > before:
                back.append(status)
            return bool(back)

        wait_until(restarted, timeout=60, what="the daemon to answer as restarted")
        return back[0]

    def logged(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tree(self) -> list[psutil.Process]:
        return psutil.Process(self.proc.pid).children(recursive=True)


@pytest.fixture
def start_daemon(short_tmp, monkeypatch):
    started: list[Daemon] = []
    monkeypatch.setenv("HOL_BIN", str(FAKE_HOL))
    monkeypatch.setenv("FAKE_HOL_LOG", str(short_tmp / "wire.jsonl"))
    monkeypatch.setenv("HOLSRV_MAX_HEAP_MB", "1024")  # room for all three, on any machine
    monkeypatch.setenv("HOLSRV_MAX_SERVERS", "4")

    def start() -> Daemon:
        sock, log = short_tmp / "h.sock", short_tmp / "daemon.log"
        read_fd, write_fd = os.pipe()
        proc = subprocess.Popen(
            [sys.executable, "-m", "holsrv", "--socket", str(sock), "--ready-fd", str(write_fd),
             "--log-file", str(log)],
            pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as ready:
            assert select.select([ready], [], [], 30)[0], "the daemon never said it was ready"
            assert ready.readline().startswith(b"ready")
        daemon = Daemon(sock, log, proc)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        tree = list(daemon.seen)
        with contextlib.suppress(psutil.Error):
            tree += daemon.tree()
        if daemon.proc.poll() is None:
            daemon.proc.kill()
        daemon.proc.wait(30)
        for proc in tree:
            with contextlib.suppress(psutil.Error):
                proc.kill()


def _warm(daemon: Daemon, write_script, names=NAMES) -> dict[str, m.DiagnosticsResult]:
    replies = {}
    for name in names:
        reply = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, name)), wait=30), 90)
        assert reply.verdict == "OK", reply.headline
        replies[name] = reply
    return replies


def _wire(short_tmp: Path, method: str) -> int:
    return len(client_messages(short_tmp / "wire.jsonl", method))


def test_three_warm_servers_are_kept_across_restart_daemon_and_answer_without_a_compile(
    start_daemon, write_script, short_tmp
):
    daemon = start_daemon()
    before = _warm(daemon, write_script)
    opened, changed = _wire(short_tmp, "initialize"), _wire(short_tmp, "textDocument/didChange")
    assert opened == 3
    status = daemon.restart()
    assert (status.pid, status.adopted, status.not_adopted) == (daemon.proc.pid, 3, 0)
    assert {s.pid for s in status.sessions} == {r.server.pid for r in before.values()}
    for first in before.values():
        again = daemon.call(m.Diagnostics(first.file, wait=30), 90)
        assert again.verdict == "OK" and again.server.pid == first.server.pid and again.server.start == "warm"
        assert again.content_hash == first.content_hash
    # No handshake, no text sent again, no compile on the servers' wires.
    assert _wire(short_tmp, "initialize") == opened
    assert _wire(short_tmp, "textDocument/didOpen") == 3
    assert _wire(short_tmp, "textDocument/didChange") == changed
    assert "adopted 3 HOL servers" in daemon.logged()


def test_a_server_that_died_during_the_handover_is_started_fresh_and_its_answer_says_so(
    start_daemon, write_script, short_tmp, monkeypatch
):
    monkeypatch.setenv(handover.KILL_ENV, "bScript.sml")
    daemon = start_daemon()
    before = _warm(daemon, write_script)
    status = daemon.restart()
    assert (status.adopted, status.not_adopted) == (2, 1)
    dead = before["bScript.sml"].server.pid
    wait_until(lambda: not pid_alive(dead), timeout=10, what="the killed server to be reaped")
    reply = daemon.call(m.Diagnostics(before["bScript.sml"].file, wait=30), 90)
    assert reply.verdict == "OK" and reply.server.pid != dead and reply.server.start == "restarted"
    assert "the daemon restarted and could not adopt this file's server" in reply.server.note
    assert "exited during the handover" in reply.server.note
    kept = daemon.call(m.Diagnostics(before["aScript.sml"].file, wait=30), 90)
    assert kept.server.pid == before["aScript.sml"].server.pid


def test_a_successor_that_does_not_know_the_handover_version_starts_every_server_fresh(
    start_daemon, write_script, short_tmp, monkeypatch
):
    monkeypatch.setenv(handover.VERSION_ENV, str(handover.VERSION + 1))  # a newer daemon's document
    daemon = start_daemon()
    before = _warm(daemon, write_script)
    old = {r.server.pid for r in before.values()}
    status = daemon.restart()
    assert (status.adopted, status.not_adopted, status.sessions) == (0, 3, [])
    lines = [line for line in daemon.logged().splitlines() if "adopts no HOL server" in line]
    assert len(lines) == 1 and f"version {handover.VERSION + 1}" in lines[0], lines
    wait_until(lambda: not any(pid_alive(pid) for pid in old), timeout=10, what="the old servers to be gone")
    reply = daemon.call(m.Diagnostics(before["aScript.sml"].file, wait=30), 90)
    assert reply.verdict == "OK" and reply.server.pid not in old and reply.server.start == "restarted"
    assert "could not adopt this file's server (the handover document is version" in reply.server.note
    assert _wire(short_tmp, "initialize") == 4


def test_new_code_that_cannot_start_leaves_the_old_daemon_serving_and_restart_daemon_fails(
    start_daemon, write_script, monkeypatch
):
    monkeypatch.setenv(handover.BROKEN_ENV, "no module named holsrv.fancy")
    daemon = start_daemon()
    before = _warm(daemon, write_script, NAMES[:1])
    with pytest.raises(errors.HolsrvError) as caught:
        daemon.call(m.RestartDaemon())
    assert caught.value.code == "restart_failed"
    assert "did not restart and serves on" in str(caught.value) and "holsrv.fancy" in str(caught.value)
    status = daemon.call(m.Status())
    assert status.restarts == 0 and [s.pid for s in status.sessions] == [before["aScript.sml"].server.pid]
    again = daemon.call(m.Diagnostics(before["aScript.sml"].file, wait=30), 90)
    assert again.server.pid == before["aScript.sml"].server.pid and again.server.start == "warm"


def _wrapper(path: Path) -> Path:
    """A `hol` as packaged installs have it: a shell script that ignores SIGTERM and runs the server
    as its child, beside a helper that ignores SIGTERM and end of input: only the watchdog's
    SIGKILL of the group ends them (the fake HOL itself exits at end of input)."""
    helper = shlex.quote(f"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
                         f"  # {HELPER}")
    path.write_text(
        "#!/bin/sh\n"
        "trap '' TERM\n"
        "exec 3<&0\n"  # a background job's stdin would be /dev/null
        f"{shlex.quote(sys.executable)} -c {helper} </dev/null &\n"
        f'{shlex.quote(str(FAKE_HOL))} "$@" <&3 3<&- &\n'
        "exec 3<&-\n"
        "wait\n"
    )
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("point", ["before-exec", "before-adoption"])
def test_sigkill_of_the_daemon_during_the_handover_leaves_no_server_alive_5s_later(
    start_daemon, write_script, monkeypatch, short_tmp, point
):
    monkeypatch.setenv(handover.STOP_ENV, point)  # the daemon stops itself there, for the SIGKILL
    monkeypatch.setenv("HOL_BIN", str(_wrapper(short_tmp / "hol")))
    daemon = start_daemon()
    _warm(daemon, write_script)
    tree = daemon.seen = daemon.tree()
    helpers = [p for p in tree if any(HELPER in part for part in p.cmdline())]
    assert len(helpers) == 3, [p.cmdline() for p in tree]  # one in each server's group
    daemon.call(m.RestartDaemon())
    proc = psutil.Process(daemon.proc.pid)
    wait_until(lambda: proc.status() == psutil.STATUS_STOPPED, timeout=60, what=f"the daemon to reach {point}")
    os.kill(daemon.proc.pid, signal.SIGKILL)
    daemon.proc.wait(30)
    wait_until(lambda: not living(tree), timeout=5.0, what=f"every server to go: {living(tree)}")


def test_holctl_restart_daemon_says_how_many_servers_it_handed_over_how_long_it_took_and_the_version(
    start_daemon, write_script
):
    daemon = start_daemon()
    before = _warm(daemon, write_script, NAMES[:2])
    done = subprocess.run(
        [sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "restart-daemon"],
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr
    said = done.stdout.strip()
    assert said.startswith(f"restarted holsrv (pid {daemon.proc.pid}) in ") and f"now holsrv {__version__}" in said
    assert "handed over 2 of 2 HOL servers" in said, said
    status = daemon.call(m.Status())
    assert status.restarts == 1 and status.adopted == 2
    assert {s.pid for s in status.sessions} == {r.server.pid for r in before.values()}
    assert "restarted in place: 1 time(s)" in render(status)  # `holctl status` says it


def test_sighup_restarts_the_daemon_in_place_as_systemctl_reload_does(start_daemon, write_script):
    daemon = start_daemon()
    before = _warm(daemon, write_script, NAMES[:1])
    os.kill(daemon.proc.pid, signal.SIGHUP)

    def restarted() -> bool:
        try:
            return daemon.call(m.Status(), 30).restarts == 1
        except (errors.HolsrvError, OSError):
            return False

    wait_until(restarted, timeout=60, what="the daemon to restart on SIGHUP")
    again = daemon.call(m.Diagnostics(before["aScript.sml"].file, wait=30), 90)
    assert again.server.pid == before["aScript.sml"].server.pid and again.server.start == "warm"


def test_a_call_in_flight_finishes_before_the_restart_and_one_past_the_drain_is_told_to_ask_again(
    start_daemon, write_script
):
    daemon = start_daemon()
    looping = write_script(GOOD_SCRIPT.replace("gen_tac >> simp[]", "LOOP_TAC"), "loopScript.sml")
    daemon.call(m.Diagnostics(str(looping), wait=0.5), 90)
    outcomes: dict[float, object] = {}

    def call(wait: float) -> None:
        # The daemon's own word (holctl and holmcp would ask the restarted daemon once more).
        outcomes[wait] = daemon.said(m.Diagnostics(str(looping), wait=wait), 120)

    short, long = 1.0, 60.0  # the drain waits RESTART_DRAIN_S for calls in flight
    threads = [threading.Thread(target=call, args=(wait,)) for wait in (short, long)]
    for thread in threads:
        thread.start()
    wait_until(lambda: daemon.call(m.Status()).sessions[0].waiting_calls == 2, timeout=30,
               what="both calls to wait on the server")
    daemon.restart()
    for thread in threads:
        thread.join(120)
    assert isinstance(outcomes[short], m.DiagnosticsResult), outcomes[short]
    cut = outcomes[long]
    assert isinstance(cut, m.ErrorReply) and cut.code == "daemon_restarting", cut
    assert "ask again in a moment" in cut.message


@pytest.mark.parametrize("portable", ["0", "1"], ids=["pidfd", "portable"])
def test_an_adopted_server_that_dies_later_is_seen_to_die_and_its_next_call_starts_a_new_one(
    start_daemon, write_script, monkeypatch, portable
):
    # Portable: no pidfd, so the adopted child's exit is seen by a waitpid poll (the loop's watcher knows it not).
    monkeypatch.setenv(facilities.PORTABLE_ENV, portable)
    daemon = start_daemon()
    before = _warm(daemon, write_script, NAMES[:1])
    pid = before["aScript.sml"].server.pid
    assert daemon.restart().adopted == 1
    os.kill(pid, signal.SIGKILL)  # the watchdog: its group goes with it
    wait_until(lambda: daemon.call(m.Status()).sessions[0].state == "dead", timeout=30,
               what="the adopted server's death to be seen")
    wait_until(lambda: pid not in {c.pid for c in psutil.Process(daemon.proc.pid).children()}, timeout=10,
               what="the adopted server to be reaped (no zombie left)")
    again = daemon.call(m.Diagnostics(before["aScript.sml"].file, wait=30), 90)
    assert again.verdict == "OK" and again.server.pid != pid and again.server.start == "restarted"
    assert "died" in again.server.note


LOOPING = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "REPEAT ALL_TAC >> simp[]")


def test_a_server_with_a_request_to_hol_that_never_ends_is_not_handed_over_but_started_fresh_and_said(
    start_daemon, write_script, monkeypatch
):
    monkeypatch.setenv("FAKE_HOL_WALKER", "unlimited")  # a walk of a looping tactic never answers
    monkeypatch.setenv("HOLSRV_LETGO_S", "600")  # not replaced as a runaway meanwhile, however slow the machine
    daemon = start_daemon()
    path = write_script(LOOPING, "loopScript.sml")
    first = daemon.call(m.Diagnostics(str(path), wait=0.5), 90)
    line = LOOPING.split("\n").index("  REPEAT ALL_TAC >> simp[]") + 1
    outcome: dict[str, object] = {}

    def walk() -> None:
        # After the looping tactic: the walk runs it.  The daemon's own word: a client would ask again.
        outcome["reply"] = daemon.said(m.GoalState(str(path), line, len("  REPEAT ALL_TAC >> simp[]") + 1,
                                                   wait=60), 120)

    thread = threading.Thread(target=walk)
    thread.start()
    wait_until(lambda: daemon.call(m.Status()).sessions[0].waiting_calls == 1, timeout=30,
               what="the walk to wait on the server")
    status = daemon.restart()
    thread.join(120)
    assert getattr(outcome["reply"], "code", None) == "daemon_restarting", outcome
    assert (status.adopted, status.not_adopted) == (0, 1)
    assert not pid_alive(first.server.pid)
    again = daemon.call(m.Diagnostics(str(path), wait=0.5), 90)
    assert again.server.pid != first.server.pid and again.server.start == "restarted"
    assert "still had a request to HOL in flight" in again.server.note, again.server.note


def test_holmcps_client_keeps_its_connection_pool_across_restart_daemon_and_its_next_call_is_answered(
    start_daemon, write_script
):
    # holmcp's client keeps idle connections: the daemon closes them at the switch, and the next call is
    # sent on a new one, which waits in the socket's backlog until the restarted daemon serves.
    daemon = start_daemon()
    before = _warm(daemon, write_script, NAMES[:1])
    path = before["aScript.sml"].file

    async def calls() -> tuple[m.DiagnosticsResult, m.DiagnosticsResult]:
        client = AsyncClient(daemon.socket, name="holmcp", autostart=False)
        try:
            first, _ = await client.call(m.Diagnostics(path, wait=30))
            await asyncio.to_thread(daemon.restart)
            again, _ = await client.call(m.Diagnostics(path, wait=30))
            return first, again
        finally:
            await client.aclose()

    first, again = asyncio.run(calls())
    assert again.server.pid == first.server.pid == before["aScript.sml"].server.pid
    assert again.server.start == "warm" and again.content_hash == first.content_hash


BROKEN = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", 'rpt strip_tac >> FAIL_TAC "nope"')


def _sent_texts(wire: Path) -> list[str]:
    """The texts the fake HOL was sent (each didOpen's and didChange's), in order."""
    return [msg["params"]["textDocument"]["text"] if msg["method"] == "textDocument/didOpen"
            else msg["params"]["contentChanges"][0]["text"]
            for msg in client_messages(wire, "textDocument/didOpen", "textDocument/didChange")]


class _Recorded(dict):
    """pytest-lsp's diagnostics by uri, each publish also noted in `events` ("nope" if it says so)."""

    def __init__(self, events: list[str], word: str) -> None:
        super().__init__()
        self.events, self.word = events, word

    def __setitem__(self, uri, diagnostics) -> None:
        super().__setitem__(uri, diagnostics)
        self.events.append(self.word if any(self.word in d.message for d in diagnostics) else "diagnostics")


class _Said(list):
    """pytest-lsp's window/logMessage list, each noted in `events` ("reconnected" for the bridge's word
    that the daemon went and it re-attaches)."""

    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def append(self, message) -> None:
        super().append(message)
        self.events.append("reconnected" if "re-attaching" in message.message else "message")


@pytest.mark.asyncio
async def test_an_editors_unsaved_buffer_stays_in_its_server_across_restart_daemon_and_is_not_sent_again(
    start_daemon, write_script, short_tmp
):
    from lsprotocol import types
    from pytest_lsp import ClientServerConfig

    daemon = start_daemon()
    path = write_script(GOOD_SCRIPT)  # the disk's text; the editor's buffer fails
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "--no-start", "lsp"],
        server_env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent.parent)},
    )
    client = await config.start()
    try:
        await client.initialize_session(types.InitializeParams(
            capabilities=types.ClientCapabilities(), client_info=types.ClientInfo(name="pytest-lsp")))
        uri = path.as_uri()
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="holscript", version=1, text=BROKEN)))

        async def failing() -> None:
            async with asyncio.timeout(60):
                while not any("nope" in d.message for d in client.diagnostics.get(uri, [])):
                    await asyncio.sleep(0.05)  # pytest-lsp keeps the diagnostics; look again

        await failing()
        wire = short_tmp / "wire.jsonl"
        assert _sent_texts(wire) == [BROKEN]
        # What reaches the editor, in order from here: the word that holctl lsp attached again, and
        # the failure of the buffer told again by the adopted server (none is told before the restart).
        events: list[str] = []
        client.diagnostics = _Recorded(events, "nope")
        client.log_messages = _Said(events)
        status = await asyncio.to_thread(daemon.restart)
        assert status.adopted == 1
        async with asyncio.timeout(60):  # `holctl lsp` attaches again, opens its documents again
            while "reconnected" not in events or "nope" not in events[events.index("reconnected"):]:
                await asyncio.sleep(0.05)  # pytest-lsp keeps what it was sent; look again
        session = (await asyncio.to_thread(daemon.call, m.Status())).sessions[0]
        assert session.pid == status.sessions[0].pid
        # The server kept the buffer across the restart: neither the disk's text nor the buffer again.
        assert _sent_texts(wire) == [BROKEN]
    finally:
        await client.shutdown_session()
        await client.stop()


def test_a_failed_exec_hands_every_server_back_to_the_daemon_which_serves_on(
    start_daemon, write_script, short_tmp, monkeypatch
):
    monkeypatch.setenv(handover.EXEC_FAIL_ENV, "1")
    daemon = start_daemon()
    before = _warm(daemon, write_script, NAMES[:2])
    opened = _wire(short_tmp, "initialize")
    daemon.call(m.RestartDaemon())
    wait_until(lambda: "could not restart in place" in daemon.logged(), timeout=60,
               what="the exec to fail")

    def answered() -> m.StatusResult | None:
        try:
            return daemon.call(m.Status(), 30)
        except (errors.HolsrvError, OSError):
            return None  # the restart's drain, and the daemon listening again after it

    wait_until(lambda: answered() is not None, timeout=60, what="the daemon to serve again")
    status = answered()
    assert status is not None and status.restarts == 0 and status.pid == daemon.proc.pid
    assert status.failed_restarts == 1 and "the exec failed" in status.restart_failed
    assert "restarts that failed: 1" in render(status)
    for first in before.values():
        again = daemon.call(m.Diagnostics(first.file, wait=30), 90)
        assert (again.server.pid, again.server.start, again.verdict) == (first.server.pid, "warm", "OK")
    # Edited: the server handed back reads and answers as before.
    edited = Path(before["aScript.sml"].file)
    edited.write_text(GOOD_SCRIPT.replace("gen_tac >> simp[]", 'gen_tac >> FAIL_TAC "nope"'))
    failed = daemon.call(m.Diagnostics(str(edited), wait=30), 90)
    assert failed.verdict == "FAILED" and failed.server.pid == before["aScript.sml"].server.pid
    assert _wire(short_tmp, "initialize") == opened
    # holctl restart-daemon says so at once, and fails.
    done = subprocess.run([sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "restart-daemon"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 1 and "holctl: restart_failed: the daemon" in done.stderr, done.stderr
    assert "the exec failed" in done.stderr
