"""The editor's side of the wire: LSP base-protocol messages on stdin and stdout.

`Content-Length: N\r\n\r\n` and N bytes of JSON, as every editor writes
them; the header block is read as HOL's is (`holsrv.lsp.framing.read_header`:
other headers ignored, the block and the body bounded, so a garbled stream
cannot make us allocate without end).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import msgspec

from holsrv.errors import FrameError
from holsrv.lsp import framing
from holsrv.lsp.framing import MAX_HEADER_BYTES


class BrokenStream(Exception):
    """The editor's stream cannot be read as LSP messages."""


async def streams() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """stdin and stdout as asyncio streams (the editor starts us with pipes)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_HEADER_BYTES, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout.buffer)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """One message, or None at a clean end of the stream."""
    try:
        length = await framing.read_header(reader, "the editor")  # the header block as HOL's is read
    except FrameError as err:
        raise BrokenStream(str(err)) from None
    if length is None:
        return None
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise BrokenStream("the editor closed its output inside a message") from None
    try:
        message = msgspec.json.decode(body)
    except msgspec.DecodeError as err:
        raise BrokenStream(f"a message that is not JSON: {err}") from None
    if not isinstance(message, dict):
        raise BrokenStream("a message that is not a JSON object")
    return message


_encoder = msgspec.json.Encoder()


def frame(message: dict[str, Any]) -> bytes:
    body = _encoder.encode(message)
    return b"Content-Length: %d\r\n\r\n" % len(body) + body
