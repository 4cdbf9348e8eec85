"""Which text a file's server should have: the editor's buffer while an editor holds the file, else the disk's.

Every sync the pool makes with no call asks this one place: a server that
has just started opening its file (`launch`), a successor catching up and
an edit forwarded to it (`successor`), a write noticed on disk
(`scriptwatch`, which only asks whether an editor holds the file).  The pool
knows no editors (they are above it), only their buffers: it makes the
buffers' object and gives its `text` as `held`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from holsrv.disk import files
from holsrv.text import stepping


class TextSource:
    def __init__(self, held: Callable[[Path], files.Script | None]) -> None:
        self.held = held  # the text an editor (`holctl lsp`) holds of a file, None when none does

    def holds(self, path: Path) -> bool:
        """Whether an editor holds `path`: its buffer, not the disk, is what the server checks."""
        return self.held(path) is not None

    async def read(self, path: Path) -> files.Script:
        """The text `path`'s server should have now: the editor's buffer if one holds it, else the
        file as it is on disk (read in slices)."""
        held = self.held(path)
        if held is not None:
            return held
        return await stepping.sliced(files.read_steps(str(path)))

    def over(self, script: files.Script) -> files.Script:
        """`script`, a text of its file, unless an editor holds the file: then its buffer."""
        return self.held(script.path) or script
