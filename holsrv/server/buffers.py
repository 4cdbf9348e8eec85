"""Which text a file's server gets: an editor's buffer while one holds the file, else the disk's.

One owner for one text per server.  While an editor (`holctl lsp`) has a
file open, its buffer is the text the file's server checks: the editor's
edits are synced, and nothing sends the disk's text over it.  Every sync
asks here: a call's (`over`), and the pool's with no call (`read`): a
server that has just started opening its file (`launch`), a successor
catching up and an edit forwarded to it (`successor`), a write noticed on
disk (`scriptwatch`, which only asks whether an editor holds the file).
Agents still read the disk: when buffer and disk agree they share the one
check; when they differ an answer is about the buffer and says so
(`unsaved_reason`).  When the editor closes the file or goes away, the disk
is the truth again.  The pool owns the one `Buffers` (it syncs with no
call); the editors' channels above it fill it.  Bookkeeping and a file
read: no HOL, no sockets.

Whether an editor's document keeps its file's *server* (from idleness,
eviction, across a replacement) is the pool's `holds`: that is about a
server's life, this about its text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from holsrv.disk.files import Script, read_steps
from holsrv.errors import EditorUnsaved
from holsrv.text import stepping


@dataclass
class Buffer:
    """The text one editor has of one file."""

    editor: str  # the editor's name, for status and messages
    channel: object  # the editor's channel (a second editor is refused)
    owner: object  # the open document that holds it (a reopened one is another)
    script: Script  # the buffer, as a script: path, bytes, text and content hash


class Buffers:
    """The buffers editors hold, by file, and the text each file's server should have."""

    def __init__(self) -> None:
        self._held: dict[Path, Buffer] = {}
        self._channels: dict[object, tuple[str, Callable[[], int]]] = {}  # name, frames dropped

    def attach(self, channel: object, editor: str, dropped: Callable[[], int]) -> None:
        self._channels[channel] = (editor, dropped)

    def detach(self, channel: object) -> None:
        self._channels.pop(channel, None)

    def attached(self) -> list[tuple[str, list[Buffer], int]]:
        """Each attached editor's name, buffers and count of frames dropped for reading slowly."""
        return [
            (name, [b for b in self._held.values() if b.channel is channel], dropped())
            for channel, (name, dropped) in self._channels.items()
        ]

    def hold(self, channel: object, owner: object, editor: str, script: Script) -> None:
        """`owner`, a document of `channel`, opened `script.path` with `script`'s text (or changed it to that)."""
        held = self._held.get(script.path)
        if held is not None and held.channel is not channel:
            raise EditorUnsaved(
                f"{script.path.name} is already open in another editor ({held.editor}) through holctl lsp: "
                "one file's server checks one text. Close it there first."
            )
        self._held[script.path] = Buffer(editor, channel, owner, script)

    def release(self, owner: object, path: Path) -> bool:
        """`owner` closed `path` (or went away); True if it held it."""
        held = self._held.get(path)
        if held is None or held.owner is not owner:
            return False
        del self._held[path]
        return True

    def holder(self, path: Path) -> Buffer | None:
        return self._held.get(path)

    def text(self, path: Path) -> Script | None:
        """The buffer an editor holds of `path`, if one does."""
        held = self._held.get(path)
        return held.script if held is not None else None

    def holds(self, path: Path) -> bool:
        """Whether an editor holds `path`: its buffer, not the disk, is what the server checks."""
        return path in self._held

    async def read(self, path: Path) -> Script:
        """The text `path`'s server should have now: the editor's buffer if one holds it, else the
        file as it is on disk (read in slices)."""
        held = self.text(path)
        if held is not None:
            return held
        return await stepping.sliced(read_steps(str(path)))

    def over(self, script: Script) -> Script:
        """`script`, a text of its file, unless an editor holds the file: then its buffer."""
        return self.text(script.path) or script

    def unsaved(self, disk: Script) -> Buffer | None:
        """The editor's buffer of `disk`'s file if it differs from the disk."""
        held = self._held.get(disk.path)
        return held if held is not None and held.script.hash != disk.hash else None

    def unsaved_reason(self, disk: Script, about: str) -> str:
        """The freshness reason of an answer about content `about` while an editor holds
        `disk`'s file with other text, or "" if it does not (or the answer is not about it)."""
        held = self.unsaved(disk)
        if held is None or held.script.hash != about:
            return ""
        return (
            f"an editor has unsaved changes to this file: this answer is about the editor's text (content "
            f"{about[:12]}), not the file on disk (content {disk.hash[:12]})"
        )

    def refuse_trial(self, disk: Script) -> None:
        """EditorUnsaved if an editor holds `disk`'s file with other text: a trial would put its
        candidates into the text the editor is checking, and give the server the disk's back."""
        held = self.unsaved(disk)
        if held is not None:
            raise EditorUnsaved(
                f"{disk.path.name} has unsaved changes in an editor ({held.editor}): its server checks the "
                "editor's text, and a trial would replace it. Save the file in the editor (or close it), "
                "then call try again."
            )

