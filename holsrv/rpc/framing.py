"""Length-prefixed msgpack frames: a 4-byte big-endian length, then the body.

Shared by the daemon (asyncio streams) and the clients (blocking sockets or
asyncio streams).  A frame longer than `MAX_FRAME` is refused on both sides
before it is read, so a garbage prefix cannot make anyone allocate gigabytes.
The daemon also bounds how long the rest of a frame may take once its first
byte came, and how many bytes of unfinished frames it holds at once.
"""

from __future__ import annotations

import functools
import os
import socket
import struct
import typing
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import msgspec

from holsrv.errors import FrameError, NotUtf8
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
    """Return one whole frame (prefix and body) for `message`; NotUtf8 if a string is not UTF-8."""
    body = _checked(message, message)
    if len(body) > MAX_FRAME:
        raise FrameError(f"frame of {len(body)} bytes exceeds the {MAX_FRAME}-byte limit")
    return _HEADER.pack(len(body)) + body


def _checked(value: Any, message: msgspec.Struct) -> bytes:
    """`value` (`message` or a part of it) encoded; NotUtf8 for a string that is not UTF-8."""
    try:
        return _encoder.encode(value)
    except UnicodeEncodeError as err:
        # A str that is not Unicode text: most often a file name whose bytes
        # are not UTF-8, which Python's argv and os APIs carry as surrogates.
        text = err.object if isinstance(err.object, str) else ""
        raise NotUtf8(
            f"{type(message).__name__} holds text that is not valid UTF-8 ({_clip(text)}), such as a file name "
            "in another encoding; holsrv sends text as UTF-8. Rename the file (or the directory on its path) "
            "to a UTF-8 name."
        ) from None


# Stands in for a long list while the rest of a message is encoded: no text
# a reply carries contains it.
_PLACEHOLDER = f"\0holsrv-{os.urandom(16).hex()}-%d\0"


def encode_steps(message: msgspec.Struct, per_step: int) -> Generator[None, None, list[bytes]]:
    """`encode`, as pieces to write in order, in steps: each list field longer
    than `per_step` items (a diagnostics answer's 30,000 proofs, 1 MB and some
    3 ms to encode) is encoded `per_step` items a step.  NotUtf8 and
    FrameError as `encode`."""
    long = {}
    for name in _list_fields(type(message)):  # most replies have one or two lists, and none long
        value = getattr(message, name)
        if isinstance(value, list) and len(value) > per_step:
            long[name] = value
    if not long:
        return [encode(message)]
    standins = {name: [_PLACEHOLDER % number] for number, name in enumerate(long)}
    skeleton = _checked(msgspec.structs.replace(message, **standins), message)
    pieces = []
    for name, items in long.items():
        before, skeleton = skeleton.split(_encoder.encode(standins[name]), 1)
        pieces += [before, _array_header(len(items))]
        for start in range(0, len(items), per_step):
            part = items[start:start + per_step]
            pieces.append(_checked(part, message)[len(_array_header(len(part))):])
            yield
    pieces.append(skeleton)
    length = sum(map(len, pieces))
    if length > MAX_FRAME:
        raise FrameError(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
    return [_HEADER.pack(length), *pieces]


@functools.cache
def _list_fields(kind: type[msgspec.Struct]) -> tuple[str, ...]:
    """The fields of `kind` that may hold a list (annotated `list[…]`, alone or in a union)."""
    def may_be_list(annotation: Any) -> bool:
        return typing.get_origin(annotation) is list or any(may_be_list(a) for a in typing.get_args(annotation))

    return tuple(f.name for f in msgspec.structs.fields(kind) if may_be_list(f.type))


def _array_header(count: int) -> bytes:
    """msgpack's header of an array of `count` items."""
    if count < 16:
        return bytes([0x90 | count])
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


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


class Budget:
    """Bytes of unfinished frames all connections together may hold (the daemon's bound)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, n: int) -> bool:
        if self.held + n > self.limit:
            return False
        self.held += n
        return True

    def give(self, n: int) -> None:
        self.held -= n


# A frame body this small is read without asking the budget: requests are.
SMALL_FRAME = 64 * 1024


async def read_body(
    reader: asyncio.StreamReader, rest_timeout: float | None = None, budget: Budget | None = None
) -> bytes | None:
    """Read one frame body; None on a clean end of stream between frames.

    Waiting for a frame to begin has no deadline; once its first byte came,
    the rest must come within `rest_timeout` seconds (None: no deadline).
    A body over SMALL_FRAME is read only if `budget` can hold it.
    """
    import asyncio

    try:
        first = await reader.readexactly(1)
    except asyncio.IncompleteReadError:
        return None
    buffered = _buffered_length(reader, first)
    if buffered is not None:
        # All there: `readexactly` returns without waiting (and resumes a paused transport).
        await reader.readexactly(_HEADER.size - 1)
        return await reader.readexactly(buffered)
    try:
        async with asyncio.timeout(rest_timeout):
            header = first + await _exactly(reader, _HEADER.size - 1, "header")
            length = body_length(header)
            if budget is None or length <= SMALL_FRAME:
                return await _exactly(reader, length, "body")
            if not budget.take(length):
                raise FrameError(
                    f"a frame of {length} bytes cannot be received now: the daemon is already receiving "
                    f"{budget.held} bytes of other frames (limit {budget.limit}); send it again shortly"
                )
            try:
                return await _exactly(reader, length, "body")
            finally:
                budget.give(length)
    except TimeoutError:
        raise FrameError(
            f"the rest of a frame did not come within {rest_timeout:g}s of its first byte; "
            "a client must send each frame whole"
        ) from None


def _buffered_length(reader: asyncio.StreamReader, first: bytes) -> int | None:
    """The body length of the frame begun by `first` if the rest of it, header and a small
    body, is already in `reader`'s buffer, so reading it cannot stall and needs no deadline
    (the usual case for a request); None otherwise, or where the buffer cannot be seen."""
    buffered = getattr(reader, "_buffer", None)  # asyncio's StreamReader keeps a bytearray
    if not isinstance(buffered, bytearray) or len(buffered) < _HEADER.size - 1:
        return None
    length = body_length(first + bytes(buffered[:_HEADER.size - 1]))
    if length > SMALL_FRAME or len(buffered) < _HEADER.size - 1 + length:
        return None
    return length


async def _exactly(reader: asyncio.StreamReader, n: int, part: str) -> bytes:
    import asyncio

    try:
        return await reader.readexactly(n)
    except asyncio.IncompleteReadError:
        raise FrameError(f"connection closed inside a frame {part}") from None


def _clip(text: str, keep: int = 80) -> str:
    """The end of `text` (where a path has its file name), undecodable bytes shown as they were (b'caf\\xe9')."""
    tail = text[-keep:]
    try:
        shown = repr(tail.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        shown = repr(tail)
    return ("…" if len(text) > keep else "") + shown


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
