"""The daemon's side of what an agent sees: stop, backoff on a fixed file, symbol pages, readable messages."""

from __future__ import annotations

import socket

import pytest

from holsrv import errors
from holsrv.lsp import hol
from holsrv.rpc import framing
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, pid_alive, wait_until

CRASHING = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "CRASH_TAC")


def test_a_fixed_file_restarts_at_once_despite_the_crash_backoff(daemon_factory, write_script):
    daemon = daemon_factory(restart_backoff_s=60)
    path = write_script(CRASHING)
    for _ in range(2):
        with pytest.raises(errors.ServerDied):
            daemon.call(m.Diagnostics(str(path), wait=20))
    with pytest.raises(errors.ServerDied, match="not restarting for another"):
        daemon.call(m.Diagnostics(str(path), wait=20))
    path.write_text(GOOD_SCRIPT)  # the user fixed the proof that crashed it
    fixed = daemon.call(m.Diagnostics(str(path), wait=20))
    assert fixed.verdict == "OK" and fixed.server.start == "restarted"


def test_stop_frees_a_files_server_and_the_next_call_starts_another(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    first = daemon.call(m.Diagnostics(str(path), wait=20))
    stopped = daemon.call(m.Stop(str(path)))
    assert stopped.pid == first.server.pid and "Stopped the HOL server" in stopped.message
    wait_until(lambda: not pid_alive(first.server.pid), what="the stopped server to exit")
    again = daemon.call(m.Stop(str(path)))
    assert again.pid is None and "No HOL server" in again.message
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert after.verdict == "OK" and after.server.pid != first.server.pid


def test_a_stopped_server_leaves_status_and_the_next_call_says_it_was_stopped(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    daemon.call(m.Stop(str(path)))  # answers once the server has stopped
    assert daemon.call(m.Status()).sessions == []
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert after.server.start == "restarted" and "the previous one was stopped" in after.server.note
    assert [s.pid for s in daemon.call(m.Status()).sessions] == [after.server.pid]


def test_servers_busy_names_the_busy_servers_and_offers_stop(daemon_factory, write_script, tmp_path):
    daemon = daemon_factory(max_servers=1)
    looping = write_script(GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC"), "loopScript.sml")
    daemon.call(m.Diagnostics(str(looping), wait=1))  # its proof keeps it busy
    other = write_script(GOOD_SCRIPT, "otherScript.sml")
    with pytest.raises(errors.ServerBusy) as caught:
        daemon.call(m.Diagnostics(str(other), wait=5))
    message = str(caught.value)
    assert "loopScript.sml" in message and "stop" in message and "restart FILE" not in message


def test_sml_byte_escapes_in_hol_messages_reach_the_agent_as_characters():
    assert hol.readable(r"Type error: \206\177 list") == "Type error: α list"
    assert hol.readable("found \x07 here") == "found \\x07 here"
    assert hol.readable(r"not UTF-8: \255") == r"not UTF-8: \255"


def test_workspace_symbol_gives_statements_short_locations_and_pages(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    first = daemon.call(m.WorkspaceSymbol(str(path), "ADD", limit=2))
    assert len(first.symbols) == 2 and first.page == 1 and first.more == first.total - 2 > 0
    assert all(s.statement.startswith("⊢ ") for s in first.symbols)
    stored = [s for s in first.symbols + daemon.call(m.WorkspaceSymbol(str(path), "ADD_C")).symbols
              if s.theory != "this file"]
    assert stored and all(s.path.startswith("$HOLDIR/src/") for s in stored)
    second = daemon.call(m.WorkspaceSymbol(str(path), "ADD", limit=2, page=2))
    assert {s.name for s in second.symbols}.isdisjoint({s.name for s in first.symbols})
    mine = daemon.call(m.WorkspaceSymbol(str(path), "conj_c"))
    [found] = [s for s in mine.symbols if s.name == "conj_comm"]
    assert found.theory == "this file" and found.path == path.name
    assert found.statement == "⊢ !p q. p /\\ q ==> q /\\ p"


def test_workspace_symbol_refuses_a_page_size_past_its_bound(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    with pytest.raises(errors.BadRequest, match="limit must be"):
        daemon.call(m.WorkspaceSymbol(str(path), "ADD", limit=0))


def test_completion_lists_each_name_once(daemon, write_script):
    text = GOOD_SCRIPT + "\nTheorem use:\n  T\nProof\n  ACCEPT_TAC add\nQED\n"
    path = write_script(text)
    daemon.call(m.Diagnostics(str(path), wait=20))
    line = text.split("\n").index("  ACCEPT_TAC add") + 1
    reply = daemon.call(m.Completion(str(path), line, len("  ACCEPT_TAC add") + 1))
    labels = [i.label for i in reply.items]
    assert "add0" in labels and len(labels) == len(set(labels)) and reply.total == len(labels)


def test_a_diagnostics_call_that_asks_for_progress_gets_progress_frames_before_its_answer(daemon, write_script):
    # A proof that never ends keeps the call waiting (and reporting) for its whole wait.
    path = write_script(GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC"))
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(str(daemon.socket))
        sock.sendall(framing.encode(m.Hello(protocol=m.PROTOCOL_VERSION, client="agent")))
        assert isinstance(framing.decode(framing.reply_decoder, framing.recv_body(sock)), m.Welcome)
        sock.sendall(framing.encode(m.Diagnostics(str(path), wait=4, progress=True)))
        frames = []
        while not frames or isinstance(frames[-1], m.Progress):
            frames.append(framing.decode(framing.reply_decoder, framing.recv_body(sock)))
    *progress, result = frames
    assert isinstance(result, m.DiagnosticsResult) and result.verdict == "INCOMPLETE"
    assert all(isinstance(p, m.Progress) for p in progress)
    assert m.Progress("checking proofs: conj_comm", done=1, total=2) in progress
