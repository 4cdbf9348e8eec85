"""One connection: its hello, then its requests answered in order, one at a time.

No connection can hold the others up: the loop yields between its
requests, its unread input is bounded (the stream limit, then the kernel's
buffer pushes back on the client), a frame begun must be finished within
`frame_timeout_s`, and a reply taken within `send_timeout_s`.  The next
frame is read while a request is answered, so a caller that hangs up
mid-call has its call cancelled.  A malformed connection is logged once, at
WARNING, in one line.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import select
import time
from collections.abc import Awaitable, Callable

from holsrv import __version__
from holsrv.answers.common import Report
from holsrv.config.settings import FIXED, Settings
from holsrv.errors import DaemonStopping, FrameError, HolsrvError, ProtocolMismatch
from holsrv.rpc import framing
from holsrv.rpc import messages as m
from holsrv.text import stepping

log = logging.getLogger(__name__)

# A connection's stream buffer: past twice this much unread input the daemon
# stops reading from it, and the kernel's socket buffer makes the client wait.
RECEIVE_BUFFER = 64 * 1024
# Calls whose work is for their caller alone: if it hangs up, they are
# cancelled.  Actions (restart, stop, retryCompile, shutdown) always complete.
ABANDONED_WHEN_GONE = (
    m.Diagnostics, m.GoalState, m.Hover, m.Definition, m.References, m.Completion,
    m.DocumentSymbol, m.WorkspaceSymbol, m.Search, m.Eval, m.Status,
    # A trial's candidates stop, and its `finally` gives the server the file's text back.
    m.Try, m.GoalDiff,
)  # One with `defer_after` runs as a job (`holsrv.jobs`): only the wait for it is cancelled.
_STOPPING_UNANSWERED = (
    "the daemon is shutting down and did not start this request; send it again in a few seconds "
    "(the next call starts a new daemon, or systemd restarts it)"
)
_HELLO_EXPECTED = (
    f"a connection must begin with a Hello frame (msgpack {{'op': 'hello', 'protocol': "
    f"{m.PROTOCOL_VERSION}, 'client': NAME}} after its 4-byte big-endian length); holctl and "
    "holmcp send it themselves"
)

# What answers a request: the dispatch table's `answer`.
Answer = Callable[[m.Request, str, Report | None], Awaitable[m.Reply]]
# What answers a request with nothing awaited, if it can (a cached answer), else None.
AtOnce = Callable[[m.Request, str], m.Reply | None]
# What serves a connection an editor attached (`holctl lsp`) until it ends.
Attach = Callable[["Connection", str, m.EditorAttach], Awaitable[None]]


class Unresponsive(ConnectionError):
    """The client did not take a reply within the send deadline."""


class Connection:
    """One open connection, and what the open connections know of it to pick one to close.

    `stopping` set: the connection ends after the reply it is working on.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, settings: Settings,
                 frames: framing.Budget, stopping: asyncio.Event, at_once: AtOnce | None = None) -> None:
        self.reader = reader
        self._at_once = at_once
        self.writer = writer
        self.settings = settings
        self.frames = frames  # the daemon-wide budget of unfinished frames (an editor channel reads with it too)
        self._stopping = stopping
        # monotonic time since which it waits for a frame; None while a request is answered
        self.idle_since: float | None = time.monotonic()
        self.warned = False  # its one WARNING line is spent
        self.peer: int | None = None  # the client's pid, where the system says
        self.client: str | None = None  # the name its hello gave, once welcomed (the metrics count by kind)
        self.editor = False  # an editor's channel (`holctl lsp`): busy all along, never told a reply's error
        # No write buffer beyond the kernel's: `send`'s drain then means the
        # client has the reply, and closing never lingers on unsent data.
        writer.transport.set_write_buffer_limits(high=0)

    async def converse(self, answer: Answer, attach: Attach | None = None) -> None:
        """Take the hello, then answer the requests (an editor's with `attach`) until the connection ends."""
        client = self.client = await self._hello()
        if client is not None:
            await self._requests(client, answer, attach)

    def close(self) -> None:
        if self.writer.transport.get_write_buffer_size():
            self.writer.transport.abort()  # a reply it never took: do not wait on it
        else:
            self.writer.close()

    def warn(self, message: str, *args: object) -> None:
        """Log the connection's first problem at WARNING and any later ones at DEBUG: one line each."""
        log.log(logging.DEBUG if self.warned else logging.WARNING, message, *args)
        self.warned = True

    async def send(self, reply: m.Reply) -> None:
        """Write one frame; `Unresponsive` if the client does not take it within the send deadline."""
        writer = self.writer
        writer.writelines(await _frame(reply))
        if not writer.transport.get_write_buffer_size():
            await writer.drain()  # taken already (the usual case): no timer, but a lost connection still raises
            return
        try:
            async with asyncio.timeout(self.settings.send_timeout_s):
                await writer.drain()
        except TimeoutError:
            unsent = writer.transport.get_write_buffer_size()
            raise Unresponsive(
                f"the client took no reply for {self.settings.send_timeout_s:g}s ({unsent} bytes unsent)"
            ) from None

    # -- the hello -------------------------------------------------------------

    async def _hello(self) -> str | None:
        """The client's name once its hello is welcomed; None, after an error frame if it sent a bad one, if not."""
        try:
            async with asyncio.timeout(self.settings.hello_timeout_s):
                body = await framing.read_body(self.reader, budget=self.frames)
            if body is None:
                return None
            hello = framing.decode(framing.hello_decoder, body)
        except (FrameError, TimeoutError) as err:
            problem = f"no hello within {self.settings.hello_timeout_s:g}s" if isinstance(err, TimeoutError) else err
            self.warn("rejected a connection: %s", problem)
            await self.send(m.ErrorReply(FrameError.code, f"{problem}: {_HELLO_EXPECTED}"))
            return None
        if hello.protocol != m.PROTOCOL_VERSION:
            message = _mismatch(hello)
            self.warn("rejected %s: %s", hello.client, message)
            await self.send(m.ErrorReply(ProtocolMismatch.code, message))
            return None
        await self.send(self._welcome(hello))
        return hello.client

    def _welcome(self, hello: m.Hello) -> m.Welcome:
        return m.Welcome(
            m.PROTOCOL_VERSION, __version__, os.getpid(),
            request_timeout_s=self.settings.request_timeout_s,
            lookup_wait_s=self.settings.lookup_wait_s,
            start_wait_s=self.settings.start_wait_s,
            try_timeout_s=self.settings.try_timeout_s,
            trial_wait_s=self.settings.trial_wait_s,
            settings_warnings=self._differences(hello.settings),
            holmake_timeout_s=self.settings.holmake_timeout_s,
        )

    def _differences(self, given: dict[str, str]) -> list[str]:
        """One sentence per setting a client was given that this daemon does not have."""
        return [
            f"{name}={raw} was given to this client, but it is no longer a setting: every daemon uses the "
            f"constant {ours} (docs/settings.md lists the constants), so the client's value has no effect; "
            "remove it from the client's environment."
            if source == FIXED else
            f"{name}={raw} was given to this client, but the running daemon (pid {os.getpid()}) uses "
            f"{ours or '(none)'} ({source}), so the client's value has no effect. To apply it, restart the "
            "daemon: `holctl shutdown` (the next call starts one from the client's environment), or set it "
            "where the daemon is started (its systemd unit)."
            for name, raw, ours, source in self.settings.differences(given)
        ]

    # -- the requests ----------------------------------------------------------

    async def _requests(self, client: str, answer: Answer, attach: Attach | None = None) -> None:
        """Answer the connection's requests one at a time, in order, until it ends or breaks the framing.

        The next frame is read while a request is answered (one frame ahead,
        so a pipelining client is bounded as before): an end of stream seen
        then, from a caller that closed its socket, cancels the question or
        eval it is waiting for (see `_caller_gone`).  After a request answered at
        once (`at_once`: no caller to lose) it is read in the loop, with no task.
        """
        ahead: asyncio.Task | None = None
        decoder = framing.request_decoder  # found once: the module's attribute is made on first use
        try:
            while True:
                self.idle_since = time.monotonic()
                if self._stopping.is_set():
                    await self._stopped(ahead)
                    return
                try:
                    body = await (ahead or framing.read_body(self.reader, self.settings.frame_timeout_s, self.frames))
                except FrameError as err:
                    # A bad length or a stalled frame: the stream cannot be
                    # resynchronised, so say why and close.
                    self.warn("dropped a connection from %s: %s", client, err)
                    await self.send(m.ErrorReply(err.code, f"{err}; the daemon closes this connection"))
                    return
                ahead = None
                if body is None:
                    return
                self.idle_since = None
                try:
                    request = framing.decode(decoder, body)  # once: every path below takes it
                except FrameError as err:
                    self.warn("rejected a request from %s: %s", client, err)
                    await self.send(m.ErrorReply(err.code, f"{err}; is the client older or newer than the daemon?"))
                    attach = None
                    continue
                if attach is not None and isinstance(request, m.EditorAttach):
                    # The editor's channel, both ways, until it ends: busy all along, never closed for room.
                    self.editor = True
                    await attach(self, client, request)
                    return
                attach = None  # only a connection's first request may attach an editor
                if _more_buffered(self.reader):
                    # A yield, so one connection pipelining a burst of requests whose answers
                    # are ready (cached) cannot keep every other one waiting.  A caller that
                    # waits for each reply let the loop run others while its request came.
                    await asyncio.sleep(0)
                reply = self._at_once(request, client) if self._at_once is not None else None
                if reply is not None:
                    await self.send(reply)
                    continue
                ahead = self._read_ahead()
                await self._answer_one(request, client, answer, ahead)
        finally:
            if ahead is not None:
                ahead.cancel()

    async def _stopped(self, ahead: asyncio.Task | None) -> None:
        """Shutting down (see `Daemon.close`): the call in flight was answered;
        one read after it is told why it will not be."""
        if ahead is not None and ahead.done() and not ahead.cancelled() and ahead.exception() is None \
                and ahead.result() is not None:
            await self.send(m.ErrorReply(DaemonStopping.code, _STOPPING_UNANSWERED))

    async def _answer_one(self, request: m.Request, client: str, answer: Answer, ahead: asyncio.Task) -> None:
        """Answer one request and send the reply; its caller hanging up meanwhile cancels it."""
        report = self._progress() if getattr(request, "progress", False) else None
        watch = None
        if isinstance(request, ABANDONED_WHEN_GONE):
            task = asyncio.current_task()
            assert task is not None
            watch = functools.partial(self._caller_gone, task, client, request)
            ahead.add_done_callback(watch)
        try:
            reply = await answer(request, client, report)
        finally:
            if watch is not None:
                ahead.remove_done_callback(watch)
        await self.send(reply)

    def _read_ahead(self) -> asyncio.Task:
        task = asyncio.ensure_future(framing.read_body(self.reader, self.settings.frame_timeout_s, self.frames))
        # Its error is read by the loop, or nobody's once the connection ended.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return task

    def _caller_gone(self, task: asyncio.Task, client: str, request: m.Request, ahead: asyncio.Task) -> None:
        """Cancel the connection's call in flight if its caller closed the socket.

        An end of stream may be a half-close (the client still reads its
        answer); only a hang-up (the socket closed at the other end) means no
        one will read it.  Cancelling frees what the call held: its lease (so
        the server can be evicted and `waiting_calls` drops) and, for a
        request HOL is working on, HOL's thread (`$/cancelRequest`).
        """
        if ahead.cancelled() or ahead.exception() is not None or ahead.result() is not None:
            return
        if _hung_up(self.writer):
            log.info("%s went away during %s: cancelling it", client, type(request).__name__)
            task.cancel()

    def _progress(self) -> Report:
        """Progress frames for one call, written on its connection ahead of its reply."""

        async def report(progress: m.Progress) -> None:
            await self.send(progress)

        return report


def _more_buffered(reader: asyncio.StreamReader) -> bool:
    """Whether the next frame has begun to arrive already (the caller pipelines).  The stream's
    buffer is not public: where it cannot be seen, say yes (a yield too many costs a loop turn)."""
    return bool(getattr(reader, "_buffer", True))


def _mismatch(hello: m.Hello) -> str:
    return (
        f"protocol mismatch: client {hello.client} {hello.client_version} speaks protocol "
        f"{hello.protocol}, this daemon ({__version__}) speaks {m.PROTOCOL_VERSION}. "
        "Restart the daemon so it matches the installed clients: stop it with "
        f"`kill {os.getpid()}` (or `systemctl --user restart holsrv`); the next call "
        "starts a matching one."
    )


def _hung_up(writer: asyncio.StreamWriter) -> bool:
    """True if the peer closed its socket (POLLHUP), not merely its writing half."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return False
    poller = select.poll()
    poller.register(sock.fileno(), 0)  # 0: only hang-ups and errors are reported
    return any(events & (select.POLLHUP | select.POLLERR) for _, events in poller.poll(0))


async def _frame(reply: m.Reply) -> list[bytes]:
    """`reply`'s frame, as pieces to write in order; an `internal` error's if it cannot be sent."""
    try:
        # In slices: the proofs of a 30,000-proof answer take milliseconds to encode.
        steps = framing.encode_steps(reply, stepping.ITEMS_PER_STEP)
        try:
            next(steps)
        except StopIteration as done:
            # No long list (most replies, every cached goal state): encoded in its first
            # step, so the slicing driver is not started on the fast path.
            return done.value
        return await stepping.sliced(steps)
    except HolsrvError as err:
        return _unsendable(reply, err)


def _unsendable(reply: m.Reply, err: HolsrvError) -> list[bytes]:
    """An `internal` error's frame for a reply too large, or with text that is not UTF-8."""
    log.error("could not send a %s: %s", type(reply).__name__, err)
    return [framing.encode(m.ErrorReply("internal", f"the daemon could not send its reply: {err}"))]
