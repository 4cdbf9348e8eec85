"""`holctl lsp` driven by a real LSP client (pytest-lsp, pygls's), on a daemon whose servers are the fake HOL.

The editor and the agents share one server per file: the editor's buffer
is what the server checks while it is open, agents' answers say when that
differs from the disk, and an editor that closes, saves or vanishes gives
the disk back its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from holctl.lsp import bridge, stdio
from holctl.render import render
from holsrv import facilities
from holsrv.disk.files import content_hash
from holsrv.errors import HolsrvError
from holsrv.rpc import messages as m
from tests.conftest import FAILING_SCRIPT, GOOD_SCRIPT, client_messages, pid_alive, wait_until

DEADLINE_S = 60.0  # generous: the machine is shared, and each wait ends as soon as its event comes
UNSAVED = "an editor has unsaved changes to this file"


async def editor(daemon, **capabilities) -> LanguageClient:
    """`holctl lsp` on `daemon`'s socket, with a pygls client initialized against it."""
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "--no-start", "lsp"],
        server_env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent.parent)},
    )
    client = await config.start()
    await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(
            window=types.WindowClientCapabilities(work_done_progress=True),
            general=types.GeneralClientCapabilities(position_encodings=capabilities.get("encodings")),
        ),
        client_info=types.ClientInfo(name="pytest-lsp"),
    ))
    return client


async def notified(client: LanguageClient, method: str, timeout: float) -> bool:
    """Wait up to `timeout` for the next `method` notification.  pytest-lsp's waiter is never
    cancelled: it keeps one per method, and a cancelled one makes it drop the next such
    notification, handlers and all (a later wait replaces a pending one harmlessly)."""
    arrived = asyncio.wrap_future(client.protocol.wait_for_notification(method))
    done, _ = await asyncio.wait([arrived], timeout=timeout)
    return bool(done)


async def until(client: LanguageClient, method: str, holds: Callable[[], bool], what: str) -> None:
    """Wait (bounded) for notifications of `method` until `holds()`."""
    async with asyncio.timeout(DEADLINE_S):
        while not holds():
            await notified(client, method, 2.0)  # then look again: one may have come before the wait
    assert holds(), what


def errors(client: LanguageClient, uri: str) -> list[str]:
    return [d.message for d in client.diagnostics.get(uri, []) if d.severity == types.DiagnosticSeverity.Error]


def open_doc(client: LanguageClient, path: Path, text: str) -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="holscript", version=1, text=text)))
    return uri


def edit(client: LanguageClient, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str):
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        [types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(*start), types.Position(*end)), text=text)],
    ))


async def agent(daemon, request):
    return await asyncio.to_thread(daemon.call, request)


def digest(text: str) -> str:
    return content_hash(text.encode())


# The failing line of FAILING_SCRIPT's `wrong` proof, and GOOD_SCRIPT's second proof made to fail.
BROKEN = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", 'rpt strip_tac >> FAIL_TAC "nope"')
TACTIC_LINE = GOOD_SCRIPT.splitlines().index("  rpt strip_tac >> simp[]")


async def stop(client: LanguageClient) -> None:
    await client.shutdown_session()
    await client.stop()


@pytest.mark.asyncio
async def test_an_editor_gets_the_files_diagnostics_and_proof_states_from_the_daemons_server(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    client = await editor(daemon)
    states: list = []
    client.feature("$/proofStates")(lambda params: states.append(params))
    try:
        uri = open_doc(client, path, FAILING_SCRIPT)
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the failing proof's diagnostic")
        await until(client, "$/proofStates", lambda: bool(states), "a $/proofStates notification")
        status = await agent(daemon, m.Status())
        assert [s.file for s in status.sessions] == [str(path)]
        assert status.sessions[0].editor == "pytest-lsp"
        assert [(e.name, e.documents) for e in status.editors] == [("pytest-lsp", [str(path)])]
        shown = render(status)
        assert f"editor pytest-lsp (holctl lsp): {path}" in shown and "editor pytest-lsp" in shown.split("CLIENTS")[1]
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_an_agent_asking_during_unsaved_edits_is_answered_about_the_buffer_and_told_so(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    client = await editor(daemon)
    try:
        uri = open_doc(client, path, GOOD_SCRIPT)
        line = GOOD_SCRIPT.splitlines()[TACTIC_LINE]
        edit(client, uri, 2, (TACTIC_LINE, line.index("simp[]")), (TACTIC_LINE, len(line)), 'FAIL_TAC "nope"')
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the edited proof's failure, in the editor")
        answer = await agent(daemon, m.Diagnostics(str(path), wait=30))
        assert answer.content_hash == digest(BROKEN)
        assert answer.verdict == "FAILED"
        assert any(r.startswith(UNSAVED) and digest(GOOD_SCRIPT)[:12] in r for r in answer.freshness.reasons)
        assert answer.freshness.may_be_stale
        # The agent's call did not give the server the disk's text: the editor still sees its failure.
        assert any("nope" in e for e in errors(client, uri))
        status = await agent(daemon, m.Status())
        assert len(status.sessions) == 1 and status.sessions[0].editor_unsaved
        assert status.editors[0].unsaved == [str(path)]
        with pytest.raises(HolsrvError) as refused:
            await agent(daemon, m.Try(str(path), TACTIC_LINE + 1, ["simp[]"]))
        assert refused.value.code == "editor_unsaved"
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_a_write_to_the_disk_while_the_buffer_is_unsaved_does_not_reach_the_server(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    client = await editor(daemon)
    try:
        uri = open_doc(client, path, GOOD_SCRIPT)
        line = GOOD_SCRIPT.splitlines()[TACTIC_LINE]
        edit(client, uri, 2, (TACTIC_LINE, line.index("simp[]")), (TACTIC_LINE, len(line)), 'FAIL_TAC "nope"')
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the edited proof's failure, in the editor")
        # Another program writes the file: the script watch sees it, and must leave the editor's text alone.
        path.write_text(GOOD_SCRIPT + "\n(* written behind the editor's back *)\n")
        answer = await agent(daemon, m.Diagnostics(str(path), wait=30, changed_since=digest(GOOD_SCRIPT)))
        assert answer.content_hash == digest(BROKEN)  # about the buffer, as before the write
        assert daemon.daemon.pool.scriptwatch.syncs == 0
        [session] = daemon.daemon.pool.sessions.values()
        assert session.data == BROKEN.encode()
    finally:
        await stop(client)


def test_an_editor_stream_that_is_not_lsp_ends_holctl_lsp_with_one_line_saying_why(daemon):
    done = subprocess.run(
        [sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "--no-start", "lsp"],
        input=b"Content-Length: 12\r\n\r\nnot json at all", capture_output=True, timeout=DEADLINE_S,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent.parent)},
    )
    assert done.returncode == 1
    assert b"Traceback" not in done.stderr
    assert done.stderr.decode().startswith("holctl lsp: a message that is not JSON")


@pytest.mark.asyncio
async def test_after_a_save_the_agent_and_the_editor_share_one_check(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    client = await editor(daemon)
    try:
        uri = open_doc(client, path, GOOD_SCRIPT)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [types.TextDocumentContentChangeWholeDocument(text=BROKEN)]))
        path.write_text(BROKEN, encoding="utf-8")
        client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the saved proof's failure")
        answer = await agent(daemon, m.Diagnostics(str(path), wait=30))
        assert answer.content_hash == digest(BROKEN)
        assert not [r for r in answer.freshness.reasons if r.startswith(UNSAVED)]
        status = await agent(daemon, m.Status())
        assert len(status.sessions) == 1 and not status.sessions[0].editor_unsaved
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_closing_the_document_makes_the_disk_the_truth_again(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    client = await editor(daemon)
    try:
        uri = open_doc(client, path, BROKEN)
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the buffer's failure")
        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
        async with asyncio.timeout(DEADLINE_S):
            while (await agent(daemon, m.Status())).editors[0].documents:
                await asyncio.sleep(0.05)  # polling the daemon from outside: nothing to await
        answer = await agent(daemon, m.Diagnostics(str(path), wait=30))
        assert answer.content_hash == digest(GOOD_SCRIPT) and answer.verdict == "OK"
        assert not answer.freshness.reasons
        assert (await agent(daemon, m.Status())).sessions[0].editor == ""
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_the_goal_state_request_is_answered_by_the_server_as_with_hol_lsp(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    client = await editor(daemon)
    try:
        uri = open_doc(client, path, GOOD_SCRIPT)
        await until(client, "textDocument/publishDiagnostics", lambda: uri in client.diagnostics, "diagnostics")
        async with asyncio.timeout(DEADLINE_S):
            while True:
                state = await client.protocol.send_request_async("$/hol/goalState", {
                    "textDocument": {"uri": uri}, "position": {"line": TACTIC_LINE, "character": 2}})
                if getattr(state, "status", None) != "pending":
                    break
                # Then ask again, completed or not: the completion may have come with the pending answer.
                await notified(client, "$/compileCompleted", 2.0)
        assert state.theorem == "conj_comm"
        assert "q" in state.goals[0].goal
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_an_editor_that_vanishes_releases_its_documents(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    client = await editor(daemon)
    uri = open_doc(client, path, BROKEN)
    await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                "the buffer's failure")
    assert client._server is not None
    os.kill(client._server.pid, signal.SIGKILL)  # the holctl lsp this test started
    await client._server.wait()
    await client.stop()
    async with asyncio.timeout(DEADLINE_S):
        while (await agent(daemon, m.Status())).editors:
            await asyncio.sleep(0.05)  # polling the daemon from outside: nothing to await
    answer = await agent(daemon, m.Diagnostics(str(path), wait=30))
    assert answer.content_hash == digest(GOOD_SCRIPT) and answer.verdict == "OK"
    assert not answer.freshness.reasons


# A failing step after characters that are 3 bytes in utf-8 and one unit in utf-16.
WIDE = FAILING_SCRIPT.replace('  rpt strip_tac >> FAIL_TAC "nope"', '  (* ∀∀ *) rpt strip_tac >> FAIL_TAC "nope"')
WIDE_LINE = WIDE.splitlines().index('  (* ∀∀ *) rpt strip_tac >> FAIL_TAC "nope"')


@pytest.mark.asyncio
@pytest.mark.parametrize("offered, column", [
    (None, WIDE.splitlines()[WIDE_LINE].index("FAIL_TAC")),  # utf-16: one unit a character here
    (["utf-8"], len(WIDE.splitlines()[WIDE_LINE].split("FAIL_TAC")[0].encode())),
])
async def test_diagnostic_columns_reach_the_editor_in_the_encoding_it_negotiated(
        daemon, write_script, offered, column):
    path = write_script(WIDE)
    client = await editor(daemon, encodings=offered)
    try:
        uri = open_doc(client, path, WIDE)

        def at_the_step() -> bool:
            return any(d.range.start.line == WIDE_LINE for d in client.diagnostics.get(uri, []))

        await until(client, "textDocument/publishDiagnostics", at_the_step, "the failure moved to its step")
        [failure] = [d for d in client.diagnostics[uri] if d.range.start.line == WIDE_LINE]
        assert failure.range.start.character == column
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_after_the_daemon_restarts_the_editor_is_told_and_its_documents_are_open_again(
        daemon_factory, write_script):
    first = daemon_factory()
    path = write_script(FAILING_SCRIPT)
    client = await editor(first)
    try:
        uri = open_doc(client, path, FAILING_SCRIPT)
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the first daemon's diagnostics")
        first.stop()
        client.diagnostics.clear()
        second = daemon_factory(socket=first.socket)
        await until(client, "window/logMessage", lambda: any("re-attached" in m.message for m in client.log_messages),
                    "word in the editor's log that holctl lsp re-attached")
        assert any("went away" in m.message for m in client.log_messages)
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the second daemon's diagnostics, for the document opened again")
        assert [s.file for s in (await agent(second, m.Status())).sessions] == [str(path)]
    finally:
        await stop(client)


class InProcess:
    """`holctl lsp`'s bridge in this process, on a socket pair: the test speaks LSP at the editor's end."""

    def __init__(self, daemon) -> None:
        self.daemon = daemon

    async def __aenter__(self) -> InProcess:
        ours, theirs = socket.socketpair()
        self._bridge_in, self._bridge_out = await asyncio.open_connection(sock=theirs)
        self.running = asyncio.create_task(bridge.Bridge(self.daemon.socket, False, self._bridge_in,
                                                         self._bridge_out).run())
        self.reader, self.writer = await asyncio.open_connection(sock=ours)
        await self.say({"id": "init", "method": "initialize", "params": {"capabilities": {}}})
        await self.heard(lambda msg: msg.get("id") == "init")
        return self

    async def __aexit__(self, *exc) -> None:
        self.running.cancel()
        await asyncio.gather(self.running, return_exceptions=True)
        for end in (self.writer, self._bridge_out):
            end.close()
            with contextlib.suppress(OSError):
                await end.wait_closed()

    async def say(self, message: dict) -> None:
        self.writer.write(stdio.frame({"jsonrpc": "2.0", **message}))
        await self.writer.drain()

    async def heard(self, holds: Callable[[dict], bool]) -> dict:
        async with asyncio.timeout(DEADLINE_S):
            while not holds(message := await stdio.read_message(self.reader) or {}):
                pass
        return message

    async def open(self, path: Path, text: str) -> None:
        await self.say({"method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": path.as_uri(), "languageId": "holscript", "version": 1, "text": text}}})

    async def symbols(self, editor_id: int, path: Path) -> None:
        await self.say({"id": editor_id, "method": "textDocument/documentSymbol",
                        "params": {"textDocument": {"uri": path.as_uri()}}})


@pytest.mark.asyncio
async def test_a_request_in_the_gap_is_answered_ask_again_when_no_daemon_comes_back_in_time(
        daemon_factory, write_script, monkeypatch):
    monkeypatch.setattr(bridge, "GAP_WAIT_S", 1.0)  # the bound, short for the test (30 s in use)
    first = daemon_factory()
    path = write_script(GOOD_SCRIPT)
    async with InProcess(first) as editor_:
        await editor_.open(path, GOOD_SCRIPT)
        await asyncio.to_thread(first.stop)
        await editor_.heard(lambda msg: "went away" in str(msg.get("params")))
        await editor_.symbols(2, path)
        answer = await editor_.heard(lambda msg: msg.get("id") == 2)
        assert answer["error"]["code"] == bridge.CONTENT_MODIFIED
        assert "did not come back within 1s; ask again" in answer["error"]["message"]
        await editor_.say({"method": "exit"})
        async with asyncio.timeout(DEADLINE_S):
            await editor_.running


@pytest.mark.asyncio
async def test_a_question_in_flight_when_the_daemon_goes_is_asked_again_of_the_next_one(
        daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_HANG_ON", "textDocument/documentSymbol")  # the first daemon's server never answers
    first = daemon_factory()
    path = write_script(GOOD_SCRIPT)
    async with InProcess(first) as editor_:
        await editor_.open(path, GOOD_SCRIPT)
        await editor_.symbols(2, path)
        await asyncio.to_thread(wait_until, lambda: any(s.waiting_calls for s in first.call(m.Status()).sessions),
                                DEADLINE_S, "the editor's request waiting in the first daemon")
        await asyncio.to_thread(first.stop)
        monkeypatch.delenv("FAKE_HOL_HANG_ON")
        daemon_factory(socket=first.socket)
        answer = await editor_.heard(lambda msg: msg.get("id") == 2)
    assert {"add0", "conj_comm"} <= {symbol["name"] for symbol in answer["result"]}, answer


@pytest.mark.asyncio
@pytest.mark.skipif(facilities.peer_check() != "SO_PEERCRED",
                    reason="no SO_PEERCRED here (portable mode): no peer's user to refuse; test_portable covers it")
async def test_an_editor_of_another_user_is_refused_and_told_why(daemon, write_script):
    daemon.daemon.connections.owner_uid = os.getuid() + 1  # as if the peer were another user
    client = await editor(daemon)
    try:
        assert any("peer_refused" in shown.message for shown in client.messages), client.messages
        open_doc(client, write_script(GOOD_SCRIPT), GOOD_SCRIPT)
        daemon.daemon.connections.owner_uid = os.getuid()
        assert (await agent(daemon, m.Status())).editors == []
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_eval_from_the_editor_runs_in_the_files_server_as_with_hol_lsp(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    client = await editor(daemon)
    try:
        uri = open_doc(client, path, GOOD_SCRIPT)
        async with asyncio.timeout(DEADLINE_S):
            reports = await client.protocol.send_request_async(
                "$/eval", {"uri": uri, "code": "PolyML.print (6 * 7);", "incr": 0})
        assert [r["body"] for r in reports if r["kind"] == "toplevelOut"] == ["42\n"]
        assert [s.file for s in (await agent(daemon, m.Status())).sessions] == [str(path)]
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_the_editors_set_config_changes_its_own_view_not_the_agents(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    client = await editor(daemon)
    try:
        async with asyncio.timeout(DEADLINE_S):
            assert await client.protocol.send_request_async("$/setConfig", {"elabOn": 2, "checkProofs": False}) \
                is None
        uri = open_doc(client, path, GOOD_SCRIPT)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [types.TextDocumentContentChangeWholeDocument(text=BROKEN)]))
        # Compile on save: the unsaved edit has not gone to the server, and the agents' proofs are still checked.
        answer = await agent(daemon, m.Diagnostics(str(path), wait=30))
        assert (answer.verdict, answer.content_hash, answer.tally.proved) == ("OK", digest(GOOD_SCRIPT), 2)
        assert not answer.freshness.reasons
        client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the buffer's failure, once saved (its text was sent at the save)")
        answer = await agent(daemon, m.Diagnostics(str(path), wait=30))
        assert answer.content_hash == digest(BROKEN)
    finally:
        await stop(client)


def sent_texts(wire: Path) -> list[str]:
    """The texts the fake HOL was sent (each didOpen's and didChange's), in order, from its wire log."""
    return [msg["params"]["textDocument"]["text"] if msg["method"] == "textDocument/didOpen"
            else msg["params"]["contentChanges"][0]["text"]
            for msg in client_messages(wire, "textDocument/didOpen", "textDocument/didChange")]


@pytest.mark.asyncio
async def test_a_server_started_for_a_file_an_editor_holds_dirty_never_checks_the_disks_text(
        daemon, write_script, tmp_path, monkeypatch):
    wire = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(wire))  # read by the server the editor's open starts
    path = write_script(GOOD_SCRIPT)
    client = await editor(daemon)
    try:
        uri = open_doc(client, path, BROKEN)  # unsaved: the disk has GOOD_SCRIPT
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the buffer's failure")
        sent = sent_texts(wire)
        assert sent and set(sent) == {BROKEN}, "the server was sent the disk's text"
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_an_editors_open_document_shows_in_status_as_the_editor_not_as_a_waiting_call(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    client = await editor(daemon)
    try:
        uri = open_doc(client, path, GOOD_SCRIPT)
        await until(client, "textDocument/publishDiagnostics", lambda: uri in client.diagnostics, "diagnostics")
        [row] = (await agent(daemon, m.Status())).sessions
        assert (row.editor, row.waiting_calls) == ("pytest-lsp", 0)
        assert "editor pytest-lsp" in row.clients
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_an_editors_open_document_keeps_its_server_from_being_stopped_to_make_room(daemon_factory, write_script):
    daemon = daemon_factory(max_servers=1)
    path = write_script(GOOD_SCRIPT)
    client = await editor(daemon)
    try:
        uri = open_doc(client, path, GOOD_SCRIPT)
        await until(client, "textDocument/publishDiagnostics", lambda: uri in client.diagnostics, "diagnostics")
        async with asyncio.timeout(DEADLINE_S):
            while (await agent(daemon, m.Status())).sessions[0].state != "settled":
                await asyncio.sleep(0.05)  # polling the daemon from outside: nothing to await
        with pytest.raises(HolsrvError) as refused:
            await agent(daemon, m.Diagnostics(str(write_script(GOOD_SCRIPT, "otherScript.sml")), wait=30))
        assert refused.value.code == "servers_busy" and "(open in an editor)" in str(refused.value)
        assert [s.file for s in (await agent(daemon, m.Status())).sessions] == [str(path)]
    finally:
        await stop(client)


# A script with a built ancestor, to be rebuilt under the editor (as tests/daemon/test_replacement.py does).
WITH_ANCESTOR = """\
Theory demo
Ancestors mylib

Theorem add0:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED
"""


def with_built_ancestor(write_script, tmp_path: Path, monkeypatch) -> tuple[Path, Path, Path, str]:
    """A script on a built ancestor (its build time old), a gate that holds a successor's start while
    it is missing, and an unsaved buffer whose proof fails: (script, gate, build, buffer)."""
    gate, built = tmp_path / "gate", tmp_path / "mylibTheory.uo"
    gate.touch()
    monkeypatch.setenv("FAKE_HOL_START_GATE", str(gate))
    built.write_text("built")
    os.utime(built, (1000, 1000))
    path = write_script(WITH_ANCESTOR)
    return path, gate, built, WITH_ANCESTOR.replace("gen_tac >> simp[]", 'FAIL_TAC "nope"')


@pytest.mark.asyncio
async def test_a_rebuilt_ancestor_replaces_the_server_of_a_file_open_in_an_editor_and_the_editor_follows(
        daemon, write_script, tmp_path, monkeypatch):
    path, gate, built, unsaved = with_built_ancestor(write_script, tmp_path, monkeypatch)
    client = await editor(daemon)
    states: list = []
    client.feature("$/proofStates")(lambda params: states.extend(params.states))
    try:
        uri = open_doc(client, path, unsaved)
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the buffer's failure, from the first server")
        [row] = (await agent(daemon, m.Status())).sessions
        old_pid = row.pid
        wire = tmp_path / "successor.jsonl"
        monkeypatch.setenv("FAKE_HOL_LOG", str(wire))  # the successor's wire only: it reads it when it spawns
        # Nor does the successor move its failure to the step while the test runs: all it says of the
        # buffer, it says while catching up, before the editor follows it (which must not miss it).
        monkeypatch.setenv("FAKE_HOL_RELOCATE_MS", "600000")
        gate.unlink()
        os.utime(built, (2000, 2000))  # what Holmake leaves: no call, the build watch notices
        async with asyncio.timeout(DEADLINE_S):
            while (await agent(daemon, m.Status())).sessions[0].replacement_pid is None:
                await asyncio.sleep(0.05)  # polling the daemon from outside: nothing to await
        client.diagnostics.clear()  # from here on, only the new server has anything to say
        states.clear()
        gate.touch()
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the new server's diagnostics of the buffer")
        # And its proof states, which it gave while catching up, before the editor followed it.
        await until(client, "$/proofStates", lambda: any(s.name == "add0" for s in states),
                    "the new server's proof states")
        assert [(s.name, s.status, s.pos.line) for s in states] == [("add0", "failed", 3)]
        async with asyncio.timeout(DEADLINE_S):
            while pid_alive(old_pid):  # the editor's document does not keep the replaced server
                await asyncio.sleep(0.05)
        [row] = (await agent(daemon, m.Status())).sessions
        assert row.pid != old_pid and row.editor == "pytest-lsp" and row.waiting_calls == 0
        assert set(sent_texts(wire)) == {unsaved}, "the successor was sent the disk's text"
        # The editor's next edit goes to the new server, and its word comes back.
        fixed = unsaved.replace('FAIL_TAC "nope"', 'FAIL_TAC "again"')
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [types.TextDocumentContentChangeWholeDocument(text=fixed)]))
        await until(client, "textDocument/publishDiagnostics", lambda: any("again" in e for e in errors(client, uri)),
                    "the edited buffer's failure, from the new server")
        assert fixed in sent_texts(wire)
    finally:
        await stop(client)
