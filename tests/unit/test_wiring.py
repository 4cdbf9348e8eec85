"""The objects the daemon is made of are whole once built: what one needs from the settings or from
another is given to its constructor, never assigned afterwards."""

from __future__ import annotations

import asyncio
from pathlib import Path

from holsrv.answers.cache import AnswerCache
from holsrv.answers.common import Context
from holsrv.config.settings import Settings
from holsrv.disk import files
from holsrv.pool.pool import Pool


def test_the_answers_ask_hol_and_git_within_the_daemons_request_timeout(tmp_path: Path):
    async def made() -> Context:  # the pool's locks belong to a loop
        settings = Settings(socket=tmp_path / "s.sock", request_timeout_s=7.5)
        return Context(Pool(settings), AnswerCache(4), settings)

    ctx = asyncio.run(made())
    assert ctx.ancestor_cheats.timeout_s == 7.5
    assert ctx.head_notes.timeout_s == 7.5


def test_a_buffer_an_editor_holds_is_what_the_pools_syncs_send_and_what_the_answers_see(tmp_path: Path):
    async def made() -> Context:
        settings = Settings(socket=tmp_path / "s.sock")
        return Context(Pool(settings), AnswerCache(4), settings)

    ctx = asyncio.run(made())
    path = tmp_path / "demoScript.sml"
    disk = files.Script(path, b"disk", "disk", "d" * 64)
    buffer = files.Script(path, b"buffer", "buffer", "b" * 64)
    assert ctx.pool.texts.over(disk) is disk and not ctx.pool.scriptwatch.editor_holds(path)
    ctx.editors.hold(channel := object(), channel, "pytest-lsp", buffer)
    assert ctx.pool.texts.over(disk) is buffer  # a sync with no call sends the buffer
    assert ctx.pool.scriptwatch.editor_holds(path)  # a write to the disk is not synced over it
    assert ctx.editors.unsaved(disk) is not None  # and an answer about the disk says it differs
