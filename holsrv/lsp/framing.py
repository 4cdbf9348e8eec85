"""LSP base-protocol framing: `Content-Length: N\\r\\n\\r\\n` + N bytes of JSON.

HOL's header parser is strict (exact case, one space, CRLF), so we write
exactly that and nothing else.  On the way in we accept any header order and
ignore other headers, but bound the header block and the body size.
"""

from __future__ import annotations

import asyncio
import json

from holsrv.errors import FrameError

MAX_HEADER_BYTES = 8192
MAX_BODY_BYTES = 64 * 1024 * 1024


def encode(message: dict) -> bytes:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def read_message(reader: asyncio.StreamReader) -> dict | None:
    """One JSON message, or None at a clean end of stream."""
    length = await _read_header(reader)
    if length is None:
        return None
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise FrameError("HOL server closed its output inside a message") from None
    try:
        # HOL may emit invalid UTF-8 as-is (PROTOCOL.md §2): never fail on it.
        message = json.loads(body.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as err:
        raise FrameError(f"HOL server sent a body that is not JSON: {err}") from None
    if not isinstance(message, dict):
        raise FrameError("HOL server sent a JSON message that is not an object")
    return message


async def _read_header(reader: asyncio.StreamReader) -> int | None:
    length = None
    seen = 0
    while True:
        try:
            line = await reader.readuntil(b"\r\n")
        except asyncio.IncompleteReadError as err:
            if err.partial or seen:
                raise FrameError("HOL server closed its output inside a header") from None
            return None
        except asyncio.LimitOverrunError:
            raise FrameError("HOL server sent an over-long header line") from None
        seen += len(line)
        if seen > MAX_HEADER_BYTES:
            raise FrameError("HOL server sent an over-long header block")
        if line == b"\r\n":
            if length is None:
                raise FrameError("HOL server sent a message without Content-Length")
            return length
        name, _, value = line.decode("ascii", errors="replace").partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise FrameError(f"HOL server sent a bad Content-Length: {value.strip()!r}") from None
            if not 0 <= length <= MAX_BODY_BYTES:
                raise FrameError(f"HOL server announced a {length}-byte message")
