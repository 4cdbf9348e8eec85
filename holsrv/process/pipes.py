"""A child's stdin, stdout and stderr as pipes whose file descriptors the daemon knows.

asyncio's own subprocess pipes hide their descriptors (uvloop gives no way
to reach them), and a daemon handing its servers to its successor across
`exec` must name each server's descriptors and mark them inheritable
(`holsrv.pool.handover`).  So the pipes are made here, the child's ends
given to it, and ours turned into streams with `connect_read_pipe` /
`connect_write_pipe`: the same for a child we spawned and one we adopted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass

# A StreamReader's limit, as `create_subprocess_exec(limit=...)` had it: one LSP header line at most this long.
READ_LIMIT = 1 << 20


@dataclass
class ChildEnds:
    """The child's ends of its three pipes: to pass to it, then close in the daemon."""

    stdin: int
    stdout: int
    stderr: int

    def close(self) -> None:
        for fd in (self.stdin, self.stdout, self.stderr):
            with contextlib.suppress(OSError):
                os.close(fd)


@dataclass
class Pipes:
    """Our ends: the descriptors, and the streams over them once `connect`ed."""

    stdin: int
    stdout: int
    stderr: int
    writer: asyncio.StreamWriter | None = None
    reader: asyncio.StreamReader | None = None
    errors: asyncio.StreamReader | None = None

    @property
    def fds(self) -> tuple[int, int, int]:
        return self.stdin, self.stdout, self.stderr

    def close(self) -> None:
        """Close every end, through its transport once connected."""
        if self.writer is not None:
            self.writer.close()
        for stream in (self.reader, self.errors):
            transport = getattr(stream, "_transport", None)
            if transport is not None:
                transport.close()
        if self.writer is None:
            for fd in self.fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    async def ended(self, timeout: float) -> None:
        """Return once the child's output has reached its end (all of it read into the streams,
        which keep it), or `timeout` passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.reader is not None and not getattr(self.reader, "_eof", True) and loop.time() < deadline:
            await asyncio.sleep(0.01)  # a bounded look: the group was just killed, its pipe ends at once

    def inheritable(self, flag: bool = True) -> None:
        """Let the descriptors survive `exec` (the handover), or no longer."""
        for fd in self.fds:
            os.set_inheritable(fd, flag)

    def pause(self) -> None:
        """Read nothing more from the child: what it writes waits in the pipe (for the successor)."""
        for stream in (self.reader, self.errors):
            transport = getattr(stream, "_transport", None)
            if transport is not None:
                with contextlib.suppress(Exception):
                    transport.pause_reading()

    def resume(self) -> None:
        for stream in (self.reader, self.errors):
            transport = getattr(stream, "_transport", None)
            if transport is not None:
                with contextlib.suppress(Exception):
                    transport.resume_reading()

    def writes_pending(self) -> int:
        """Bytes given to the child's stdin that are not yet in the pipe."""
        if self.writer is None:
            return 0
        return self.writer.transport.get_write_buffer_size()


def make() -> tuple[ChildEnds, Pipes]:
    """Three pipes, not inheritable (the child gets its ends as 0, 1 and 2)."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    return ChildEnds(in_r, out_w, err_w), Pipes(in_w, out_r, err_r)


def unread(stream: asyncio.StreamReader | None) -> bytes:
    """What was read from the pipe into `stream` but not yet taken from it."""
    buffer = getattr(stream, "_buffer", None)  # asyncio.StreamReader's own: no public way to see it
    return bytes(buffer) if buffer is not None else b""


async def connect(pipes: Pipes, stdout_left: bytes = b"", stderr_left: bytes = b"") -> Pipes:
    """Streams over `pipes`' descriptors; `*_left`: bytes a predecessor read but did not take,
    which the readers give first."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    errors = asyncio.StreamReader(limit=READ_LIMIT)
    if stdout_left:
        reader.feed_data(stdout_left)
    if stderr_left:
        errors.feed_data(stderr_left)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(pipes.stdout, "rb", 0))
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(errors), os.fdopen(pipes.stderr, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                         os.fdopen(pipes.stdin, "wb", 0))
    pipes.writer = asyncio.StreamWriter(transport, protocol, None, loop)
    pipes.reader, pipes.errors = reader, errors
    return pipes
