"""A JSON-RPC client for one `hol lsp` process: ids, futures, notifications.

Knows the LSP wire and HOL's handshake rules (docs/protocol.md#handshake), nothing of
the daemon.  `run()` reads until the server's stdout ends; then every
pending request fails with the reason, so no caller waits on a dead server.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from holsrv.errors import FrameError, LspError, ServerDied, ServerTimeout
from holsrv.lsp import framing
from holsrv.text import stepping

log = logging.getLogger(__name__)

# A notification's handler; what it returns, if anything, is awaited before the
# next message is read (a large notification folded in slices).
Notify = Callable[[str, Any], Awaitable[None] | None]
@dataclass(frozen=True)
class Owed:
    """A reply the server owes: to request `method` sent at `sent`, due by `due` (monotonic).

    A request on a short leash (a goal-state walk) is due `letgo_s` after it
    was sent; any other is due `letgo_s` after the daemon gave up on it and
    sent `$/cancelRequest`, which HOL answers for every request it can
    interrupt (docs/protocol.md#cancellation).  A reply that never comes by then means the
    server will not let go of the work (see `holsrv.server.runaway`).
    """

    method: str
    sent: float
    due: float
    line0: int | None = None  # the line the request is about (a walk's), if any


@dataclass(frozen=True)
class Hung:
    """A request the server let time out without a word, and when it was sent (monotonic)."""

    method: str
    timeout: float
    since: float



class LspClient:
    """Speaks LSP to one server over `reader`/`writer`; `on_notify` gets every notification."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, on_notify: Notify,
        hung_after: float = float("inf"), typed_params: Mapping[str, type] | None = None,
        letgo_s: float = float("inf"), leashed: frozenset[str] = frozenset(),
    ) -> None:
        """`typed_params`: notifications whose params `on_notify` gets as structs (see `framing.decode`)."""
        self._reader = reader
        self._writer = writer
        self._on_notify = on_notify
        self._typed = typed_params
        self._pending: dict[int, asyncio.Future] = {}
        self._next_id = 1
        self._closed: Exception | None = None
        self.position_encoding = "utf-8"
        self.server_info: dict = {}
        self.capabilities: dict = {}
        # A request that times out unanswered, from a server that has said
        # nothing at all for `hung_after` seconds, marks it hung: later
        # requests fail at once instead of each waiting out its timeout.  Any
        # message from the server clears the mark (a busy server that is
        # compiling still sends notifications, a late answer heals a false
        # alarm; a stopped one sends nothing).
        self.hung_after = hung_after
        self.hung: Hung | None = None
        self._heard = time.monotonic()
        # Replies the server owes, by request id, and how long it may take to
        # let go of a request (`Owed`); `leashed`: the methods due from sending.
        self.owed: dict[int, Owed] = {}
        self.letgo_s = letgo_s
        self.leashed = leashed
        # The bytes of a message read in part (its header, while its body comes), and whether a large
        # notification is being folded in: what a handover to a successor daemon must account for.
        self._taken = bytearray()
        self._folding = False

    @property
    def closed_reason(self) -> Exception | None:
        """Why reading stopped (None while it goes on)."""
        return self._closed

    async def run(self) -> None:
        """Read messages until end of stream or a broken frame; then fail what is pending."""
        reason: Exception = ServerDied("the HOL server closed its output")
        try:
            while (message := await framing.read_message(self._reader, self._typed, self._taken)) is not None:
                folding = self._dispatch(message)
                if folding is not None:  # a large notification, folded in slices: before the next message
                    self._folding = True
                    try:
                        await folding
                    except Exception:
                        log.exception("notification handler failed on %s", message["method"])
                    finally:
                        self._folding = False
        except FrameError as err:
            reason = ServerDied(f"the HOL server broke the protocol: {err}")
        except (ConnectionError, OSError) as err:
            reason = ServerDied(f"lost the HOL server's output: {err}")
        finally:
            self._fail_pending(reason)

    def _dispatch(self, message: dict) -> Awaitable[None] | None:
        """Handle one message; what `on_notify` returned to be awaited, if anything."""
        self._heard = time.monotonic()
        self.hung = None
        if "method" in message:
            if "id" in message:
                # Only window/workDoneProgress/create; HOL never waits for the
                # reply, so one that cannot be sent (input closed) is no loss.
                with contextlib.suppress(ServerDied, ConnectionError):
                    self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            else:
                try:
                    return self._on_notify(message["method"], message.get("params") or {})
                except Exception:
                    log.exception("notification handler failed on %s", message["method"])
            return None
        request_id = message.get("id")
        if isinstance(request_id, int):
            self.owed.pop(request_id, None)
        future = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if future is None or future.done():
            return None  # the answer to a request we gave up on (or to none of ours)
        if "error" in message:
            err = message["error"] or {}
            code = err.get("code")
            # The code in its own field: HOL's quirks are told apart by it (-32600
            # for an unknown method, docs/protocol.md#json-rpc), not by sniffing the message.
            rpc_code = code if isinstance(code, int) and not isinstance(code, bool) else None
            future.set_exception(LspError(str(err.get("message", "")), rpc_code=rpc_code))
        else:
            future.set_result(message.get("result"))
        return None

    def _fail_pending(self, reason: Exception) -> None:
        self._closed = reason
        self.owed.clear()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(reason)
        self._pending.clear()

    def _send(self, message: dict | list[bytes]) -> None:
        """Write one message (or its frame, already encoded) whole."""
        if self._closed is not None:
            raise self._closed
        if self._writer.is_closing():
            raise ServerDied("the HOL server's input is closed")
        self._writer.writelines([framing.encode(message)] if isinstance(message, dict) else message)

    async def notify(self, method: str, params: dict | None, timeout: float) -> None:
        """Send a notification; a server that will not take it within `timeout` is stuck.
        A script's text (didOpen, didChange) is encoded in slices, the loop free between them."""
        self._send(await stepping.sliced(framing.encode_steps({"jsonrpc": "2.0", "method": method, "params": params})))
        await self._drain(timeout)

    async def request(self, method: str, params: dict | None, timeout: float):
        """Send a request and await its result; `$/cancelRequest` it on timeout, and
        when the caller is cancelled (its client went away)."""
        request_id = self._next_id
        self._next_id += 1
        future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        sent = time.monotonic()
        deadline = asyncio.get_running_loop().time() + timeout
        leashed = method in self.leashed
        line0 = ((params or {}).get("position") or {}).get("line")
        self.owed[request_id] = Owed(method, sent, sent + self.letgo_s if leashed else float("inf"),
                                     line0 if isinstance(line0, int) else None)
        try:
            self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            await self._drain(timeout)
            async with asyncio.timeout_at(deadline):
                return await future
        except TimeoutError:
            self._cancel(request_id)
            if self._heard < sent and time.monotonic() - self._heard >= self.hung_after:
                self.hung = Hung(method, timeout, sent)
            raise ServerTimeout(
                f"the HOL server did not answer {method} within {_seconds(timeout)}. It may be busy (a long "
                "walk or eval) or hung: `holctl status` shows `hung` for a server that has said nothing since. "
                "Ask again with a longer wait, or restart the file's server if it stays hung."
            ) from None
        except asyncio.CancelledError:
            self._cancel(request_id)  # nobody waits for the answer: stop HOL working on it
            raise
        except ServerDied:
            self.owed.pop(request_id, None)  # never sent, or the server is gone: nothing is owed
            raise
        finally:
            self._pending.pop(request_id, None)

    # -- handover (`holsrv.pool.handover`) ------------------------------------

    def quiet(self) -> bool:
        """Nothing owed either way: no request awaits its reply, no notification is half folded in,
        nothing we wrote waits to reach the server.  Only then can another client take over."""
        pending = self._writer.transport.get_write_buffer_size() if not self._writer.is_closing() else 0
        return not self._pending and not self.owed and not self._folding and not pending and self._closed is None

    def export(self) -> dict:
        """What a successor's client needs to go on where this one stops: the ids, the handshake's
        results, and the part of a message already taken from the stream (see `framing.read_message`)."""
        return {"next_id": self._next_id, "position_encoding": self.position_encoding,
                "server_info": self.server_info, "capabilities": self.capabilities, "taken": bytes(self._taken)}

    def adopt(self, state: dict) -> None:
        """Go on from a predecessor's `export` (whose `taken` bytes the reader was given first)."""
        self._next_id = int(state["next_id"])
        self.position_encoding = str(state["position_encoding"])
        self.server_info = dict(state["server_info"])
        self.capabilities = dict(state["capabilities"])

    def hung_message(self, server: str) -> str:
        hung = self.hung
        assert hung is not None
        return (
            f"{server} is hung: it did not answer {hung.method} within {_seconds(hung.timeout)} and has "
            f"said nothing for {time.monotonic() - hung.since:.0f}s, so the daemon does not wait on it again. "
            f"Unless it answers within {_seconds(self.letgo_s)} of being told to stop, the daemon replaces it "
            "with a fresh server (a runaway): call again then."
        )

    def _cancel(self, request_id: int) -> None:
        # Buffered, not drained: a server too busy to answer may be too busy
        # to read, and giving up must not wait on it.
        owed = self.owed.get(request_id)
        if owed is not None:  # it must let go within letgo_s from now (a walk: from its sending)
            self.owed[request_id] = dataclasses.replace(owed, due=min(owed.due, time.monotonic() + self.letgo_s))
        with contextlib.suppress(ServerDied, ConnectionError):
            self._send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": request_id}})

    def overdue(self, now: float) -> Owed | None:
        """The oldest reply the server owes past its due time (see `Owed`), if any."""
        late = [owed for owed in self.owed.values() if owed.due <= now]
        return min(late, key=lambda owed: owed.sent, default=None)

    async def _drain(self, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.drain()
        except TimeoutError:
            raise ServerDied(f"the HOL server stopped reading its input (nothing taken for {timeout:.0f}s)") from None
        except (ConnectionError, OSError) as err:
            raise ServerDied(f"cannot write to the HOL server: {err}") from None

    async def initialize(self, timeout: float, encodings: tuple[str, ...] = ("utf-8", "utf-16")) -> dict:
        """The strict handshake: initialize, then `initialized` before anything else."""
        result = await self.request(
            "initialize",
            {
                "processId": None,
                "capabilities": {
                    "general": {"positionEncodings": list(encodings)},
                    "textDocument": {"documentSymbol": {"hierarchicalDocumentSymbolSupport": True}},
                },
            },
            timeout,
        )
        await self.notify("initialized", {}, timeout)
        result = result or {}
        # A server that names no encoding is the July 2026 one, which counts
        # bytes whatever the client offers (docs/protocol.md#the-july-2026-server).
        self.capabilities = result.get("capabilities") or {}
        self.position_encoding = self.capabilities.get("positionEncoding", "utf-8")
        self.server_info = result.get("serverInfo", {})
        return result

    async def shutdown(self, timeout: float) -> None:
        """`shutdown` then `exit`; errors mean the server is already gone."""
        try:
            await self.request("shutdown", None, timeout)
            await self.notify("exit", None, timeout)
        except (ServerDied, ServerTimeout, LspError, ConnectionError):
            pass


def _seconds(timeout: float) -> str:
    return f"{timeout:.0f}s" if timeout >= 10 else f"{timeout:.1f}s"
