"""One editor's channel (`holctl lsp`): its documents on the daemon's servers, its requests, HOL's notes back.

After `EditorAttach` a connection carries `holsrv.rpc.editor` frames both
ways until it closes.  Each document the editor opens holds its file's
server for as long as it is open (as `hol lsp` would live for it): a hold,
not a call waiting (`holds`), which follows a planned replacement (an
ancestor rebuilt) to the new server at its switch, the new server's
diagnostics and proof states sent at once.  Its buffer is what the server
checks (`Buffers`); only the newest text is synced, so a burst of keystrokes costs one sync.  Requests
run concurrently, each after the document's text is in its server.  The
server's notifications go to the editor through a bounded `Outbox`, each
`version` in them the editor's own (`editorversions`).  An
editor that goes away releases everything it held, and each of its files
gets the disk's text back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import urllib.parse
from pathlib import Path
from typing import Any

import msgspec

from holsrv.answers.common import Context
from holsrv.disk import files
from holsrv.errors import BadRequest, EditorUnsaved, FrameError, HolsrvError, LspError, Starting, TrialRunning
from holsrv.lsp import replies
from holsrv.rpc import editor as e
from holsrv.rpc import framing
from holsrv.rpc import messages as m
from holsrv.serve.connection import Connection
from holsrv.serve.editorversions import EditorVersions
from holsrv.server.fanout import PROGRESS, Outbox
from holsrv.server.session import Session
from holsrv.text import stepping
from holsrv.verdict.filestate import Phase

log = logging.getLogger(__name__)

_inbound = msgspec.msgpack.Decoder(e.EditorInbound)
_json = msgspec.json.Encoder()
# JSON-RPC's codes for what the channel itself answers.
INTERNAL_ERROR, REQUEST_CANCELLED = -32603, -32800
# How long closing a document may take to give its server the disk's text back.
RESTORE_S = 10.0


async def serve(ctx: Context, conn: Connection, client: str, request: m.EditorAttach) -> None:
    """Serve the editor that attached on `conn` until it goes (see `Connection.converse`)."""
    await EditorChannel(conn, ctx, request.editor or client).run()


class EditorChannel:
    """One attached editor: its documents by the editor's URI, its calls by the editor's id."""

    def __init__(self, conn: Connection, ctx: Context, name: str) -> None:
        self.conn = conn
        self.ctx = ctx
        self.name = name
        self.client = f"editor {name}"  # as status lists it among a server's clients
        self.outbox: Outbox[e.EditorEvent] = Outbox(e.OUTBOX_FRAMES)
        self.docs: dict[str, _Document] = {}
        self._calls: dict[int, asyncio.Task] = {}

    async def run(self) -> None:
        """Serve the editor until it closes the connection (or breaks the framing)."""
        self.ctx.editors.attach(self, self.name, lambda: self.outbox.dropped)
        writer = asyncio.create_task(self._write(), name=f"editor-out-{self.name}")
        log.info("editor %s attached", self.name)
        try:
            self.outbox.put(e.EditorAttached(initialize=self._initialize(), daemon_pid=os.getpid(),
                                             server_info=self._server_info()))
            await self._read(writer)
        finally:
            for task in self._calls.values():
                task.cancel()
            docs, self.docs = list(self.docs.values()), {}
            for doc in docs:
                doc.close()
            await asyncio.gather(*(doc.task for doc in docs), return_exceptions=True)
            writer.cancel()
            await asyncio.gather(writer, *self._calls.values(), return_exceptions=True)
            self.ctx.editors.detach(self)
            log.info("editor %s detached: its %d documents released", self.name, len(docs))

    def push(self, frame: e.EditorEvent, droppable: bool = False) -> None:
        self.outbox.put(frame, droppable)

    def _initialize(self) -> bytes:
        """The `initialize` result a running server got, for the editor's own (b"" if none runs)."""
        for session in self.ctx.pool.live():
            if session.lsp is not None and session.lsp.capabilities:
                return _json.encode({"capabilities": session.lsp.capabilities, "serverInfo": session.lsp.server_info})
        return b""

    def _server_info(self) -> bytes:
        """HOL's `serverInfo` for an editor that attaches while no server runs (b"" when no HOL
        is found): the last server's, which a stopped session keeps, else the configured
        HOL's tree, with the fields only a running server can fill `"unknown"`, as HOL
        itself writes them for a build it cannot name (docs/protocol.md#initialize-result)."""
        for session in reversed(self.ctx.pool.sessions.values()):
            if session.lsp is not None and session.lsp.server_info:
                return _json.encode(session.lsp.server_info)
        try:
            hol = self.ctx.settings.hol_command()
        except HolsrvError:
            return b""
        tree = Path(os.path.realpath(hol)).parent.parent
        holdir = os.environ.get("HOLDIR") or (str(tree) if (tree / "sigobj").is_dir() else "")
        return _json.encode({"name": "HOL4", "version": "unknown", "builtFrom": "unknown", "sources": "unknown",
                             "holdir": holdir})

    async def _write(self) -> None:
        while True:
            await self.conn.send(await self.outbox.get())  # type: ignore[arg-type]

    async def _read(self, writer: asyncio.Task) -> None:
        while True:
            reading = asyncio.ensure_future(
                framing.read_body(self.conn.reader, self.conn.settings.frame_timeout_s, self.conn.frames))
            await asyncio.wait({reading, writer}, return_when=asyncio.FIRST_COMPLETED)
            if not reading.done():  # the editor stopped taking frames (`Unresponsive`)
                reading.cancel()
                writer.result()
                return
            try:
                body = reading.result()
            except FrameError as err:
                self.conn.warn("dropped editor %s: %s", self.name, err)
                return
            if body is None:
                return
            try:
                frame = framing.decode(_inbound, body)
            except FrameError as err:
                self.conn.warn("editor %s sent a frame the daemon cannot read: %s", self.name, err)
                continue
            self._take(frame)

    def _take(self, frame: e.EditorFrame) -> None:
        match frame:
            case e.EditorOpen(uri, text, version) | e.EditorChange(uri, text, version):
                self._text(uri, text, version)
            case e.EditorSave():
                pass  # the disk now has what the buffer has: answers see they agree
            case e.EditorClose(uri):
                doc = self.docs.pop(uri, None)
                if doc is not None:
                    doc.close()
            case e.EditorCall():
                task = asyncio.create_task(self._call(frame), name=f"editor-call-{frame.id}")
                self._calls[frame.id] = task
                task.add_done_callback(lambda _: self._calls.pop(frame.id, None))
            case e.EditorCancel(call_id):
                running = self._calls.get(call_id)
                if running is not None:
                    running.cancel()
            case _:
                log.warning("editor %s sent an unknown frame %r", self.name, frame)

    def _text(self, uri: str, text: str, version: int | None) -> None:
        doc = self.docs.get(uri)
        if doc is None:
            try:
                # Editors percent-encode their URIs; HOL takes a URI's path as it is
                # (docs/protocol.md#documents-and-uris).
                path = files.resolve(urllib.parse.unquote(replies.path_of(uri)))
                if path.suffix not in files.SCRIPT_SUFFIXES:
                    raise BadRequest(f"{path.name} is not a HOL script: holctl lsp serves SML files "
                                     f"({', '.join(files.SCRIPT_SUFFIXES)}), usually fooScript.sml")
            except HolsrvError as err:
                self.push(e.EditorDocument(uri, code=err.code, message=str(err)))
                return
            doc = self.docs[uri] = _Document(self, uri, path)
        doc.edited(text, version)

    async def _call(self, call: e.EditorCall) -> None:
        try:
            doc = self.docs.get(call.uri) if call.uri else next(iter(self.docs.values()), None)
            if doc is None:
                raise HolsrvError(f"{call.uri or 'no document'} is not open in this editor")
            if call.notify:
                await doc.notify(call.method, msgspec.json.decode(call.params))
                return
            result = await doc.request(call.method, msgspec.json.decode(call.params))
            self.push(e.EditorAnswer(call.id, _json.encode(result)))
        except asyncio.CancelledError:
            self.push(e.EditorAnswer(call.id, error_code=REQUEST_CANCELLED, error_message="cancelled"))
            raise
        except LspError as err:
            self.push(e.EditorAnswer(call.id, error_code=err.rpc_code or INTERNAL_ERROR, error_message=str(err)))
        except (HolsrvError, msgspec.DecodeError) as err:
            self.push(e.EditorAnswer(call.id, error_code=INTERNAL_ERROR, error_message=str(err)))
        except TimeoutError:
            self.push(e.EditorAnswer(call.id, error_code=INTERNAL_ERROR, error_message=(
                f"{call.uri} has no HOL server yet (see the message the editor was shown); ask again")))


class _Document:
    """One open document: the newest text of its buffer, synced to its file's server by one task."""

    def __init__(self, channel: EditorChannel, uri: str, path: Path) -> None:
        self.channel = channel
        self.ctx = channel.ctx
        self.uri = uri
        self.path = path
        self.buffer: files.Script | None = None
        self.session: Session | None = None  # set while its text is in the server
        self._closed = False
        self._wake = asyncio.Event()  # a new text, or closing
        self._synced = asyncio.Event()  # `session` has the newest text
        self._moved = False  # a replacement switched the file to a new server: take it
        self._noticed: bytes | None = None  # the text whose compile was last reported to the pool
        self.versions = EditorVersions()  # the editor's version of each of its texts, for HOL's notes
        self.task = asyncio.create_task(self._run(), name=f"editor-doc-{path.name}")

    def edited(self, text: str, version: int | None = None) -> None:
        data = text.encode("utf-8", errors="surrogatepass")
        self.buffer = files.Script(self.path, data, text, files.content_hash(data))
        self.versions.had(self.buffer.hash, version)
        try:
            # At once, before the sync: an agent's call from now on is about this text.
            self.ctx.editors.hold(self.channel, self, self.channel.name, self.buffer)
        except EditorUnsaved as err:
            self.channel.push(e.EditorDocument(self.uri, code=err.code, message=str(err)))
            self.close()
            return
        self._synced.clear()
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    async def request(self, method: str, params: object) -> object:
        """Ask the document's server, once it has the buffer's newest text."""
        settings = self.ctx.settings
        async with asyncio.timeout(settings.start_timeout_s):
            await self._synced.wait()
        # A call, counted as one while it runs: a replacement's switch stops the old server only after it.
        async with self.ctx.pool.lease(self.path, self.channel.client) as lease:
            session = lease.session  # the document's, or the one that has just replaced it (with the buffer)
            async with session.trials.use(settings.trial_wait_s, self.path.name):
                return await session.request(method, params, settings.request_timeout_s)  # type: ignore[arg-type]

    async def notify(self, method: str, params: object) -> None:
        """Tell the document's server, once it has the buffer's newest text."""
        async with asyncio.timeout(self.ctx.settings.start_timeout_s):
            await self._synced.wait()
        assert self.session is not None
        await self.session.notify(method, params)  # type: ignore[arg-type]

    async def _run(self) -> None:
        try:
            while not self._closed:
                try:
                    async with self.ctx.pool.lease(self.path, self.channel.client, moved=self._switched) as lease:
                        await self._serve(lease.session)
                except HolsrvError as err:
                    self.session = None
                    if self._closed:
                        break
                    if self._moved:
                        continue  # the old server was stopped under a sync: the new one is there
                    log.info("editor %s: %s has no server: %s", self.channel.name, self.path.name, err)
                    self.channel.push(e.EditorDocument(self.uri, code=err.code, message=str(err)))
                    self._wake.clear()
                    await self._wait_edit()  # the next edit tries again
        finally:
            self.session = None
            if self.ctx.editors.release(self, self.path):
                await self._give_back_disk()

    def _switched(self, new: Session) -> None:
        """A replacement made `new` the file's server (at once, in its switch): let the old one go."""
        self._moved = True
        self.session = None
        self._synced.clear()  # a request waits for the new server
        self._wake.set()

    async def _serve(self, session: Session) -> None:
        """Keep `session` on the buffer's newest text until the document closes, the server goes,
        or a replacement switches the file to a new one."""
        followed, self._moved, self._noticed = self._moved, False, None
        if not await session.wait_started(self.ctx.settings.start_timeout_s):
            raise Starting(f"the HOL server for {self.path.name} did not start within the start timeout")
        unsubscribe = session.fanout.subscribe(lambda method, params: self._note(session, method, params))
        # Before the sync: HOL's notes about the text name the file as the server does.
        self.channel.push(e.EditorDocument(self.uri, session.encoding, server_uri=session.uri))
        if followed:  # it caught up on the buffer already: its word on it, in place of the old server's
            await self._caught_up(session)
        told = followed
        try:
            while not self._closed and not self._moved:
                self._wake.clear()
                buffer = self.buffer
                if buffer is not None and session.data != buffer.data:
                    await self._sync(session, buffer)
                elif buffer is not None and not told and session.file.publishes:
                    # The server has this text already (one adopted across a daemon restart): its word
                    # on it, which no sync will make it say again.
                    await self._caught_up(session)
                told = told or buffer is not None
                if self._moved:
                    return
                self.session = session
                if self.buffer is buffer:
                    self._synced.set()
                    await self._wait_edit(session)
        finally:
            unsubscribe()

    async def _caught_up(self, session: Session) -> None:
        """What `session` said while it caught up, before the editor followed it: its diagnostics,
        and each proof's state as one `$/proofStates` batch per slice (a transition for each, as
        HOL re-announces proofs, so an editor keying them by name ends with the new server's)."""
        said = session.file.diagnostics_version  # HOL's version, made the editor's by `_note`
        self._note(session, "textDocument/publishDiagnostics", {
            "uri": session.uri, **({"version": said} if said is not None else {}),
            "diagnostics": list(session.file.diagnostics)})
        for some in stepping.chunks(list(session.file.proofs.values())):
            states = [{"pos": {"line": p.line0, "character": 0}, "name": p.name, "status": p.status,
                       **({"detail": p.detail} if p.detail else {})} for p in some]
            self._note(session, "$/proofStates", {"uri": session.uri, "states": states})
            await asyncio.sleep(0)  # a 30,000-proof file: other clients are answered between slices

    async def _sync(self, session: Session, buffer: files.Script) -> None:
        """Give `session` the buffer's text, after any trial on it (each of whose waits is bounded)."""
        while True:
            with contextlib.suppress(TrialRunning):
                async with session.trials.use(self.ctx.settings.try_timeout_s, self.path.name):
                    await asyncio.shield(session.sync(buffer.data, buffer.text, buffer.hash))
                    await self.ctx.pool.synced(session, buffer)  # as a call's: a successor under way gets it too
                    return

    async def _wait_edit(self, session: Session | None = None) -> None:
        """Until the next edit or the close; raises if `session`'s server goes meanwhile."""
        while not self._wake.is_set():
            waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(self._wake.wait())]
            if session is not None:
                waits.append(asyncio.ensure_future(session.wait_change(self.ctx.settings.request_timeout_s)))
            try:
                await asyncio.wait(waits, timeout=self.ctx.settings.request_timeout_s,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
                await asyncio.gather(*waits, return_exceptions=True)
            if session is not None and not self._moved:
                session.check_alive()
                if session.phase == Phase.COMPLETED and self._noticed != session.data and self.buffer is not None:
                    # Once per text, as a call's answer does: what the server loaded, so a rebuilt
                    # ancestor is noticed (and the server replaced) with no agent asking.
                    self._noticed = session.data
                    await self.ctx.pool.synced(session, self.buffer)

    def _note(self, session: Session, method: str, params: object) -> None:
        if session.trials.trial:
            return  # a trial's candidates are not the editor's text
        # HOL's version is the daemon's count on a shared server: the editor is told its own (or none).
        params = self.versions.relabel(params, session.digest_of)
        self.channel.push(e.EditorNote(method, _json.encode(params), self.uri), droppable=method in PROGRESS)

    async def _give_back_disk(self) -> None:
        """The editor let go: the disk is the truth again, so the server gets the disk's text,
        as a write to the file would give it (`ScriptWatch.sync_disk`).  Not while the daemon restarts
        in place (`Pool.handing_over`): the server keeps the editor's text across it, so the editor that
        attaches again syncs no change, and a call that comes first syncs the disk's."""
        if self.ctx.pool.handing_over:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RESTORE_S):
                await self.ctx.pool.scriptwatch.sync_disk(self.path)
