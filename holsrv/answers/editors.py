"""What `status` says of the editors attached through `holctl lsp`: each editor, and each server's."""

from __future__ import annotations

from pathlib import Path

import msgspec

from holsrv.answers.common import Context, read
from holsrv.errors import HolsrvError
from holsrv.rpc import messages as m


async def _disk_hash(ctx: Context, path: Path) -> str:
    try:
        return (await read(ctx, str(path))).hash  # one stat when the file is unchanged
    except HolsrvError:
        return ""


async def status(ctx: Context) -> list[m.EditorClient]:
    """The attached editors, their open files, and which of them differ from the disk."""
    rows = []
    for name, buffers, dropped in ctx.editors.attached():
        unsaved = [str(b.script.path) for b in buffers if await _disk_hash(ctx, b.script.path) != b.script.hash]
        rows.append(m.EditorClient(
            name, documents=sorted(str(b.script.path) for b in buffers), unsaved=sorted(unsaved), dropped=dropped,
        ))
    return rows


async def marked(ctx: Context, rows: list[m.SessionStatus]) -> list[m.SessionStatus]:
    """`rows` with the editor that holds each server's file, if one does."""
    marked_rows = []
    for row in rows:
        held = ctx.editors.holder(Path(row.file))
        if held is not None:
            unsaved = await _disk_hash(ctx, held.script.path) != held.script.hash
            row = msgspec.structs.replace(row, editor=held.editor, editor_unsaved=unsaved)
        marked_rows.append(row)
    return marked_rows
