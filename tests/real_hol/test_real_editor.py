"""An editor through `holctl lsp` on a real HOL4, an agent's try between its edits: the versions it hears are its own.

Runs only where a real HOL4 is found (see tests/real_hol/test_real_hol.py) and is
skipped otherwise.  A real `hol lsp` labels a publish with the version of
its compile, or its newest version for a verdict (docs/protocol.md#diagnostics), and
the daemon's trial advances that count on the server the editor shares.
"""

from __future__ import annotations

import asyncio

import pytest
from test_editor import agent, errors, notified, stop
from test_editor_versions import Published, change_to, open_at, recording_editor
from test_real_hol import CALL_TIMEOUT_S, WAIT_S, _diagnostics_or_skip, real_hol  # noqa: F401  (a fixture)

from holsrv.rpc import messages as m

SCRIPT = """\
Theory realedit
Ancestors arithmetic

Theorem add0:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

Theorem comm:
  !m n:num. m + n = n + m
Proof
  simp[]
QED
"""
LINE = 7  # `  gen_tac >> simp[]` in add0
BROKEN = SCRIPT.replace("  gen_tac >> simp[]", '  gen_tac >> FAIL_TAC "nope"')


@pytest.mark.asyncio
async def test_a_real_hol_editor_is_told_its_own_versions_around_an_agents_try(
        daemon_factory, write_script, real_hol):  # noqa: F811
    daemon = daemon_factory(hol_bin=real_hol, quiet_s=1.0, start_timeout_s=180, request_timeout_s=120)
    path = write_script(SCRIPT, name="realeditScript.sml")
    assert (await asyncio.to_thread(_diagnostics_or_skip, daemon, path)).verdict == "OK"
    published: list[Published] = []
    client = await recording_editor(daemon, published)

    async def until(holds, what: str) -> None:
        async with asyncio.timeout(WAIT_S):
            while not holds():
                await notified(client, "textDocument/publishDiagnostics", 2.0)
        assert holds(), what

    try:
        uri = open_at(client, path, SCRIPT, 5)
        tried = await asyncio.to_thread(daemon.call, m.Try(str(path), LINE, ["gen_tac >> simp[]"], timeout=60),
                                        CALL_TIMEOUT_S)
        assert tried.candidates[0].state == "proved", tried.candidates[0]
        change_to(client, uri, 6, BROKEN)
        await until(lambda: any("nope" in e for e in errors(client, uri)), "the broken step's failure")
        change_to(client, uri, 7, SCRIPT)  # undone: the text of version 5, now the editor's version 7
        await until(lambda: not errors(client, uri), "the undone text's clean diagnostics")
        after = await agent(daemon, m.Diagnostics(str(path), wait=WAIT_S))
        assert after.verdict == "OK", after.headline
    finally:
        await stop(client)
    told = [p.version for p in published]
    assert set(told) <= {None, 5, 6, 7}, f"versions the editor never sent: {told}"
    assert published[-1].version == 7 and not published[-1].messages, told
    assert all(p.version in (6, 7) for p in published if any("nope" in x for x in p.messages)), told
