"""The editor's side of the wire: LSP base-protocol messages on stdin and stdout.

`Content-Length: N\r\n\r\n` and N bytes of JSON, as every editor writes
them; other headers are ignored, and the header block and the body are
bounded so a garbled stream cannot make us allocate without end.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import msgspec

MAX_HEADER_BYTES = 8192
MAX_BODY_BYTES = 64 * 1024 * 1024


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
    length, seen = None, 0
    while True:
        try:
            line = await reader.readuntil(b"\r\n")
        except asyncio.IncompleteReadError as err:
            if err.partial or seen:
                raise BrokenStream("the editor closed its output inside a header") from None
            return None
        except asyncio.LimitOverrunError:
            raise BrokenStream("the editor sent an over-long header line") from None
        seen += len(line)
        if seen > MAX_HEADER_BYTES:
            raise BrokenStream("the editor sent an over-long header block")
        if line == b"\r\n":
            break
        name, _, value = line.decode("ascii", errors="replace").partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise BrokenStream(f"bad Content-Length {value.strip()!r}") from None
    if length is None or not 0 <= length <= MAX_BODY_BYTES:
        raise BrokenStream(f"a message without a usable Content-Length ({length})")
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
