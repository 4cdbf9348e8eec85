"""`holctl lsp`'s connection to the daemon: hello, `EditorAttach`, then editor frames both ways.

A daemon is started if none runs (as every holctl call does); the
connection lives as long as the editor, and when the daemon goes (a
restart) the bridge opens a new one (`connect` again).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import msgspec

from holsrv.errors import DaemonUnreachable, FrameError
from holsrv.rpc import autostart, calls, framing
from holsrv.rpc import editor as e
from holsrv.rpc.messages import EditorAttach, ErrorReply

_outbound = msgspec.msgpack.Decoder(e.EditorOutbound)


class Link:
    """One attached connection to the daemon."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, attached: e.EditorAttached):
        self.reader = reader
        self.writer = writer
        self.attached = attached

    async def send(self, frame: e.EditorFrame) -> None:
        self.writer.write(framing.encode(frame))
        await self.writer.drain()

    async def receive(self) -> e.EditorEvent | ErrorReply | None:
        """The daemon's next frame; None when it closed the connection (it stopped or restarted)."""
        try:
            body = await framing.read_body(self.reader)
        except (OSError, FrameError):
            return None
        return None if body is None else framing.decode(_outbound, body)

    def close(self) -> None:
        self.writer.close()


async def connect(socket: Path, editor: str, autostart_daemon: bool) -> Link:
    """A connection to the daemon on `socket`, attached as `editor`'s channel; DaemonUnreachable if none."""
    try:
        return await _attach(socket, editor)
    except (FileNotFoundError, ConnectionRefusedError):
        if not autostart_daemon:
            raise autostart.not_listening(socket) from None
    await asyncio.to_thread(autostart.start_daemon, socket)
    try:
        return await _attach(socket, editor)
    except OSError as err:
        raise DaemonUnreachable(f"started a daemon but cannot reach it on {socket}: {err}") from None


async def _attach(socket: Path, editor: str) -> Link:
    async with asyncio.timeout(autostart.CONNECT_TIMEOUT_S):
        reader, writer = await asyncio.open_unix_connection(str(socket), limit=framing.MAX_FRAME)
    try:
        async with asyncio.timeout(autostart.CONNECT_TIMEOUT_S * 3):
            # In one write: a daemon that refuses us (another user) reads once, says why in a
            # frame and closes; a second write landing after that would reset the connection.
            writer.write(framing.encode(calls.hello("holctl lsp")) + framing.encode(EditorAttach(editor=editor)))
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            welcome = await framing.read_body(reader)
            if welcome is None:
                raise DaemonUnreachable("the daemon closed the connection during the handshake")
            calls.welcomed(framing.decode(framing.reply_decoder, welcome))
            body = await framing.read_body(reader)
        if body is None:
            raise DaemonUnreachable("the daemon closed the connection before the editor's channel opened")
        first = framing.decode(_outbound, body)
        if isinstance(first, ErrorReply):
            raise DaemonUnreachable(f"{first.code}: {first.message}")
        if not isinstance(first, e.EditorAttached):
            raise DaemonUnreachable(f"the daemon answered editorAttach with {type(first).__name__}")
        return Link(reader, writer, first)
    except (OSError, FrameError) as err:
        writer.close()
        raise DaemonUnreachable(f"the daemon did not open the editor's channel: {err or 'timed out'}") from None
    except BaseException:
        writer.close()
        raise
