"""The asyncio shell of `connecting`: a welcomed connection to the daemon, for holmcp's client and the
editor bridge.  Only the I/O is here; the frames, checks, errors and decisions are `connecting`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from holsrv.errors import DaemonRestarting, DaemonUnreachable, FrameError
from holsrv.rpc import autostart, connecting, framing, paths
from holsrv.rpc.messages import Request, Welcome

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter, Welcome]
# Starts a daemon on the socket (blocking work: in a thread, so other calls go on).
Start = Callable[[Path], Awaitable[None]]


async def start_in_thread(path: Path) -> None:
    await asyncio.to_thread(autostart.start_daemon, path)


async def open_async(
    path: Path,
    name: str,
    settings: Mapping[str, str] | None,
    *,
    autostart_daemon: bool,
    then: Request | None = None,
    hello_timeout: float = autostart.CONNECT_TIMEOUT_S,
    start: Start = start_in_thread,
) -> Streams:
    """A connection to the daemon on `path`, welcomed (`then` sent right after the hello, in the same
    write); a daemon started first (`start`) if none listens and `autostart_daemon`.  A daemon that
    refuses the hello because it is restarting is waited for (`redial_async`)."""
    try:
        return await _opened(path, name, settings, autostart_daemon, then, hello_timeout, start)
    except DaemonRestarting as refusal:
        deadline = asyncio.get_running_loop().time() + connecting.switch_wait(refusal)
        return await redial_async(path, name, settings, autostart_daemon=autostart_daemon, deadline=deadline,
                                  then=then, hello_timeout=hello_timeout, start=start)


async def redial_async(
    path: Path,
    name: str,
    settings: Mapping[str, str] | None,
    *,
    autostart_daemon: bool,
    deadline: float,
    then: Request | None = None,
    hello_timeout: float = autostart.CONNECT_TIMEOUT_S,
    start: Start = start_in_thread,
) -> Streams:
    """`open_async` again and again until a daemon welcomes us or `deadline` (the loop's time) passes."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            # A connection made while a daemon restarts waits in the backlog for the successor: up to the deadline.
            timeout = max(hello_timeout, deadline - loop.time())
            return await _opened(path, name, settings, autostart_daemon, then, timeout, start)
        except (DaemonUnreachable, DaemonRestarting):
            if loop.time() >= deadline:
                raise
        await asyncio.sleep(connecting.REDIAL_PAUSE_S)  # a pause between attempts, bounded by `deadline`


async def _opened(
    path: Path, name: str, settings: Mapping[str, str] | None, autostart_daemon: bool, then: Request | None,
    hello_timeout: float, start: Start,
) -> Streams:
    try:
        return await _handshake(path, name, settings, then, hello_timeout)
    except connecting.NOBODY:
        connecting.may_start(path, autostart_daemon)
    await start(path)
    try:
        return await _handshake(path, name, settings, then, hello_timeout)
    except OSError as err:
        raise connecting.unreachable_after_start(path, err) from None


async def gone_async(reader: asyncio.StreamReader, deadline: float) -> None:
    """Wait (until `deadline`, the loop's time) for the daemon to close the connection of `reader`,
    as it closes every connection when it restarts (see `connecting.gone_blocking`)."""
    try:
        async with asyncio.timeout_at(deadline):
            while await reader.read(65536):
                pass
    except (OSError, TimeoutError):
        return


async def _handshake(
    path: Path, name: str, settings: Mapping[str, str] | None, then: Request | None, timeout: float
) -> Streams:
    """A new connection, welcomed; FileNotFoundError or ConnectionRefusedError when nobody listens."""
    paths.checked_socket(path)  # SocketPathTooLong: no daemon can listen there
    try:
        async with asyncio.timeout(autostart.CONNECT_TIMEOUT_S):
            reader, writer = await asyncio.open_unix_connection(str(path), limit=framing.MAX_FRAME)
    except connecting.NOBODY:
        raise
    except OSError as err:  # TimeoutError included
        raise connecting.cannot_connect(path, err) from None
    try:
        async with asyncio.timeout(timeout):
            writer.write(connecting.opening(name, settings, then))
            try:
                await writer.drain()
            except ConnectionError:
                pass  # a daemon that refuses us wrote why before it closed: read it
            return reader, writer, connecting.welcome_of(await framing.read_body(reader))
    except (OSError, FrameError) as err:
        writer.close()
        raise connecting.unfinished(err) from None
    except BaseException:
        writer.close()
        raise
