"""LSP base-protocol framing: `Content-Length: N\\r\\n\\r\\n` + N bytes of JSON.

HOL's header parser is strict (exact case, one space, CRLF), so we write
exactly that and nothing else.  On the way in we accept any header order and
ignore other headers, but bound the header block and the body size.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any

import msgspec

from holsrv.errors import FrameError
from holsrv.text import stepping

MAX_HEADER_BYTES = 8192
MAX_BODY_BYTES = 64 * 1024 * 1024


_encoder = msgspec.json.Encoder()
# Stands in for a large string while the rest of a message is encoded: no
# text a client or a script holds contains it.
_PLACEHOLDER = f"\0holsrv-{uuid.uuid4().hex}-%d\0"


def encode(message: dict) -> bytes:
    return b"".join(stepping.run(encode_steps(message)))


def encode_steps(message: dict) -> stepping.Steps[list[bytes]]:
    """`message` framed, as pieces to write in order, in steps: a string longer
    than a step (a script's text in didOpen or didChange) is escaped a slice
    per step, which for a 4 MB script would otherwise take some 20 ms at once."""
    large: list[str] = []
    skeleton = _encoder.encode(_set_aside(message, large))
    pieces = []
    for number, text in enumerate(large):
        before, skeleton = skeleton.split(_encoder.encode(_PLACEHOLDER % number), 1)
        pieces += [before, b'"']
        for start in range(0, len(text), stepping.CHARS_PER_STEP):
            # Escaping is per character: a slice escapes as its part of the whole.
            pieces.append(_encoder.encode(text[start:start + stepping.CHARS_PER_STEP])[1:-1])
            yield
        pieces.append(b'"')
    pieces.append(skeleton)
    return [b"Content-Length: %d\r\n\r\n" % sum(map(len, pieces)), *pieces]


def _set_aside(value, large: list[str]):
    """`value` with each string longer than a step replaced by a placeholder, kept in `large`."""
    if isinstance(value, str) and len(value) > stepping.CHARS_PER_STEP:
        large.append(value)
        return _PLACEHOLDER % (len(large) - 1)
    if isinstance(value, dict):
        return {key: _set_aside(item, large) for key, item in value.items()}
    if isinstance(value, list):
        return [_set_aside(item, large) for item in value]
    return value


async def read_message(reader: asyncio.StreamReader, typed: Mapping[str, type] | None = None,
                       taken: bytearray | None = None) -> dict | None:
    """One JSON message, or None at a clean end of stream.  `taken`, if given, holds the bytes of
    the message taken from `reader` so far while it waits for the rest (empty between messages):
    with what `reader` holds, what a successor daemon must read first (`holsrv.pool.handover`)."""
    length = await read_header(reader, taken=taken)
    if length is None:
        return None
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise FrameError("HOL server closed its output inside a message") from None
    if taken is not None:
        taken.clear()
    message = decode(body, typed)
    if not isinstance(message, dict):
        raise FrameError("HOL server sent a JSON message that is not an object")
    return message


class _Message(msgspec.Struct):
    """A message's envelope; `params` is decoded once its method is known."""

    jsonrpc: str | msgspec.UnsetType = msgspec.UNSET
    id: Any = msgspec.UNSET
    method: str | msgspec.UnsetType = msgspec.UNSET
    params: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    result: Any = msgspec.UNSET
    error: Any = msgspec.UNSET


_envelope = msgspec.json.Decoder(_Message)


def decode(body: bytes, typed: Mapping[str, type] | None = None) -> dict:
    """One message's JSON body, as a dict of the fields it has.  The params of
    a method in `typed` are decoded as that type (a struct), others as JSON."""
    try:
        return _decoded(body, typed or {})
    except msgspec.DecodeError as err:
        # HOL may emit invalid UTF-8 as-is (docs/protocol.md#framing): never fail on it.
        try:
            return _decoded(body.decode("utf-8", errors="replace").encode("utf-8"), typed or {})
        except msgspec.DecodeError:
            raise FrameError(f"HOL server sent a body that is not a JSON-RPC message: {err}") from None


def _decoded(body: bytes, typed: Mapping[str, type]) -> dict:
    envelope = _envelope.decode(body)
    message = {f: v for f in _Message.__struct_fields__ if (v := getattr(envelope, f)) is not msgspec.UNSET}
    if "params" in message:
        raw, kind = message["params"], typed.get(message.get("method", ""))
        try:
            message["params"] = msgspec.json.decode(raw, type=kind) if kind else msgspec.json.decode(raw)
        except msgspec.ValidationError:  # not the shape expected: as plain JSON, for the handler to judge
            message["params"] = msgspec.json.decode(raw)
    return message


async def read_header(reader: asyncio.StreamReader, peer: str = "HOL server",
                      taken: bytearray | None = None) -> int | None:
    """The body length a message's header block announces, or None at a clean end of stream;
    `FrameError` (naming `peer`, who writes the stream) for a header that cannot be read."""
    length = None
    seen = 0
    while True:
        try:
            line = await reader.readuntil(b"\r\n")
            if taken is not None:
                taken += line
        except asyncio.IncompleteReadError as err:
            if err.partial or seen:
                raise FrameError(f"{peer} closed its output inside a header") from None
            return None
        except asyncio.LimitOverrunError:
            raise FrameError(f"{peer} sent an over-long header line") from None
        seen += len(line)
        if seen > MAX_HEADER_BYTES:
            raise FrameError(f"{peer} sent an over-long header block")
        if line == b"\r\n":
            if length is None:
                raise FrameError(f"{peer} sent a message without Content-Length")
            return length
        name, _, value = line.decode("ascii", errors="replace").partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise FrameError(f"{peer} sent a bad Content-Length: {value.strip()!r}") from None
            if not 0 <= length <= MAX_BODY_BYTES:
                raise FrameError(f"{peer} announced a {length}-byte message")
