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
    from holctl.lsp import stdio

    try:
        asyncio.run(_serve(socket or paths.default_socket(), autostart))
    except stdio.BrokenStream as err:
        # What the editor wrote cannot be read as LSP: say so in its log, not with a traceback.
        logging.getLogger(__name__).error("%s; stopping (restart the language server from the editor)", err)
        sys.exit(1)


async def _serve(socket: Path, autostart: bool) -> None:
    from holctl.lsp import stdio

    reader, writer = await stdio.streams()
    await Bridge(socket, autostart, reader, writer).run()
