"""`holctl lsp`'s connection to the daemon: hello, `EditorAttach`, then editor frames both ways.

Connecting, starting a daemon if none runs (as every holctl call does) and
the hello are `holsrv.rpc.connecting`'s, as for the other clients; the
connection lives as long as the editor, and when the daemon goes (a
restart) the bridge opens a new one (`connect` again).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from holsrv.errors import DaemonUnreachable, FrameError
from holsrv.rpc import aconnecting, autostart, framing
from holsrv.rpc import editor as e
from holsrv.rpc.messages import EditorAttach, ErrorReply

_outbound = msgspec.msgpack.Decoder(e.EditorOutbound)
# The hello's welcome, then the channel's first frame, each within this.
ATTACH_TIMEOUT_S = autostart.CONNECT_TIMEOUT_S * 3


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
    reader, writer, _ = await aconnecting.open_async(
        socket, "holctl lsp", None, autostart_daemon=autostart_daemon, then=EditorAttach(editor=editor),
        hello_timeout=ATTACH_TIMEOUT_S)
    try:
        async with asyncio.timeout(ATTACH_TIMEOUT_S):
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
