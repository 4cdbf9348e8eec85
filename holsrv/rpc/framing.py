"""Length-prefixed msgpack frames: a 4-byte big-endian length, then the body.

Shared by the daemon (asyncio streams) and the clients (blocking sockets or
asyncio streams).  A frame longer than `MAX_FRAME` is refused on both sides
before it is read, so a garbage prefix cannot make anyone allocate gigabytes.
"""

from __future__ import annotations

import functools
import socket
import struct
from typing import TYPE_CHECKING, Any

import msgspec

from holsrv.errors import FrameError
from holsrv.rpc.messages import Hello, Reply, Request

if TYPE_CHECKING:
    # Imported lazily below: clients use only the blocking half, and loading
    # asyncio would cost every holctl call milliseconds.
    import asyncio

MAX_FRAME = 16 * 1024 * 1024
_HEADER = struct.Struct(">I")

_encoder = msgspec.msgpack.Encoder()
# The decoders `request_decoder`, `reply_decoder` and `hello_decoder`, built
# on first use (see `__getattr__`): building one walks every struct of its
# union, and a client that only reads replies should not pay for the others.
_DECODED_TYPES: dict[str, Any] = {"request_decoder": Request, "reply_decoder": Reply, "hello_decoder": Hello}


@functools.cache
def _decoder(name: str) -> msgspec.msgpack.Decoder[Any]:
    return msgspec.msgpack.Decoder(_DECODED_TYPES[name])


def __getattr__(name: str) -> msgspec.msgpack.Decoder[Any]:
    # PEP 562: `framing.reply_decoder` keeps working as an attribute.
    if name in _DECODED_TYPES:
        return _decoder(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def encode(message: msgspec.Struct) -> bytes:
    """Return one whole frame (prefix and body) for `message`."""
    body = _encoder.encode(message)
    if len(body) > MAX_FRAME:
        raise FrameError(f"frame of {len(body)} bytes exceeds the {MAX_FRAME}-byte limit")
    return _HEADER.pack(len(body)) + body


def body_length(header: bytes) -> int:
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise FrameError(
            f"peer announced a frame of {length} bytes (limit {MAX_FRAME}); "
            "it is probably not a holsrv client or daemon"
        )
    return length


def decode(decoder: msgspec.msgpack.Decoder, body: bytes):
    try:
        return decoder.decode(body)
    except msgspec.DecodeError as err:
        raise FrameError(f"undecodable frame: {err}") from None


async def read_body(reader: asyncio.StreamReader) -> bytes | None:
    """Read one frame body; None on a clean end of stream between frames."""
    import asyncio

    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as err:
        if err.partial:
            raise FrameError("connection closed inside a frame header") from None
        return None
    try:
        return await reader.readexactly(body_length(header))
    except asyncio.IncompleteReadError:
        raise FrameError("connection closed inside a frame body") from None


def recv_body(sock: socket.socket) -> bytes | None:
    """Blocking twin of `read_body` for a socket with a timeout set."""
    header = _recv_exactly(sock, _HEADER.size)
    if header is None:
        return None
    body = _recv_exactly(sock, body_length(header))
    if body is None:
        raise FrameError("connection closed inside a frame body")
    return body


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(min(n - len(chunks), 1 << 20))
        if not chunk:
            if chunks:
                raise FrameError("connection closed inside a frame")
            return None
        chunks += chunk
    return bytes(chunks)
