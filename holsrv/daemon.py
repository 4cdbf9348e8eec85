"""The daemon: a Unix-socket server that hands each request to the tools.

One connection may carry many requests, answered in order; connections are
independent, so a client waiting on a slow file never delays another.  Every
error a request causes becomes an `ErrorReply` here, once; a bug becomes an
`internal` error with its traceback in the log, and the connection survives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from typing import assert_never

from holsrv import __version__
from holsrv.answers import control, diagnostics, goals, lookups
from holsrv.answers.common import Context
from holsrv.cache import AnswerCache
from holsrv.errors import AlreadyRunning, FrameError, HolsrvError, ProtocolMismatch
from holsrv.pool import Pool
from holsrv.rpc import framing, paths
from holsrv.rpc import messages as m
from holsrv.settings import Settings

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 256


class Daemon:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool = Pool(settings)
        self.cache = AnswerCache(settings.cache_entries)
        self.answers = Context(self.pool, self.cache, settings)
        self.started = time.monotonic()
        self.stopping = asyncio.Event()
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task] = set()

    async def start(self) -> None:
        """Bind the socket (refusing to replace a live daemon) and start duties."""
        path = self.settings.socket
        paths.private_dir(path.parent)
        if _answers(path):
            raise AlreadyRunning(f"a holsrv daemon is already listening on {path}")
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # stale: nobody answered on it
        killed = self.pool.reap_leftovers()
        if killed:
            log.warning("stopped %d HOL servers left by a previous daemon", killed)
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(path), limit=framing.MAX_FRAME)
        finally:
            os.umask(old_umask)
        path.chmod(0o600)
        self.pool.start_background()
        log.info("holsrv %s listening on %s (pid %d)", __version__, path, os.getpid())

    async def run(self) -> None:
        """Serve until SIGTERM/SIGINT or a shutdown request, then stop everything."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        try:
            await self.stopping.wait()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            await self.close()

    async def close(self) -> None:
        log.info("shutting down: stopping %d HOL servers", len(self.pool.sessions))
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self.pool.close()
        with contextlib.suppress(FileNotFoundError):
            self.settings.socket.unlink()
        log.info("stopped")

    # -- connections -----------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            if len(self._connections) > MAX_CONNECTIONS:
                await _send(writer, m.ErrorReply("servers_busy", f"more than {MAX_CONNECTIONS} connections; try again"))
                return
            client = await self._hello(reader, writer)
            if client is not None:
                await self._requests(reader, writer, client)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; whatever it started carries on
        except asyncio.CancelledError:
            # Only close() cancels a connection.  Ending normally keeps asyncio's
            # stream callback from logging the cancellation as an error.
            pass
        except Exception:
            log.exception("connection failed")
        finally:
            self._connections.discard(task)
            writer.close()

    async def _hello(self, reader, writer) -> str | None:
        try:
            async with asyncio.timeout(10):
                body = await framing.read_body(reader)
            if body is None:
                return None
            hello = framing.decode(framing.hello_decoder, body)
        except (FrameError, TimeoutError) as err:
            log.warning("rejected a connection: %s", err)
            await _send(writer, m.ErrorReply(FrameError.code, f"expected a hello frame first: {err}"))
            return None
        if hello.protocol != m.PROTOCOL_VERSION:
            message = (
                f"protocol mismatch: client {hello.client} {hello.client_version} speaks protocol "
                f"{hello.protocol}, this daemon ({__version__}) speaks {m.PROTOCOL_VERSION}. "
                "Restart the daemon so it matches the installed clients: stop it with "
                f"`kill {os.getpid()}` (or `systemctl --user restart holsrv`); the next call "
                "starts a matching one."
            )
            log.warning("rejected %s: %s", hello.client, message)
            await _send(writer, m.ErrorReply(ProtocolMismatch.code, message))
            return None
        await _send(writer, m.Welcome(
            m.PROTOCOL_VERSION, __version__, os.getpid(),
            request_timeout_s=self.settings.request_timeout_s,
            lookup_wait_s=self.settings.lookup_wait_s,
            start_wait_s=self.settings.start_wait_s,
        ))
        return hello.client

    async def _requests(self, reader, writer, client: str) -> None:
        while (body := await framing.read_body(reader)) is not None:
            try:
                request = framing.decode(framing.request_decoder, body)
            except FrameError as err:
                log.warning("rejected a request from %s: %s", client, err)
                await _send(writer, m.ErrorReply(err.code, f"{err}; is the client older or newer than the daemon?"))
                continue
            reply = await self._answer(request, client)
            await _send(writer, reply)

    async def _answer(self, request: m.Request, client: str) -> m.Reply:
        try:
            return await self.dispatch(request, client)
        except HolsrvError as err:
            log.info("%s from %s: %s: %s", type(request).__name__, client, err.code, err)
            return m.ErrorReply(err.code, str(err), err.detail)
        except Exception as err:
            log.exception("internal error answering %r", request)
            return m.ErrorReply("internal", f"internal error in the daemon: {err!r}; see the daemon log")

    async def dispatch(self, request: m.Request, client: str) -> m.Reply:
        ctx = self.answers
        match request:
            case m.Diagnostics():
                return await diagnostics.answer(ctx, request, client)
            case m.GoalState():
                return await goals.goal_state(ctx, request, client)
            case m.Hover():
                return await lookups.hover(ctx, request, client)
            case m.Definition():
                return await lookups.definition(ctx, request, client)
            case m.References():
                return await lookups.references(ctx, request, client)
            case m.Completion():
                return await lookups.completion(ctx, request, client)
            case m.DocumentSymbol():
                return await lookups.document_symbol(ctx, request, client)
            case m.WorkspaceSymbol():
                return await lookups.workspace_symbol(ctx, request, client)
            case m.Eval():
                return await control.eval(ctx, request, client)
            case m.RetryCompile():
                return await control.retry_compile(ctx, request, client)
            case m.Restart():
                return await control.restart(ctx, request, client)
            case m.Status():
                return self.status()
            case m.Shutdown():
                self.stopping.set()
                return m.ShutdownResult(f"holsrv (pid {os.getpid()}) is stopping its HOL servers and exiting")
            case _:
                assert_never(request)

    def status(self) -> m.StatusResult:
        now = self.pool.clock()
        return m.StatusResult(
            daemon_version=__version__,
            protocol=m.PROTOCOL_VERSION,
            pid=os.getpid(),
            uptime_s=round(time.monotonic() - self.started, 1),
            socket=str(self.settings.socket),
            max_servers=self.settings.max_servers,
            sessions=[s.snapshot(now, self.pool.restarts(s.path)) for s in self.pool.sessions.values()],
            cache_hits=self.cache.hits,
            cache_misses=self.cache.misses,
        )


async def _send(writer: asyncio.StreamWriter, reply: m.Reply) -> None:
    try:
        writer.write(framing.encode(reply))
    except FrameError as err:
        writer.write(framing.encode(m.ErrorReply("internal", f"reply too large: {err}")))
    await writer.drain()


def _answers(path) -> bool:
    """True if something accepts connections on `path` (a live daemon)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(2.0)
    try:
        sock.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        sock.close()
