"""Run the bridge on stdin/stdout until the editor exits."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

from holctl.lsp.bridge import Bridge
from holsrv.rpc import paths


def run(socket: Path | None, autostart: bool) -> None:
    # stdout is the editor's: anything we have to say goes to stderr (the editor's log).
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="holctl lsp: %(message)s")
    asyncio.run(_serve(socket or paths.default_socket(), autostart))


async def _serve(socket: Path, autostart: bool) -> None:
    from holctl.lsp import stdio

    reader, writer = await stdio.streams()
    await Bridge(socket, autostart, reader, writer).run()
