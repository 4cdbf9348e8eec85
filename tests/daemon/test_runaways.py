"""Runaways, against a fake HOL whose goal-state walker has no time limit (transcript
walk-of-a-loop): a walk of a looping tactic never ends and holds the whole server.

The daemon must not start such a walk where it has reason to think a tactic
loops, and must replace at once a server that holds on to its work: the
calls that waited on it are answered from the fresh server, which is told
which proof looped.
"""

from __future__ import annotations

import asyncio
import time
from unittest import mock

import pytest
from test_trials import LINE as TRIAL_LINE
from test_trials import SCRIPT as TRIAL_SCRIPT

from holctl.render import render
from holsrv.errors import ServerTimeout
from holsrv.lsp import framing
from holsrv.lsp.client import LspClient
from holsrv.rpc import messages as m
from holsrv.server.runaway import LEASHED
from holsrv.verdict.filestate import FileState

from conftest import pid_alive, wait_until

LOOPING = """\
Theory demo
Ancestors arithmetic

Theorem add0:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

Theorem spins:
  !p q. p /\\ q ==> q
Proof
  REPEAT ALL_TAC >> simp[]
QED
"""
LOOP_LINE = 13  # `  REPEAT ALL_TAC >> simp[]`
FIXED = LOOPING.replace("REPEAT ALL_TAC >> simp[]", "rpt strip_tac")
LETGO_S = 2.0


def server_pid(daemon, path) -> int:
    """The pid of the file's server, started (and the file opened) if need be."""
    daemon.call(m.Diagnostics(str(path), wait=0))

    async def pid():
        session = daemon.daemon.pool.sessions[path]
        await session.wait_started(30)
        return session.pid
    return daemon.run(pid())


@pytest.fixture
def unlimited(monkeypatch):
    """The fake's walker has no time limit, and a held server grows as the recorded one did."""
    monkeypatch.setenv("FAKE_HOL_WALKER", "unlimited")


def test_a_walk_that_never_ends_is_answered_from_a_fresh_server_that_names_the_loop(
        unlimited, daemon_factory, write_script):
    daemon = daemon_factory(letgo_s=LETGO_S)
    path = write_script(LOOPING)
    old = server_pid(daemon, path)
    # Asked at once, before the proof has checked long enough to look like a loop: HOL is asked.
    answer = daemon.call(m.GoalState(str(path), LOOP_LINE, 27, wait=60), timeout=120)
    assert answer.state == "looping", answer
    assert "Proof spins (line 10) loops as it is" in answer.message
    assert "did not end within 2.0s" in answer.server.note and f"pid {old} →" in answer.server.note
    assert "This answer is from the new one" in answer.server.note
    assert answer.server.pid != old
    wait_until(lambda: not pid_alive(old), what="the runaway killed")
    status = daemon.call(m.Status())
    assert status.runaways == 1 and "goal-state walk of proof spins" in status.last_runaway
    assert "runaways: 1 server(s) replaced" in render(status)
    # The next answers name the loop, and do not wait on it.
    verdict = daemon.call(m.Diagnostics(str(path), wait=30), timeout=120)
    assert any(w.startswith("LOOPS: proof spins (line 10)") for w in verdict.warnings), verdict.warnings
    assert "spins (line 10) loops as written" in verdict.headline, verdict.headline
    assert verdict.server.pid == answer.server.pid
    # Fixed, it is walked again and the warning is gone.
    path.write_text(FIXED, encoding="utf-8")
    fixed = daemon.call(m.Diagnostics(str(path), wait=30), timeout=120)
    assert fixed.verdict == "OK", fixed.headline
    assert not any("LOOPS" in w for w in fixed.warnings)
    goals = daemon.call(m.GoalState(str(path), LOOP_LINE, wait=30), timeout=120)
    assert goals.state in ("goals", "proved_here"), goals


def test_a_proof_checking_far_longer_than_the_rest_is_not_walked(unlimited, daemon_factory, write_script):
    daemon = daemon_factory(letgo_s=LETGO_S, slow_after_s=1.0)
    path = write_script(LOOPING)
    old = server_pid(daemon, path)
    # add0 has finished and spins has checked for over slow_after_s: far slower than the rest.
    verdict = daemon.call(m.Diagnostics(str(path), wait=30), timeout=120)
    assert any("spins" in w for w in verdict.warnings), verdict
    answer = daemon.call(m.GoalState(str(path), LOOP_LINE, 27, wait=30), timeout=120)
    assert answer.state == "looping", answer
    assert "Proof spins (line 10) has been checking for" in answer.message
    assert "far longer than the rest, so it may loop" in answer.message
    # HOL was not asked: the server is the same, and not a runaway.
    assert answer.server.pid == old and not answer.server.note
    assert daemon.run(_runaways(daemon)) == 0


async def _runaways(daemon) -> int:
    return daemon.daemon.pool.runaways


def test_a_fixed_loop_hol_does_not_let_go_of_is_answered_from_a_fresh_server(daemon_factory, write_script, monkeypatch):
    # HOL's pool lets go of a looping check 1.5-2.6 s after an edit (walk-of-a-loop,
    # candidate-loops); this one would take a minute, past letgo_s.
    monkeypatch.setenv("FAKE_HOL_STOP_MS", "60000")
    daemon = daemon_factory(letgo_s=LETGO_S)
    path = write_script(LOOPING.replace("REPEAT ALL_TAC >> simp[]", "LOOP_TAC"))
    old = server_pid(daemon, path)
    daemon.call(m.Diagnostics(str(path), wait=1))  # checking the loop
    path.write_text(FIXED, encoding="utf-8")
    fixed = daemon.call(m.Diagnostics(str(path), wait=60), timeout=120)
    assert fixed.verdict == "OK", fixed.headline
    assert fixed.server.pid != old
    assert "HOL did not start compiling the text it was sent" in fixed.server.note, fixed.server
    assert "This answer is from the new one" in fixed.server.note
    wait_until(lambda: not pid_alive(old), what="the runaway killed")


def test_a_server_past_the_hard_footprint_is_replaced_whatever_it_is_doing(
        unlimited, daemon_factory, write_script, monkeypatch):
    # A held walk grows 100 MB/s past --maxheap, as the recorded one did; letgo_s is
    # long here, so only the footprint makes it a runaway.
    monkeypatch.setenv("FAKE_HOL_WALK_GROW_MB_PER_S", "100")
    daemon = daemon_factory(letgo_s=120.0, max_heap_mb=200, hard_footprint_pct=125, memory_budget_mb=0)
    path = write_script(LOOPING)
    old = server_pid(daemon, path)
    answer = daemon.call(m.GoalState(str(path), LOOP_LINE, 27, wait=60), timeout=120)
    assert answer.state == "looping", answer
    assert "past the hard limit of 250 MB" in answer.server.note, answer.server
    assert answer.server.pid != old
    wait_until(lambda: not pid_alive(old), what="the runaway killed")


def test_a_looping_candidate_is_cut_off_unwalked_and_the_next_one_runs_on_the_same_server(
        unlimited, daemon_factory, write_script):
    daemon = daemon_factory(letgo_s=LETGO_S)
    path = write_script(TRIAL_SCRIPT)
    old = server_pid(daemon, path)
    result = daemon.call(m.Try(str(path), TRIAL_LINE, ["REPEAT ALL_TAC", "simp[]"], timeout=3.0), timeout=120)
    loops, good = result.candidates
    assert loops.state == "timed_out" and not loops.goals, loops
    assert good.state == "proved", good
    assert result.server.pid == old and daemon.run(_runaways(daemon)) == 0
    assert daemon.call(m.Diagnostics(str(path), wait=30)).verdict == "OK"


def test_a_trial_whose_server_runs_away_tries_the_rest_on_the_fresh_one(unlimited, daemon_factory, write_script):
    # The goals before line 8 are walked through the loop on line 7: that walk never ends.
    daemon = daemon_factory(letgo_s=LETGO_S)
    path = write_script(TRIAL_SCRIPT.replace("rpt strip_tac >>\n", "REPEAT ALL_TAC >>\n", 1))
    old = server_pid(daemon, path)
    result = daemon.call(m.Try(str(path), TRIAL_LINE, ["simp[]", "rw[]"], timeout=3.0), timeout=120)
    assert [c.state for c in result.candidates] != ["not_tried", "not_tried"], result
    assert all(c.state != "not_tried" for c in result.candidates), result
    assert result.server.pid != old
    assert "did not end within 2.0s" in result.server.note, result.server


# -- the parts, with no daemon ---------------------------------------------------


@pytest.mark.asyncio
async def test_a_walk_is_owed_letgo_s_after_it_is_sent_and_any_other_request_letgo_s_after_its_cancel():
    reader = asyncio.StreamReader()
    writer = mock.Mock()
    writer.is_closing.return_value = False
    writer.drain = mock.AsyncMock()
    client = LspClient(reader, writer, lambda method, params: None, letgo_s=0.5, leashed=LEASHED)
    reading = asyncio.create_task(client.run())
    walk = asyncio.create_task(client.request("$/hol/goalState", {"position": {"line": 4, "character": 2}}, 30))
    await asyncio.sleep(0)  # sent first
    with pytest.raises(ServerTimeout):
        await client.request("textDocument/hover", {"position": {"line": 1, "character": 0}}, 0.05)
    cancelled = time.monotonic()
    assert client.overdue(time.monotonic()) is None
    late = client.overdue(time.monotonic() + 0.6)
    assert late is not None and (late.method, late.line0) == ("$/hol/goalState", 4)
    # The hover is due letgo_s after its cancel, not before.
    hover = [o for o in client.owed.values() if o.method == "textDocument/hover"]
    assert len(hover) == 1 and cancelled <= hover[0].due <= time.monotonic() + 0.5
    # Answers, late ones too, pay what is owed.
    reader.feed_data(framing.encode({"jsonrpc": "2.0", "id": 1, "result": None}))
    reader.feed_data(framing.encode({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "Interrupt"}}))
    assert await asyncio.wait_for(walk, 5) is None
    await asyncio.sleep(0)
    assert client.owed == {} and client.overdue(time.monotonic() + 60) is None
    reader.feed_eof()
    await asyncio.wait_for(reading, 5)


def test_a_text_sent_to_an_idle_compile_is_owed_until_hol_says_it_compiles_it():
    file = FileState("file:///p/demoScript.sml")
    file.sent(1, LOOPING, 0.0)
    assert file.untaken_for(5.0) == 0  # an open: the first compile, however long, is not judged
    file.apply("$/compileCompleted", {"uri": file.uri, "version": 1}, 1.0)
    file.sent(2, FIXED, 2.0)
    assert file.untaken_for(9.0) == 7.0
    file.apply("$/proofStates", {"uri": file.uri, "states": [
        {"pos": {"line": 9, "character": 0}, "name": "spins", "status": "cheated"}]}, 3.0)
    assert file.untaken_for(9.0) == 7.0  # the pool letting go of a check is not a compile
    file.sent(3, LOOPING, 4.0)  # a newer text while the first is still untaken: still owed since then
    assert file.untaken_for(9.0) == 7.0
    file.apply("$/compileProgress", {"uri": file.uri, "pos": {"line": 0, "character": 0}}, 5.0)
    assert file.untaken_for(9.0) == 0
    file.sent(4, FIXED, 6.0)  # sent while compiling: a pass is under way, HOL takes it when it can
    assert file.untaken_for(60.0) == 0


@pytest.mark.asyncio
async def test_an_editor_follows_its_file_from_a_runaway_to_the_fresh_server(unlimited, daemon_factory, write_script):
    from test_editor import agent, editor, errors, open_doc, stop, until

    daemon = daemon_factory(letgo_s=LETGO_S)
    path = write_script(LOOPING)
    buffer = LOOPING.replace("gen_tac >> simp[]", 'FAIL_TAC "nope"')  # unsaved: add0 fails in the buffer
    client = await editor(daemon)
    try:
        uri = open_doc(client, path, buffer)
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the buffer's failure, from the first server")
        [row] = (await agent(daemon, m.Status())).sessions
        old = row.pid
        # An agent's walk of the loop holds the server: it is replaced, and the editor follows, with
        # no edit of its own (an editor's document would otherwise say the server was lost).
        answer = await agent(daemon, m.GoalState(str(path), LOOP_LINE, 27, wait=60))
        assert answer.state == "looping" and answer.server.pid != old, answer
        client.diagnostics.clear()
        await until(client, "textDocument/publishDiagnostics", lambda: any("nope" in e for e in errors(client, uri)),
                    "the fresh server's diagnostics of the buffer")
        [row] = (await agent(daemon, m.Status())).sessions
        assert row.pid == answer.server.pid and row.editor == "pytest-lsp", row
    finally:
        await stop(client)


def test_a_loop_is_known_while_its_proof_s_tactics_are_unchanged_and_files_are_bounded(tmp_path):
    from holsrv.server import runaway

    loops = runaway.Loops()
    body = runaway.body_of(LOOPING, "spins")
    assert body is not None and "REPEAT ALL_TAC" in body
    loops.mark(tmp_path / "a", runaway.Loop("spins", 10, body, "it looped"))
    assert list(loops.known(tmp_path / "a", LOOPING)) == ["spins"]
    assert list(loops.known(tmp_path / "a", LOOPING.replace("gen_tac", "Induct"))) == ["spins"]  # another proof
    assert loops.known(tmp_path / "a", FIXED) == {}  # its tactics changed
    assert loops.known(tmp_path / "b", LOOPING) == {}
    for n in range(runaway.MAX_FILES):
        loops.mark(tmp_path / f"f{n}", runaway.Loop("spins", 10, body, "it looped"))
    assert loops.known(tmp_path / "a", LOOPING) == {}  # the oldest file went first
    assert list(loops.known(tmp_path / f"f{runaway.MAX_FILES - 1}", LOOPING)) == ["spins"]
