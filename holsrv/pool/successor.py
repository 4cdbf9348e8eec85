"""A successor being brought up beside a server it is to replace (see
`replacement`): what it is for, how its status reads, and catching it up
with the file's text (the disk's, or the buffer of an editor that holds it:
`buffers`) and the proofs the old server had checked.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import msgspec

from holsrv.disk import files
from holsrv.errors import HolsrvError
from holsrv.lsp.proofstates import ProofStatus
from holsrv.rpc import messages as m
from holsrv.server.buffers import Buffers
from holsrv.server.session import Session
from holsrv.text import textinfo
from holsrv.verdict.filestate import Phase

log = logging.getLogger(__name__)


class CannotTakeOver(Exception):
    """A successor that must not take over (its compile could not load the ancestors)."""


@dataclass
class Replacement:
    """A successor being brought up for `old`, whose ancestors `rebuilt` changed."""

    old: Session
    new: Session
    rebuilt: list[str]
    since: float
    built: dict[str, float]  # the ancestors' build times when it started
    task: asyncio.Task | None = field(default=None, repr=False)
    # Not a rebuild: the old server's footprint (MB) passed the soft limit, and
    # Poly/ML never gives a grown heap back.  Its answers are not stale.
    bloat_mb: float = 0.0
    # Nor either: why the old server's HOL state is no longer a fresh one's (a verify
    # loaded the built theory into it).  Its answers are not stale either.
    refresh: str = ""

    def cause(self) -> str:
        if self.refresh:
            return self.refresh
        if self.bloat_mb:
            return f"it grew to {self.bloat_mb:.0f} MB, past the soft footprint limit"
        return f"ancestor {', '.join(self.rebuilt)} rebuilt"

    def reason(self) -> str:
        """What the old server's answers say meanwhile ("" when they are as good as ever)."""
        if self.bloat_mb or self.refresh:
            return ""
        return (
            f"STALE: ancestor {', '.join(self.rebuilt)} was rebuilt after this HOL server (pid {self.old.pid}) "
            f"loaded it, so its answers use the old build; {self._successor()} in the background and takes "
            "over by itself once it has caught up. Nothing to do: ask again later."
        )

    def retired_reason(self) -> str:
        """What answers from the old server say once the new one has taken over ("" after a bloat or a refresh)."""
        if self.bloat_mb or self.refresh:
            return ""
        return (
            f"STALE: this answer is from the HOL server for {self.old.path.name} that was replaced because "
            f"ancestor {', '.join(self.rebuilt)} was rebuilt (pid {self.old.pid} → {self.new.pid}); ask again "
            "for the new one's answer."
        )

    def _successor(self) -> str:
        """The successor in words: it has no pid until its process is spawned."""
        if not self.new.pid:
            return "a fresh server is starting"
        doing = "starting (loading its heap)" if self.new.starting else "catching up"
        return f"a fresh server (pid {self.new.pid}) is {doing}"

    def status(self, row: m.SessionStatus, now: float) -> m.SessionStatus:
        """`row`, the old server's status, with this replacement under way."""
        return msgspec.structs.replace(
            row,
            replacing=f"{self.cause()}; the new server is "
            + ("starting" if self.new.starting else "catching up"),
            replacing_since_s=round(now - self.since, 1),
            replacement_pid=self.new.pid,
        )


def caught_up(old: Session, new: Session) -> bool:
    """`new` has compiled its text (or is blocked) and checked every proof of it that `old` had finished checking."""
    if new.data is None or new.phase == Phase.COMPILING:
        return False
    if new.phase == Phase.BLOCKED:  # it checks nothing until its ancestors load: see `catch_up`
        return True
    checking = ProofStatus.CHECKING  # a local, per proof (see `filestate._CHECKING`)
    finished = {name for name, entry in old.file.proofs.items() if entry.status != checking}
    wanted = finished.intersection(textinfo.of(new.file.text).names)
    return all(name in new.file.proofs and new.file.proofs[name].status != checking for name in wanted)


async def catch_up(rep: Replacement, timeout: float, texts: Buffers) -> None:
    """Until `rep.new` has caught up on the file's text now (an editor's buffer, else the disk's)."""
    new = rep.new
    while True:
        # The newest text wins: edits made while it started or compiled.
        script = await texts.read(new.path)
        await textinfo.prepare(script.text)
        await new.sync(script.data, script.text, script.hash)
        if not await new.wait_until(lambda: caught_up(rep.old, new), timeout):
            raise TimeoutError
        if new.phase == Phase.BLOCKED and rep.old.phase != Phase.BLOCKED:
            # Loading a half-written build fails: never trade a working server for that.
            blocked = new.file.blocked or {}
            raise CannotTakeOver(
                f"it could not load its ancestors ({blocked.get('message', 'blocked')}); "
                "is Holmake still running?"
            )
        if (await texts.read(new.path)).data == new.data:
            return


async def forward(rep: Replacement, script: files.Script, texts: Buffers) -> None:
    """Give the successor the text a call just gave the old server (once it has opened the file);
    never the disk's over an editor's buffer."""
    script = texts.over(script)
    if rep.new.alive and rep.new.data is not None and rep.new.data != script.data:
        try:
            await rep.new.sync(script.data, script.text, script.hash)
        except HolsrvError as err:  # its own task reports the failure
            log.info("could not forward the new text of %s to its successor: %s", rep.new.path, err)
