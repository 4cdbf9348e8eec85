"""The bridge's side toward the daemon: one attached connection at a time, and a new one when it goes.

When the daemon goes away (stopped, restarted) the editor is told, the
requests it was waiting for are answered with an error to ask again, and
`Upstream` connects again (starting a daemon if allowed), with pauses
between its bounded attempts; the bridge then opens its documents anew.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from holctl.lsp import link
from holsrv.errors import HolsrvError
from holsrv.rpc import editor as e
from holsrv.rpc.messages import ErrorReply

# Reconnecting after the daemon went: attempts, and the pause between them (growing to the cap).
RECONNECT_TRIES = 30
RECONNECT_PAUSE_S, RECONNECT_PAUSE_MAX_S = 0.2, 5.0

OnFrame = Callable[[e.EditorEvent | ErrorReply], Awaitable[None]]


class Upstream:
    """The daemon, as one editor's bridge reaches it: `on_frame` gets each of its frames;
    `on_lost` is awaited when it went, `on_back` once connected again, `on_gone` if it never is."""

    def __init__(self, socket: Path, autostart: bool, on_frame: OnFrame, on_lost: Callable[[], Awaitable[None]],
                 on_back: Callable[[], Awaitable[None]], on_gone: Callable[[], Awaitable[None]]) -> None:
        self.socket = socket
        self.autostart = autostart
        self.editor = "editor"
        self.link: link.Link | None = None
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._on_back = on_back
        self._on_gone = on_gone
        self._listening: asyncio.Task | None = None

    @property
    def connected(self) -> bool:
        return self.link is not None

    async def connect(self) -> bytes:
        """Attach to the daemon; the `initialize` result of a server it runs (b"" if none)."""
        self.link = await link.connect(self.socket, self.editor, self.autostart)
        self._listening = asyncio.create_task(self._listen(self.link), name="daemon")
        return self.link.attached.initialize

    def server_info(self) -> bytes:
        """HOL's serverInfo as the daemon knew it when this link attached (b"" if it did not say)."""
        return self.link.attached.server_info if self.link is not None else b""

    async def send(self, frame: e.EditorFrame) -> None:
        """Send `frame`; lost while no daemon is connected (reconnecting re-opens the documents)."""
        if self.link is not None:
            try:
                await self.link.send(frame)
            except OSError:
                pass  # the listener sees the connection end and reconnects

    async def close(self) -> None:
        if self._listening is not None:
            self._listening.cancel()
            await asyncio.gather(self._listening, return_exceptions=True)
        if self.link is not None:
            self.link.close()

    async def _listen(self, conn: link.Link) -> None:
        while (frame := await conn.receive()) is not None:
            await self._on_frame(frame)
        conn.close()
        if self.link is conn:
            self.link = None
            await self._on_lost()
            await self._reconnect()

    async def _reconnect(self) -> None:
        pause = RECONNECT_PAUSE_S
        for _ in range(RECONNECT_TRIES):
            try:
                self.link = await link.connect(self.socket, self.editor, self.autostart)
            except (HolsrvError, OSError):
                await asyncio.sleep(pause)  # a pause between attempts, not a synchronisation
                pause = min(pause * 2, RECONNECT_PAUSE_MAX_S)
                continue
            self._listening = asyncio.create_task(self._listen(self.link), name="daemon")
            await self._on_back()
            return
        await self._on_gone()
        await self._on_frame(ErrorReply("daemon_unreachable", (
            f"could not reconnect to the daemon on {self.socket} after {RECONNECT_TRIES} attempts; "
            "restart the editor's language server")))
