"""The versions an editor is told through `holctl lsp` are its own (LSP: a document's version is the client's).

The daemon's HOL server for a file is shared: an agent's `try` sends it
candidate texts under the daemon's own version numbers, and a rebuilt
ancestor replaces it with a server whose count starts again.  Whatever HOL
numbered a text, the editor hears the version it gave that text itself, or
no version when the text is not one it had.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features
from test_editor import (
    BROKEN,
    DEADLINE_S,
    TACTIC_LINE,
    agent,
    edit,
    errors,
    open_doc,
    sent_texts,
    stop,
    until,
    with_built_ancestor,
)

from holsrv.disk.files import content_hash
from holsrv.rpc import messages as m
from holsrv.serve.editorversions import EditorVersions
from tests.conftest import GOOD_SCRIPT


@dataclass
class Published:
    version: int | None
    messages: list[str]


async def recording_editor(daemon, published: list[Published]) -> LanguageClient:
    """`holctl lsp` on `daemon`'s socket, with a client that records each publishDiagnostics as it came."""

    def record(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        client.diagnostics[params.uri] = params.diagnostics
        published.append(Published(params.version, [d.message for d in params.diagnostics]))

    def factory() -> LanguageClient:
        client = LanguageClient(converter_factory=default_converter)
        register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: record})
        return client

    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "--no-start", "lsp"],
        client_factory=factory,
        server_env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent.parent)},
    )
    client = await config.start()
    await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), client_info=types.ClientInfo(name="pytest-lsp")))
    return client


def open_at(client: LanguageClient, path: Path, text: str, version: int) -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="holscript", version=version, text=text)))
    return uri


def change_to(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        [types.TextDocumentContentChangeWholeDocument(text=text)]))


AGAIN = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", 'rpt strip_tac >> FAIL_TAC "again"')


@pytest.mark.asyncio
async def test_an_agents_try_between_two_edits_does_not_change_the_versions_the_editor_is_told(
        daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    published: list[Published] = []
    client = await recording_editor(daemon, published)
    try:
        # The editor's own numbers, as an editor that has edited the buffer before has them.
        uri = open_at(client, path, GOOD_SCRIPT, 5)
        answer = await agent(daemon, m.Diagnostics(str(path), wait=30))
        assert answer.verdict == "OK"
        # An agent's trial on the shared server: candidate texts, then the file's text, each a version of HOL's.
        tried = await agent(daemon, m.Try(str(path), TACTIC_LINE + 1, ["simp[]", "fs[]"]))
        assert [c.state for c in tried.candidates] == ["proved", "proved"]
        change_to(client, uri, 6, BROKEN)
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the first edit's failure")
        change_to(client, uri, 7, AGAIN)
        await until(client, "textDocument/publishDiagnostics", lambda: any("again" in e for e in errors(client, uri)),
                    "the second edit's failure")
    finally:
        await stop(client)
    sent = {5: GOOD_SCRIPT, 6: BROKEN, 7: AGAIN}
    told = [p.version for p in published]
    assert set(told) <= {None, *sent}, f"versions the editor never sent: {told}"
    # No list is labelled with a version older than its text (HOL labels a verdict's publish with its
    # newest version, so a list may keep an older text's failure until the new text's check ends).
    for p in published:
        if any("nope" in x for x in p.messages):
            assert p.version in (6, 7), (p, told)
        if any("again" in x for x in p.messages):
            assert p.version == 7, (p, told)


@pytest.mark.asyncio
async def test_after_a_replacement_the_editor_is_told_its_own_versions_not_the_new_servers(
        daemon, write_script, tmp_path, monkeypatch):
    path, gate, built, unsaved = with_built_ancestor(write_script, tmp_path, monkeypatch)
    published: list[Published] = []
    client = await recording_editor(daemon, published)
    try:
        uri = open_at(client, path, unsaved, 25)  # an editor well into its session
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the buffer's failure, from the first server")
        [row] = (await agent(daemon, m.Status())).sessions
        wire = tmp_path / "successor.jsonl"
        monkeypatch.setenv("FAKE_HOL_LOG", str(wire))  # the successor's wire only: it reads it when it spawns
        gate.unlink()
        os.utime(built, (2000, 2000))  # what Holmake leaves: no call, the build watch notices
        async with asyncio.timeout(DEADLINE_S):
            while (await agent(daemon, m.Status())).sessions[0].replacement_pid is None:
                await asyncio.sleep(0.05)  # polling the daemon from outside: nothing to await
        before = len(published)
        gate.touch()
        async with asyncio.timeout(DEADLINE_S):
            while (await agent(daemon, m.Status())).sessions[0].pid == row.pid:
                await asyncio.sleep(0.05)  # polling the daemon from outside: nothing to await
        assert set(sent_texts(wire)) == {unsaved}
        change_to(client, uri, 26, BROKEN_AGAIN := unsaved.replace('FAIL_TAC "nope"', 'FAIL_TAC "again"'))
        await until(client, "textDocument/publishDiagnostics", lambda: any("again" in e for e in errors(client, uri)),
                    "the edited buffer's failure, from the new server")
        assert BROKEN_AGAIN in sent_texts(wire)
    finally:
        await stop(client)
    told = [p.version for p in published]
    assert set(told) <= {None, 25, 26}, f"versions the editor never sent: {told}"
    after = [v for v in told[before:] if v is not None]
    assert 25 in after, f"the new server's word on the buffer it caught up on, as the editor's version: {told}"
    assert all(p.version == 26 for p in published if any("again" in x for x in p.messages)), told
    assert after == sorted(after), f"the versions went backwards after the replacement: {told}"


def test_a_hol_version_is_told_as_the_editors_newest_version_of_that_text_or_not_at_all():
    versions = EditorVersions()
    for digest, version in [("a", 5), ("b", 6), ("a", 7)]:  # the third edit undid the second
        versions.had(digest, version)
    sent = {1: "a", 2: "", 3: "b", 4: "c"}.get  # HOL's versions: the buffer, a trial's candidate, ..., the disk's
    about = {"uri": "file:///x", "version": 1, "diagnostics": []}
    assert versions.relabel(about, sent) == {**about, "version": 7}
    assert versions.relabel({**about, "version": 3}, sent)["version"] == 6
    for other in (2, 4, 99):  # a text the editor never had: no version, not HOL's
        assert "version" not in versions.relabel({**about, "version": other}, sent)
    assert about["version"] == 1  # HOL's params, shared with every listener, are left as they were
    assert versions.relabel({"uri": "file:///x", "pos": {}}, sent) == {"uri": "file:///x", "pos": {}}


@pytest.mark.asyncio
async def test_an_editor_carries_on_across_a_daemon_replaced_under_it_with_its_own_text_and_version(
        daemon_factory, write_script):
    first = daemon_factory()
    path = write_script(GOOD_SCRIPT)
    published: list[Published] = []
    client = await recording_editor(first, published)
    try:
        uri = open_doc(client, path, GOOD_SCRIPT)
        await until(client, "textDocument/publishDiagnostics", lambda: uri in client.diagnostics, "diagnostics")
        first.stop()
        # In the gap: an edit (version 2) and a request, which waits for the next daemon.
        line = GOOD_SCRIPT.splitlines()[TACTIC_LINE]
        edit(client, uri, 2, (TACTIC_LINE, line.index("simp[]")), (TACTIC_LINE, len(line)), 'FAIL_TAC "nope"')
        symbols = asyncio.ensure_future(client.text_document_document_symbol_async(
            types.DocumentSymbolParams(types.TextDocumentIdentifier(uri))))
        second = daemon_factory(socket=first.socket)
        async with asyncio.timeout(DEADLINE_S):
            names = {s.name for s in await symbols}
        assert {"add0", "conj_comm"} <= names
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the edited text's failure, from the second daemon")
        told = [p.version for p in published]
        assert 2 in told and set(told) <= {None, 1, 2}, told  # the editor's own numbers, the latest among them
        # The second daemon holds the editor's buffer: its text, held by the editor.
        [row] = (await agent(second, m.Status())).sessions
        assert (row.file, row.editor, row.editor_unsaved) == (str(path), "pytest-lsp", True)
        assert (await agent(second, m.Diagnostics(str(path), wait=30))).content_hash == content_hash(BROKEN.encode())
        # A pause and a line in the editor's log, no dialog.
        assert any("re-attached" in m.message for m in client.log_messages)
        assert [m.message for m in client.messages if m.type <= types.MessageType.Warning] == []
    finally:
        await stop(client)
