"""The floor for a round trip: the daemon's framing and event loop, nothing behind them.

Listens on a Unix socket under uvloop, as the daemon does, and reads each
frame with the daemon's own reader.  The first frame of a connection (the
hello) gets a `Welcome`; every later one gets the prebuilt reply frame in
REPLY_FILE (the daemon's own reply to the request being compared, captured by
the benchmark), so the same client, decoding included, talks to both.

    python bench/echo.py SOCKET REPLY_FILE --ready-fd FD
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

import uvloop

from holsrv import __version__
from holsrv.rpc import framing
from holsrv.rpc import messages as m


async def serve(socket: Path, reply: bytes, ready_fd: int | None) -> None:
    welcome = framing.encode(m.Welcome(m.PROTOCOL_VERSION, __version__, os.getpid()))

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answer = welcome
        try:
            while await framing.read_body(reader) is not None:
                writer.write(answer)
                await writer.drain()
                answer = reply
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_unix_server(connection, path=str(socket), limit=framing.MAX_FRAME)
    if ready_fd is not None:
        os.write(ready_fd, b"ready\n")
        os.close(ready_fd)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("socket", type=Path)
    parser.add_argument("reply_file", type=Path)
    parser.add_argument("--ready-fd", type=int)
    args = parser.parse_args()
    uvloop.run(serve(args.socket, args.reply_file.read_bytes(), args.ready_fd))


if __name__ == "__main__":
    main()
