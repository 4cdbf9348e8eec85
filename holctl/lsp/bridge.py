"""One editor's LSP session, spoken as `hol lsp --lsp-check-proofs` speaks it, routed onto the daemon.

The editor talks to us as to HOL: the same `initialize` result (a running
server's, else the one docs/protocol.md#initialize-result records), its own request ids, HOL's
`$/…` methods.  Each document goes to the daemon as whole texts; each
request goes as an `EditorCall` under an id of ours and comes back under
the editor's; positions are converted between the editor's encoding and
the server's.  HOL's configuration (`$/setConfig`) belongs to a server the
agents share, so it is never forwarded: its settings are applied to the
editor's view here (`view.View`).

When the daemon goes away (it restarted, or stopped and the next one starts
on demand) the bridge re-attaches to the daemon that takes over and opens
every document again with the editor's text and version, so the editor sees
a pause and a line in its log, no dialog.  Requests the editor asks in the
gap wait (at most MAX_WAITING, for at most GAP_WAIT_S) and go once the
bridge is attached again; questions in flight when the daemon went are asked
again, an `$/eval` is not (it may have run).
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from holctl.lsp import stdio
from holctl.lsp.documents import Document, Documents
from holctl.lsp.positions import convert
from holctl.lsp.upstream import Upstream
from holctl.lsp.view import View
from holsrv.errors import HolsrvError
from holsrv.rpc import editor as e
from holsrv.rpc.messages import ErrorReply

# `hol lsp`'s initialize result as docs/protocol.md#initialize-result records it: what the editor
# is told when no server runs yet to say its own.
RECORDED_INITIALIZE: dict[str, Any] = {
    "capabilities": {
        "textDocumentSync": 2,
        "positionEncoding": "utf-8",
        "hoverProvider": True,
        "definitionProvider": True,
        "documentSymbolProvider": True,
        "workspaceSymbolProvider": True,
        "completionProvider": {"triggerCharacters": ["."]},
    },
    "serverInfo": {"name": "HOL4"},
}
# JSON-RPC codes of the answers given here.
INTERNAL_ERROR, REQUEST_CANCELLED, CONTENT_MODIFIED = -32603, -32800, -32801
# LSP's window/showMessage types.
ERROR, WARNING, INFO = 1, 2, 3
# Requests the editor asks while the bridge re-attaches wait for it, this many at
# most and this long at most; past either they are answered "ask again".
MAX_WAITING = 64
GAP_WAIT_S = 30.0
# Editor requests that act: one in flight when the daemon went may have run, so it is not sent again.
ACTING = frozenset({"$/eval"})
# What the daemon says on the channel when it goes away as it should (a restart, a shutdown): a log line, no dialog.
GOING = frozenset({"daemon_restarting", "daemon_stopping"})


@dataclass
class _Pending:
    """A request forwarded to the daemon: the editor's id and what converts its answer;
    its method and params, to ask it again of the next daemon."""

    editor_id: Any
    uri: str
    method: str = ""
    params: Any = None
    cancelled: bool = False  # the editor cancelled it
    again: bool = False  # asked once more already, after the daemon cancelled it


class Bridge:
    def __init__(self, socket: Path, autostart: bool, editor_in: asyncio.StreamReader,
                 editor_out: asyncio.StreamWriter) -> None:
        self._in = editor_in
        self._out = editor_out
        self.docs = Documents()
        self.encoding = "utf-16"  # the editor's, once `initialize` negotiated it
        self.daemon = Upstream(socket, autostart, self._from_daemon, self._lost, self._back, self._gone)
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self._tokens: set[Any] = set()  # progress tokens the editor was asked to create
        self._progress = False  # the editor takes window/workDoneProgress/create
        self.view = View()  # what the editor's `$/setConfig` asked for
        self._server_encoding = "utf-8"  # of a server the daemon reported (a document's own wins)
        # While re-attaching (the daemon went): the editor's requests waiting for the next daemon,
        # None when attached (or never was); `_gap_timer` answers them if it does not come in time.
        self._waiting: list[tuple[Any, str, Any]] | None = None
        self._gap_timer: asyncio.Task | None = None

    async def run(self) -> None:
        """Serve the editor until it exits or closes its output."""
        try:
            while (message := await stdio.read_message(self._in)) is not None:
                if message.get("method") == "exit":
                    return
                await self._from_editor(message)
        finally:
            await self.daemon.close()

    # -- to the editor -----------------------------------------------------------

    async def _send(self, message: dict[str, Any]) -> None:
        self._out.write(stdio.frame({"jsonrpc": "2.0", **message}))
        await self._out.drain()

    async def _show(self, kind: int, text: str) -> None:
        await self._send({"method": "window/showMessage", "params": {"type": kind, "message": text}})

    async def _log(self, kind: int, text: str) -> None:
        await self._send({"method": "window/logMessage", "params": {"type": kind, "message": text}})

    async def _error(self, editor_id: Any, code: int, text: str) -> None:
        await self._send({"id": editor_id, "error": {"code": code, "message": text}})

    # -- from the editor -----------------------------------------------------------

    async def _from_editor(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            return  # an answer to our window/workDoneProgress/create: nothing waits for it
        params = message.get("params")
        if "id" in message:
            await self._request(message["id"], method, params)
        else:
            await self._notification(method, params if isinstance(params, dict) else {})

    async def _request(self, editor_id: Any, method: str, params: Any) -> None:
        match method:
            case "initialize":
                await self._send({"id": editor_id, "result": await self._initialize(params or {})})
            case "shutdown":
                await self._send({"id": editor_id, "result": None})
            case "$/setConfig":
                if unapplied := self.view.configure(params or {}):
                    await self._send({"method": "window/logMessage", "params": {"type": 4, "message": unapplied}})
                await self._send({"id": editor_id, "result": None})
            case _:
                await self._forward(editor_id, method, params)

    async def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        caps = params.get("capabilities") or {}
        offered = (caps.get("general") or {}).get("positionEncodings") or []
        self.encoding = "utf-8" if "utf-8" in offered else "utf-16"
        self._progress = bool((caps.get("window") or {}).get("workDoneProgress"))
        self.daemon.editor = str((params.get("clientInfo") or {}).get("name") or "editor")
        result = RECORDED_INITIALIZE
        try:
            running = await self.daemon.connect()
        except HolsrvError as err:
            await self._show(ERROR, f"holctl lsp: {err.code}: {err}")
        else:
            if running:
                result = msgspec.json.decode(running)
            elif known := self.daemon.server_info():
                # No server yet: HOL's serverInfo fields as the daemon knows them.
                result = {**RECORDED_INITIALIZE, "serverInfo": msgspec.json.decode(known)}
        capabilities = dict(result.get("capabilities") or {})
        self._server_encoding = str(capabilities.get("positionEncoding", "utf-8"))
        capabilities["positionEncoding"] = self.encoding
        return {"capabilities": capabilities, "serverInfo": result.get("serverInfo") or {"name": "HOL4"}}

    async def _notification(self, method: str, params: dict[str, Any]) -> None:
        document = params.get("textDocument") or {}
        uri = str(document.get("uri", ""))
        match method:
            case "textDocument/didOpen":
                doc = self.docs.open(uri, str(document.get("text", "")), _version(document))
                await self._push(doc, e.EditorOpen(uri, doc.text, doc.version))
            case "textDocument/didChange":
                doc_ = self.docs.get(uri)
                if doc_ is not None:
                    doc_.apply(params.get("contentChanges") or [], self.encoding)
                    doc_.version = _version(document)
                    if self.view.sends_changes:
                        await self._push(doc_, e.EditorChange(uri, doc_.text, doc_.version))
            case "textDocument/didSave":
                doc_ = self.docs.get(uri)
                if doc_ is not None and self._waiting is None:
                    if doc_.sent != doc_.text:
                        await self._push(doc_, e.EditorChange(uri, doc_.text, doc_.version))
                    await self.daemon.send(e.EditorSave(uri))
            case "textDocument/didClose":
                if self.docs.close(uri) is not None and self._waiting is None:
                    await self.daemon.send(e.EditorClose(uri))
            case "$/cancelRequest":
                ours = next((i for i, p in self._pending.items() if p.editor_id == params.get("id")), None)
                if ours is not None:
                    self._pending[ours].cancelled = True
                    await self.daemon.send(e.EditorCancel(ours))
                elif self._waiting and (held := [w for w in self._waiting if w[0] == params.get("id")]):
                    self._waiting.remove(held[0])  # never sent: answered here, as LSP asks of a cancel
                    await self._error(held[0][0], REQUEST_CANCELLED, "cancelled")
            case "$/hol/retryCompile":
                retry = e.EditorCall(next(self._ids), method, self._to_server(params, uri), uri, notify=True)
                await self.daemon.send(retry)
            case _:
                pass  # initialized, and what HOL would drop too

    async def _push(self, doc: Document, frame: e.EditorOpen | e.EditorChange, *, reopening: bool = False) -> None:
        if self._waiting is not None and not reopening:
            return  # re-attaching: `_back` sends the document's text as it is then
        doc.sent = frame.text
        await self.daemon.send(frame)

    async def _forward(self, editor_id: Any, method: str, params: Any, *, again: bool = False) -> None:
        if self._waiting is not None:
            if len(self._waiting) < MAX_WAITING and self._gap_timer is not None:
                self._waiting.append((editor_id, method, params))  # asked once the bridge is attached again
            else:
                await self._error(editor_id, CONTENT_MODIFIED, "the holsrv daemon restarted and holctl lsp is not "
                                                               "attached to the next one yet; ask again")
            return
        if not self.daemon.connected:
            await self._error(editor_id, CONTENT_MODIFIED, "holctl lsp is not connected to the holsrv daemon; "
                                                           "ask again")
            return
        params = params if isinstance(params, dict) else {}
        uri = str((params.get("textDocument") or {}).get("uri") or params.get("uri") or "")
        ours = next(self._ids)
        self._pending[ours] = _Pending(editor_id, uri, method, params, again=again)
        await self.daemon.send(e.EditorCall(ours, method, self._to_server(params, uri), uri))

    def _to_server(self, params: Any, uri: str) -> bytes:
        """`params` as the server reads them: its URIs and its position encoding."""
        converted = convert(params, uri, self.docs.lines, self.encoding, self._encoding_of(uri))
        return msgspec.json.encode(_uris(converted, self.docs.to_server))

    def _encoding_of(self, uri: str) -> str:
        doc = self.docs.get(uri) or self.docs.by_server_uri(uri)
        return doc.encoding if doc is not None and doc.encoding else self._server_encoding

    # -- the daemon ------------------------------------------------------------------

    async def _from_daemon(self, frame: e.EditorEvent | ErrorReply) -> None:
        match frame:
            case e.EditorNote():
                await self._note(frame)
            case e.EditorAnswer():
                await self._answer(frame)
            case e.EditorDocument():
                doc = self.docs.get(frame.uri)
                if frame.code:
                    await self._show(ERROR, f"holsrv: {frame.uri.rsplit('/', 1)[-1]}: {frame.code}: {frame.message}")
                elif doc is not None:
                    doc.server_uri, doc.encoding = frame.server_uri or frame.uri, frame.encoding
            case ErrorReply() if frame.code in GOING:
                await self._log(INFO, f"holsrv: {frame.code}: {frame.message}")  # it re-attaches when it goes
            case ErrorReply():
                await self._show(ERROR, f"holsrv: {frame.code}: {frame.message}")
            case _:
                pass

    async def _note(self, note: e.EditorNote) -> None:
        if not self.view.shows(note.method):
            return
        params = msgspec.json.decode(note.params)
        params = _uris(convert(params, note.uri, self.docs.lines, self._encoding_of(note.uri), self.encoding),
                       self.docs.to_editor)
        if note.method == "$/progress":
            if not self._progress:
                return  # the editor takes no progress it did not ask for
            token = (params or {}).get("token")
            if token not in self._tokens:
                self._tokens.add(token)
                await self._send({"id": f"holctl-{next(self._ids)}", "method": "window/workDoneProgress/create",
                                  "params": {"token": token}})
        await self._send({"method": note.method, "params": params})

    async def _answer(self, answer: e.EditorAnswer) -> None:
        pending = self._pending.pop(answer.id, None)
        if pending is None:
            return
        if answer.error_code == REQUEST_CANCELLED and not (pending.cancelled or pending.again) \
                and pending.method not in ACTING:
            # The daemon cancelled a question the editor did not: it is going away (a restart, a
            # shutdown), and closes the channel next.  Asked once more: of this daemon if it stays,
            # else (still pending when the channel closes) of the next one, after re-attaching.
            await self._forward(pending.editor_id, pending.method, pending.params, again=True)
            return
        if answer.error_code:
            await self._error(pending.editor_id, answer.error_code, answer.error_message)
            return
        result = msgspec.json.decode(answer.result)
        result = _uris(convert(result, pending.uri, self.docs.lines, self._encoding_of(pending.uri), self.encoding),
                       self.docs.to_editor)
        await self._send({"id": pending.editor_id, "result": result})

    async def _lost(self) -> None:
        """The daemon went (it restarted or stopped): hold the editor's requests until the next one.

        The questions in flight are asked again once re-attached; an `$/eval` in flight is answered
        "ask again" (it may have run).  A line in the editor's log, not a dialog: a restart is routine.
        """
        self._waiting = []
        self._gap_timer = asyncio.create_task(self._expire(), name="gap")
        pending, self._pending = self._pending, {}
        for call in pending.values():
            if call.method in ACTING:
                await self._error(call.editor_id, CONTENT_MODIFIED, "the holsrv daemon restarted during this call, "
                                                                    "which may or may not have run; ask again")
            else:
                self._waiting.append((call.editor_id, call.method, call.params))
        count = len(self.docs.by_uri)
        await self._log(WARNING, f"holsrv: the daemon went away (restarted or stopped); re-attaching and "
                                 f"re-opening {count} document{'s' * (count != 1)}")

    async def _back(self) -> None:
        """Attached to a daemon again: open the editor's documents there with their text and version now,
        then ask what waited."""
        self._tokens.clear()
        for doc in list(self.docs.by_uri.values()):
            await self._push(doc, e.EditorOpen(doc.uri, doc.text, doc.version), reopening=True)
        # Edits that came while the documents were being opened: their text goes too.
        while changed := [d for d in self.docs.by_uri.values() if d.sent != d.text]:
            for doc in changed:
                await self._push(doc, e.EditorChange(doc.uri, doc.text, doc.version), reopening=True)
        waiting = self._end_gap()
        count = len(self.docs.by_uri)
        await self._log(INFO, f"holsrv: re-attached to the daemon; {count} document{'s' * (count != 1)} "
                              f"re-opened")
        for editor_id, method, params in waiting:
            await self._forward(editor_id, method, params)

    async def _expire(self) -> None:
        await asyncio.sleep(GAP_WAIT_S)  # the bound on the gap (nothing to wait on but the daemon not coming)
        self._gap_timer = None
        await self._gave_up(f"did not come back within {GAP_WAIT_S:g}s")

    async def _gone(self) -> None:
        """No daemon came back (Upstream gave up): what waited is answered "ask again"."""
        await self._gave_up("could not be reached again")

    async def _gave_up(self, why: str) -> None:
        """The requests waiting for the next daemon are answered; later ones too, until it comes."""
        self._stop_timer()
        waiting, self._waiting = (self._waiting or []), ([] if self._waiting is not None else None)
        for editor_id, _method, _params in waiting:
            await self._error(editor_id, CONTENT_MODIFIED, f"the holsrv daemon restarted and {why}; ask again")

    def _end_gap(self) -> list[tuple[Any, str, Any]]:
        self._stop_timer()
        waiting, self._waiting = self._waiting or [], None
        return waiting

    def _stop_timer(self) -> None:
        if self._gap_timer is not None and self._gap_timer is not asyncio.current_task():
            self._gap_timer.cancel()
        self._gap_timer = None


def _version(document: dict[str, Any]) -> int | None:
    """The editor's version of a document (LSP's `textDocument.version`), None if it named none:
    the daemon tells the editor this number for diagnostics of that text, and no other."""
    version = document.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and -2**31 <= version < 2**31:
        return version  # LSP's integer
    return None


def _uris(value: Any, mapping: Any) -> Any:
    """`value` with every `uri`/`targetUri` string mapped (the server's and the editor's names of a file)."""
    if isinstance(value, list):
        return [_uris(x, mapping) for x in value]
    if isinstance(value, dict):
        return {k: mapping(v) if k in ("uri", "targetUri") and isinstance(v, str) else _uris(v, mapping)
                for k, v in value.items()}
    return value
