"""What a HOL server tells us unasked, folded into its file's state.

Progress, diagnostics, proof states and HOL's messages to the user arrive as
notifications; each is folded into the `FileState` (a large proof batch in
slices, so the loop is never held), and whoever waits is woken.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from holsrv.lsp import replies
from holsrv.server.fanout import Fanout
from holsrv.text import stepping
from holsrv.verdict.filestate import FileState


class Notifications:
    """The notification handler of one server's LSP client."""

    def __init__(
        self, file: FileState, clock: Callable[[], float], wake: Callable[[], None], resync: Callable[[], None]
    ) -> None:
        self.file = file
        self.messages: deque[str] = deque(maxlen=10)  # HOL's window/showMessage texts
        self._clock = clock
        self._wake = wake
        self._resync = resync  # resend the whole text, in a task of the caller's
        self.fanout = Fanout()  # editors attached to this server's file (`holctl lsp`)

    def __call__(self, method: str, params: Any) -> Awaitable[None] | None:
        """Fold a notification in; a large proof batch is folded in slices (awaited
        by the reader before the next message)."""
        self.fanout.publish(method, params)
        if _large(params):
            return self._fold(method, params)
        if method == "window/showMessage":
            # HOL's word to the user (a heap it could not load, a second
            # script): the agent is the user here, so it is kept for answers.
            self.messages.append(str(params.get("message", ""))[:2000])
        if method == "$/progress" and (params.get("value") or {}).get("kind") == "begin":
            self.file.pass_began(self._clock())  # one server, one file: it is ours
            self._wake()
        if method == "$/hol/desync" and params.get("uri") == self.file.uri:
            # We only send whole-document changes, so this should never come;
            # if it does, resend the whole text (docs/protocol.md#desync).
            self._resync()
        if self.file.apply(method, params, self._clock()):
            self._wake()
        return None

    async def _fold(self, method: str, params: Any) -> None:
        if await stepping.sliced(self.file.apply_steps(method, params, self._clock())):
            self._wake()


def _large(params: Any) -> bool:
    """A notification to fold in slices: a proof batch or a census of thousands."""
    if isinstance(params, replies.ProofStates):
        return len(params.states) > stepping.ITEMS_PER_STEP
    return isinstance(params, dict) and len(params.get("declared") or ()) > stepping.ITEMS_PER_STEP
