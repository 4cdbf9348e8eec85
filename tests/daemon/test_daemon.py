"""The daemon over its real socket: the vertical slice and bad input."""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import stat
import subprocess
import sys

import msgspec
import pytest

from holsrv import errors
from holsrv.rpc import client as rpc_client
from holsrv.rpc import framing
from holsrv.rpc import messages as m

from conftest import FAKE_HOL, GOOD_SCRIPT, _start_in_thread, pid_alive, wait_until, waiting_call

FAILING = GOOD_SCRIPT + """
Theorem bad:
  1 = 2
Proof
  FAIL_TAC "no way"
QED
"""


def test_diagnostics_on_a_good_script_is_ok_with_a_full_tally(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    result = daemon.call(m.Diagnostics(str(path), wait=20))
    assert result.verdict == "OK", result.headline
    assert result.complete
    assert (result.tally.proved, result.tally.total) == (2, 2)
    assert result.diagnostics == []
    assert result.server.start == "started"


def test_failed_proof_is_a_result_with_the_failure_at_the_failing_step(daemon, write_script):
    path = write_script(FAILING)
    result = daemon.call(m.Diagnostics(str(path), wait=20))
    assert result.verdict == "FAILED"
    assert "bad" in result.headline
    assert (result.tally.proved, result.tally.failed) == (2, 1)
    [diag] = result.diagnostics
    line_of_tactic = FAILING.split("\n").index('  FAIL_TAC "no way"') + 1
    assert (diag.range.line, diag.range.col, diag.severity) == (line_of_tactic, 3, "error")
    assert "no way" in diag.message


def test_goal_state_inside_a_proof_shows_the_goals_after_the_steps_before_it(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    lines = GOOD_SCRIPT.split("\n")
    tactic_line = lines.index("  gen_tac >> simp[]") + 1
    first = daemon.call(m.GoalState(str(path), tactic_line, 3))
    assert first.state == "goals" and first.theorem == "add0" and first.step == 0
    assert [g.goal for g in first.goals] == ["∀n. n + 0 = n"]
    after_gen = daemon.call(m.GoalState(str(path), tactic_line, lines[tactic_line - 1].index("simp") + 1))
    assert after_gen.step == 1
    assert [g.goal for g in after_gen.goals] == ["n + 0 = n"]


def test_goal_state_outside_a_proof_says_so_and_names_the_nearest_proof(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    result = daemon.call(m.GoalState(str(path), 4, 3))
    assert result.state == "not_in_proof"
    assert "not inside a Proof" in result.message and "add0" in result.message


def test_positions_count_characters_on_lines_full_of_unicode(daemon, write_script):
    text = GOOD_SCRIPT.replace("gen_tac >> simp[]", "(* ∀ ⇒ ‘’ *) gen_tac >> simp[]")
    path = write_script(text)
    line = text.split("\n").index("  (* ∀ ⇒ ‘’ *) gen_tac >> simp[]") + 1
    col = "  (* ∀ ⇒ ‘’ *) gen_tac >> simp[]".index("simp") + 1
    result = daemon.call(m.GoalState(str(path), line, col))
    assert (result.state, result.step) == ("goals", 1)


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda d: str(d / "missingScript.sml"), "file_not_found"),
        (lambda d: _mkdir(d / "dirScript.sml"), "not_a_file"),
        (lambda d: _write_bytes(d / "notes.txt", b"hello\n"), "bad_request"),
        (lambda d: _write_bytes(d / "latinScript.sml", b"Theory latin\n(* caf\xe9 *)\n"), "not_utf8"),
    ],
    ids=["missing", "directory", "not-utf8", "not-sml"],
)
def test_bad_files_get_a_coded_error_and_start_no_server(daemon, tmp_path, make, code):
    with pytest.raises(errors.HolsrvError) as caught:
        daemon.call(m.Diagnostics(make(tmp_path), wait=1))
    assert caught.value.code == code
    assert daemon.call(m.Status()).sessions == []


def test_position_past_the_end_is_a_clear_error(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    with pytest.raises(errors.PositionOutOfRange, match="out of range"):
        daemon.call(m.GoalState(str(path), 500, 1))
    with pytest.raises(errors.PositionOutOfRange, match="column 99"):
        daemon.call(m.GoalState(str(path), 1, 99))


def test_relative_paths_are_refused_with_advice(daemon):
    with pytest.raises(errors.BadRequest, match="absolute"):
        daemon.call(m.Diagnostics("demoScript.sml"))


def test_hol_server_outlives_a_client_that_hangs_up_and_answers_the_next_call(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    client = daemon.client("doomed")
    client.call(m.Diagnostics(str(path), wait=20), 30)
    [before] = daemon.call(m.Status()).sessions
    client._sock.shutdown(socket.SHUT_RDWR)  # as if the client process died
    client.close()
    again = daemon.call(m.Diagnostics(str(path), wait=20))
    [after] = daemon.call(m.Status()).sessions
    assert after.pid == before.pid
    assert again.server.start == "warm" and again.server.pid == before.pid


def test_two_clients_on_one_file_share_one_server_and_do_not_queue(daemon_factory, write_script):
    daemon = daemon_factory(slow_after_s=3600)  # not answered early as "far slower" either
    path = write_script(GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC"))
    # Nothing ends this call but the edit below, or its own 600 s wait.
    waiter, slow = waiting_call(daemon, m.Diagnostics(str(path), wait=600), name="agent-1")
    quick = daemon.call(m.Diagnostics(str(path), wait=0.5), name="agent-2")
    [during] = daemon.call(m.Status()).sessions
    assert during.waiting_calls == 1 and waiter.is_alive(), "the quick call queued behind the slow one"
    assert quick.verdict == "INCOMPLETE"
    path.write_text(GOOD_SCRIPT)  # the loop edited out: the next call syncs it and the slow one can end
    fixed = daemon.call(m.Diagnostics(str(path), wait=20), name="agent-2")
    waiter.join(30)
    assert fixed.verdict == slow["reply"].verdict == "OK"
    assert quick.server.pid == slow["reply"].server.pid == fixed.server.pid
    [session] = daemon.call(m.Status()).sessions
    assert session.clients == ["agent-1", "agent-2"]


def test_incomplete_answer_says_what_is_outstanding_and_cancels_nothing(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))  # a warm server: the wait below is all proof
    path.write_text(GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "SLOW_TAC 3000 >> simp[]"))
    daemon.call(m.Diagnostics(str(path), wait=0))  # hands HOL the edit
    # HOL debounces and compiles the edit before conj_comm is checked again.
    wait_until(lambda: daemon.call(m.Status()).sessions[0].tally.checking == 1, timeout=20,
               what="conj_comm to be checked again")
    first = daemon.call(m.Diagnostics(str(path), wait=0))
    assert first.verdict == "INCOMPLETE" and not first.complete
    assert any(item.startswith("proof conj_comm (line 10) checking for") for item in first.outstanding)
    second = daemon.call(m.Diagnostics(str(path), wait=20))
    assert second.verdict == "OK" and second.server.pid == first.server.pid


def test_an_edit_on_disk_is_picked_up_by_the_next_call(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "OK"
    path.write_text(FAILING, encoding="utf-8")
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert after.verdict == "FAILED" and after.server.start == "warm"


def test_protocol_mismatch_names_both_versions_and_the_fix(daemon):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(daemon.socket))
        sock.sendall(framing.encode(m.Hello(protocol=99, client="future-client")))
        reply = framing.decode(framing.reply_decoder, framing.recv_body(sock))
    assert isinstance(reply, m.ErrorReply) and reply.code == "protocol_mismatch"
    assert "99" in reply.message and str(m.PROTOCOL_VERSION) in reply.message
    assert "Restart the daemon" in reply.message


def test_garbage_frames_get_an_error_and_the_daemon_keeps_serving(daemon):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(daemon.socket))
        sock.sendall(b"\x00\x00\x00\x05hello")
        reply = framing.decode(framing.reply_decoder, framing.recv_body(sock))
    assert isinstance(reply, m.ErrorReply) and reply.code == "bad_frame"
    with socket.socket(socket.AF_UNIX) as sock:  # a huge length prefix
        sock.settimeout(10)
        sock.connect(str(daemon.socket))
        sock.sendall(b"\xff\xff\xff\xff")
        reply = framing.decode(framing.reply_decoder, framing.recv_body(sock))
    assert reply.code == "bad_frame"
    assert daemon.call(m.Status()).pid > 0


def test_unknown_request_after_hello_is_refused_and_the_connection_survives(daemon):
    client = daemon.client()
    client._sock.sendall(_raw_frame({"op": "frobnicate"}))
    reply = framing.decode(framing.reply_decoder, framing.recv_body(client._sock))
    assert reply.code == "bad_frame"
    assert isinstance(client.call(m.Status(), 10), m.StatusResult)


def test_socket_is_private_to_its_owner(short_tmp, daemon_factory):
    shared = short_tmp / "open"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    running = daemon_factory(socket=shared / "d.sock")
    assert stat.S_IMODE(running.socket.stat().st_mode) == 0o600
    # Not the daemon's to chmod (it may be shared); only writable by its owner, so usable.
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755


def test_a_second_daemon_refuses_to_start_over_a_live_one_and_harms_nothing(daemon, write_script, daemon_loop):
    pid = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20)).server.pid
    with pytest.raises(errors.AlreadyRunning, match="holds .*d0.sock.lock"):
        _start_in_thread(daemon.settings, daemon_loop)
    assert pid_alive(pid) and daemon.socket.exists()
    assert [s.pid for s in daemon.call(m.Status()).sessions] == [pid]


def test_a_stale_socket_file_is_replaced(short_tmp, daemon_factory):
    stale = short_tmp / "d0.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(stale))  # bound, never listening: nobody answers
    running = daemon_factory()
    assert running.socket == stale
    assert isinstance(running.call(m.Status()), m.StatusResult)


def test_shutdown_stops_every_hol_server_and_removes_the_socket(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    pid = daemon.call(m.Diagnostics(str(path), wait=20)).server.pid
    daemon.call(m.Shutdown())
    daemon.thread.join(30)
    assert not daemon.thread.is_alive()
    assert not daemon.socket.exists()
    assert not pid_alive(pid)


def _mkdir(path) -> str:
    path.mkdir()
    return str(path)


def _write_bytes(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def _raw_frame(obj) -> bytes:
    body = msgspec.msgpack.encode(obj)
    return len(body).to_bytes(4, "big") + body


def test_hol_not_found_names_every_place_it_looked(daemon_factory, write_script, monkeypatch):
    monkeypatch.delenv("HOL_BIN", raising=False)
    monkeypatch.setenv("HOLDIR", "/nonexistent-holdir")
    monkeypatch.setenv("PATH", "/nonexistent-bin")
    daemon = daemon_factory(hol_bin=None)
    with pytest.raises(errors.HolNotFound) as caught:
        daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=5))
    message = str(caught.value)
    assert "HOL_BIN" in message and "HOLDIR=/nonexistent-holdir" in message and "PATH" in message


def test_sigterm_stops_the_daemon_its_hol_servers_and_removes_the_socket(short_tmp, write_script, monkeypatch):
    monkeypatch.setenv("HOL_BIN", str(FAKE_HOL))
    sock = short_tmp / "t.sock"
    read_fd, write_fd = os.pipe()
    daemon = subprocess.Popen(
        [sys.executable, "-m", "holsrv", "--socket", str(sock), "--ready-fd", str(write_fd)],
        pass_fds=(write_fd,), stderr=subprocess.DEVNULL,
    )
    os.close(write_fd)
    try:
        with os.fdopen(read_fd, "rb") as ready:
            assert select.select([ready], [], [], 30)[0], "the daemon never said it was ready"
            assert ready.readline().startswith(b"ready")
        with rpc_client.connect(sock, name="test", autostart=False) as client:
            hol_pid = client.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20), 60).server.pid
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
        assert not sock.exists() and not pid_alive(hol_pid)
    finally:
        daemon.kill()
        daemon.wait()


def test_killing_holctl_mid_wait_leaves_the_daemon_and_its_hol_server_running(daemon, write_script):
    path = write_script(GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC"))
    daemon.call(m.Diagnostics(str(path), wait=0.3))
    # On a loaded machine that answer may come while the server still starts: wait for it to run.
    wait_until(lambda: daemon.call(m.Status()).sessions[0].state in ("compiling", "checking", "settled"), timeout=60,
               what="the file's HOL server to start")
    pid = daemon.call(m.Status()).sessions[0].pid
    holctl = subprocess.Popen(
        [sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "diagnostics", str(path), "--wait", "60"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_until(lambda: daemon.call(m.Status()).sessions[0].waiting_calls == 1, timeout=20,
               what="the holctl call to reach the daemon")
    holctl.kill()
    holctl.wait(10)
    again = daemon.call(m.Diagnostics(str(path), wait=0.3))
    assert again.server.pid == pid and again.server.start == "warm"
    assert pid_alive(pid)



def test_a_file_of_thousands_of_proofs_is_checked_and_rechecked_after_an_edit_above_them_all(
    daemon, write_script, monkeypatch, caplog
):
    # Batches of thousands of transitions are folded in slices, the text's
    # facts computed in steps, its didOpen and didChange escaped in slices.
    monkeypatch.setenv("FAKE_HOL_DECL_MS", "0")  # the fake's pace per declaration and proof
    monkeypatch.setenv("FAKE_HOL_PROOF_MS", "0")
    count = 2_000
    text = "Theory many\n\n" + "".join(f"Theorem t{i}:\n  T\nProof\n  simp[]\nQED\n\n" for i in range(count))
    path = write_script(text, name="manyScript.sml")
    first = daemon.call(m.Diagnostics(str(path), wait=120), 150)
    assert (first.verdict, first.tally.proved, len(first.proofs)) == ("OK", count, count), first.headline
    path.write_text(text.replace("Theory many\n\n", "Theory many\n\nval _ = ();\n\n", 1))
    again = daemon.call(m.Diagnostics(str(path), wait=120), 150)
    assert (again.verdict, again.tally.proved, again.proofs[0].line) == ("OK", count, first.proofs[0].line + 2)
    assert again.content_hash != first.content_hash
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "a notification was not folded in"
