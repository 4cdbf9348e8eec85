"""`/metrics` over HTTP on the daemon's own loop: the `metrics_listen` setting's endpoint.

A scrape is one small GET: the endpoint reads at most `MAX_REQUEST_BYTES` of
request head within `READ_TIMEOUT_S`, answers it, and closes (HTTP/1.0
style, no keep-alive), so a client that stalls or sends too much costs one
short-lived task, never a thread.  Only `GET` (and `HEAD`) of `/metrics` is
served; anything else has its status code.  Where it listens (loopback unless
the operator said otherwise) is `config.metricslisten`'s decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

from holsrv.config.metricslisten import Listen

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 8192
READ_TIMEOUT_S = 5.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Endpoint:
    """The HTTP server of `/metrics` at `listen`, the text made by `text` at each request."""

    def __init__(self, listen: Listen, text: Callable[[], str]) -> None:
        self.listen = listen
        self.text = text
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        if self.listen.path is not None:
            _remove_socket(self.listen.path)  # a stale one: the daemon's lock says no other daemon runs
            old_umask = os.umask(0o177)  # as the daemon's socket: its user's alone
            try:
                self._server = await asyncio.start_unix_server(self._serve, path=str(self.listen.path),
                                                               limit=MAX_REQUEST_BYTES)
            finally:
                os.umask(old_umask)
        else:
            self._server = await asyncio.start_server(self._serve, self.listen.host, self.listen.port,
                                                      limit=MAX_REQUEST_BYTES)
        log.info("metrics served at %s", self.address())

    def address(self) -> str:
        """Where it listens, the port the system picked included: `http://127.0.0.1:9464/metrics`, `unix:PATH`."""
        if self._server is None or self.listen.path is not None or not self._server.sockets:
            return str(self.listen)
        port = self._server.sockets[0].getsockname()[1]
        return str(Listen(self.listen.host, port))

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
            if self.listen.path is not None:
                _remove_socket(self.listen.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                async with asyncio.timeout(READ_TIMEOUT_S):
                    head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.LimitOverrunError, ValueError):
                await _reply(writer, 431, "Request Header Fields Too Large", b"request too large\n")
                return
            except (TimeoutError, asyncio.IncompleteReadError):
                return
            method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
            target = rest.split(" ", 1)[0]
            if method not in ("GET", "HEAD"):
                await _reply(writer, 405, "Method Not Allowed", b"only GET /metrics\n")
            elif target.split("?", 1)[0] != "/metrics":
                await _reply(writer, 404, "Not Found", b"the metrics are at /metrics\n")
            else:
                body = self.text().encode("utf-8")
                await _reply(writer, 200, "OK", b"" if method == "HEAD" else body, len(body))
        except (ConnectionError, TimeoutError):
            pass
        except Exception:
            log.exception("serving the metrics failed")
        finally:
            writer.close()


def _remove_socket(path: Path) -> None:
    """Remove the socket file at `path`; anything else there is left alone (binding then fails, saying so)."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            path.unlink()


async def _reply(writer: asyncio.StreamWriter, code: int, reason: str, body: bytes, length: int | None = None) -> None:
    content_type = CONTENT_TYPE if code == 200 else "text/plain; charset=utf-8"
    head = (f"HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\nConnection: close\r\n\r\n")
    writer.write(head.encode("latin-1") + body)
    async with asyncio.timeout(READ_TIMEOUT_S):
        await writer.drain()
