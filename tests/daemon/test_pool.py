"""Sessions and the pool: warm, bounded, restarted after death, never leaked."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

from holsrv import errors
from holsrv.process import process
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages as m
from holsrv.rpc import paths

from conftest import FAKE_HOL, GOOD_SCRIPT, _start_in_thread, fake_settings, pid_alive, wait_until, waiting_call

# Checking until edited (and never "probably looping" at the default thresholds).
BUSY = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC")
LOOPING = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC")


def sessions(daemon) -> dict[str, m.SessionStatus]:
    return {os.path.basename(s.file): s for s in daemon.call(m.Status()).sessions}


def test_lru_eviction_skips_a_server_whose_proofs_are_checking(daemon_factory, write_script):
    daemon = daemon_factory(max_servers=2)
    busy = write_script(BUSY, "busyScript.sml")
    idle = write_script(GOOD_SCRIPT, "idleScript.sml")
    third = write_script(GOOD_SCRIPT, "thirdScript.sml")
    daemon.call(m.Diagnostics(str(busy), wait=0.5))  # oldest, still checking
    daemon.call(m.Diagnostics(str(idle), wait=20))
    result = daemon.call(m.Diagnostics(str(third), wait=20))
    assert result.verdict == "OK"
    alive = {name for name, s in sessions(daemon).items() if s.state not in ("stopped", "dead")}
    assert alive == {"busyScript.sml", "thirdScript.sml"}


def test_when_every_server_is_busy_the_caller_is_told_at_once(daemon_factory, write_script):
    daemon = daemon_factory(max_servers=1)
    daemon.call(m.Diagnostics(str(write_script(BUSY, "busyScript.sml")), wait=0.3))
    with pytest.raises(errors.ServerBusy, match="all 1 HOL servers are busy"):
        daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "otherScript.sml")), wait=5))


def test_a_probably_looping_proof_does_not_keep_its_server_from_eviction(daemon_factory, write_script):
    daemon = daemon_factory(max_servers=1, looping_after_s=0.2)
    # Answers as soon as only the looping proof is left.
    looping = daemon.call(m.Diagnostics(str(write_script(LOOPING, "loopScript.sml")), wait=20))
    assert any(w.startswith("PROBABLY LOOPING: proof conj_comm") for w in looping.warnings)
    other = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "otherScript.sml")), wait=20))
    assert other.verdict == "OK"
    assert not pid_alive(looping.server.pid)


def test_idle_server_is_stopped_and_the_next_call_says_it_started_a_new_one(daemon_factory, write_script):
    daemon = daemon_factory(idle_timeout_s=0.3)
    path = write_script(GOOD_SCRIPT)
    first = daemon.call(m.Diagnostics(str(path), wait=20))
    wait_until(lambda: not pid_alive(first.server.pid), what="the idle server to stop")
    again = daemon.call(m.Diagnostics(str(path), wait=20))
    assert again.server.start == "restarted" and "idle" in again.server.note
    assert again.server.pid != first.server.pid and again.verdict == "OK"


def test_killed_server_fails_the_waiting_call_with_its_stderr_and_the_next_call_restarts(daemon, write_script):
    path = write_script(LOOPING)
    pid = daemon.call(m.Diagnostics(str(path), wait=0.3)).server.pid
    # The 0.3 s also covered the start: on a busy machine add0 may not be proved yet.
    wait_until(lambda: sessions(daemon)["demoScript.sml"].tally.proved == 1, timeout=20,
               what="add0 to be proved, leaving only conj_comm checking")
    waiter, outcome = waiting_call(daemon, m.Diagnostics(str(path), wait=30))
    os.kill(pid, signal.SIGKILL)
    waiter.join(15)
    err = outcome.get("error")
    assert err is not None and err.code == "server_died", outcome
    assert "exited with status -9" in str(err) and "LSP" in err.detail
    assert "while checking conj_comm (line 10)" in str(err)
    again = daemon.call(m.Diagnostics(str(path), wait=0.3))
    assert again.server.start == "restarted" and "died" in again.server.note
    assert "LSP" in again.server.stderr_tail
    assert again.server.pid != pid


def test_server_passing_its_heap_cap_dies_with_out_of_store_then_restarts_and_backs_off(
    daemon_factory, write_script, monkeypatch
):
    monkeypatch.setenv("FAKE_HOL_GROW_MB_PER_S", "400")
    daemon = daemon_factory(max_heap_mb=64, restart_backoff_s=30)
    path = write_script(GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "GROW_TAC"))
    with pytest.raises(errors.ServerDied) as first:
        daemon.call(m.Diagnostics(str(path), wait=20))
    assert "Run out of store" in first.value.detail
    with pytest.raises(errors.ServerDied) as second:  # restarted, and dies again
        daemon.call(m.Diagnostics(str(path), wait=20))
    assert "Run out of store" in second.value.detail
    with pytest.raises(errors.ServerDied, match="not restarting for another"):
        daemon.call(m.Diagnostics(str(path), wait=20))
    [session] = daemon.call(m.Status()).sessions
    assert session.state == "dead" and session.restarts == 1


def test_restart_gives_a_new_server_with_the_requested_heap_cap(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    old = daemon.call(m.Diagnostics(str(path), wait=20)).server.pid
    reply = daemon.call(m.Restart(str(path), max_heap_mb=321))
    assert reply.old_pid == old and reply.new_pid != old and reply.max_heap_mb == 321
    assert not pid_alive(old)
    cmdline = psutil.Process(reply.new_pid).cmdline()
    assert cmdline[cmdline.index("--maxheap") + 1] == "321"
    assert cmdline.index("--maxheap") < cmdline.index("lsp")
    reply = daemon.call(m.Restart(str(path), max_heap_mb=0))
    assert "--maxheap" not in psutil.Process(reply.new_pid).cmdline()
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert after.verdict == "OK" and after.server.pid == reply.new_pid


def test_two_spellings_of_one_file_share_a_server(daemon, write_script, tmp_path):
    path = write_script(GOOD_SCRIPT)
    link = tmp_path / "sub" / "linkScript.sml"
    link.parent.mkdir()
    link.symlink_to(path)
    a = daemon.call(m.Diagnostics(str(path), wait=20)).server.pid
    b = daemon.call(m.Diagnostics(str(tmp_path / "sub" / ".." / "sub" / "linkScript.sml"), wait=20)).server.pid
    assert a == b and len(sessions(daemon)) == 1


def test_status_shows_each_server_with_its_tally_memory_and_clients(daemon_factory, write_script):
    daemon = daemon_factory(soft_footprint_mb=1)
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20), name="agent-7")
    # The pool samples memory on its own beat: on a loaded machine the first sample may come later.
    wait_until(lambda: daemon.call(m.Status()).sessions[0].footprint_mb is not None, 30,
               "the pool's first memory sample of the server")
    status = daemon.call(m.Status())
    assert status.pid == os.getpid() and status.socket == str(daemon.socket)
    [s] = status.sessions
    assert s.file == str(path) and s.state == "settled" and s.clients == ["agent-7"]
    assert s.tally.proved == 2 and s.waiting_calls == 0 and s.max_heap_mb == 2048
    assert s.footprint_mb and s.footprint_mb > 1 and s.large


def test_stopping_escalates_to_sigkill_for_a_server_that_ignores_sigterm(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_IGNORE_SIGTERM", "1")
    daemon = daemon_factory(stop_timeout_s=0.5)
    pid = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20)).server.pid
    daemon.call(m.Shutdown())
    daemon.thread.join(30)
    assert not pid_alive(pid)


def test_sigkill_of_the_daemon_leaves_no_hol_server_alive(short_tmp, write_script, monkeypatch):
    # Ignoring SIGTERM and end of input, only the parent-death signal can end it.
    monkeypatch.setenv("FAKE_HOL_IGNORE_SIGTERM", "1")
    monkeypatch.setenv("HOL_BIN", str(FAKE_HOL))
    sock = short_tmp / "k.sock"
    client = rpc_client.connect(sock, name="test", autostart=True)
    daemon_pid = client.welcome.pid  # killed below even if the call fails: never left running
    try:
        reply = client.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20), 60)
    finally:
        client.close()
        os.kill(daemon_pid, signal.SIGKILL)
    try:
        # Not psutil's wait: an orphan may linger as a zombie until init reaps it.
        wait_until(lambda: not pid_alive(reply.server.pid), timeout=30, what="the orphaned HOL server to die")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(reply.server.pid, signal.SIGKILL)


def test_a_new_daemon_stops_servers_its_killed_predecessor_left(short_tmp, daemon_loop):
    # The predecessor's marker: a pid above any pid_max, so that daemon no longer runs.
    owner = f"{2**22 + 1}:1000.00"
    marked = {**os.environ, process.OWNER_ENV: owner}
    leftover = subprocess.Popen(["sleep", "60"], start_new_session=True, env=marked)
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True, env=marked)
    try:
        record = paths.servers_record(short_tmp / "d.sock")
        record.write_text(json.dumps([
            {"pid": leftover.pid, "create_time": psutil.Process(leftover.pid).create_time(), "owner": owner},
            # Same pid number as before, but a different process: must survive.
            {"pid": stranger.pid, "create_time": psutil.Process(stranger.pid).create_time() - 100, "owner": owner},
        ]))
        daemon = _start_in_thread(fake_settings(short_tmp / "d.sock"), daemon_loop)
        try:
            assert leftover.wait(timeout=30) == -signal.SIGKILL  # a bound for a loaded machine
            assert stranger.poll() is None
        finally:
            daemon.stop()
    finally:
        for proc in (leftover, stranger):
            proc.kill()
            proc.wait()


def test_holctl_started_daemon_is_one_even_when_two_clients_race(short_tmp, monkeypatch):
    monkeypatch.setenv("HOL_BIN", str(FAKE_HOL))
    sock = short_tmp / "race.sock"
    code = (
        "import sys; from holsrv.rpc import client; "
        f"c = client.connect(__import__('pathlib').Path({str(sock)!r}), name='racer'); "
        "print(c.welcome.pid)"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        pids = {p.communicate(timeout=60)[0].strip() for p in procs}
        assert len(pids) == 1 and all(p.returncode == 0 for p in procs)
    finally:
        with contextlib.suppress(errors.DaemonUnreachable), rpc_client.connect(sock, name="t", autostart=False) as c:
            daemon_pid = c.welcome.pid
            c.call(m.Shutdown(), 30)
            psutil.Process(daemon_pid).wait(timeout=30)


def test_a_slow_start_is_waited_for_within_the_callers_wait_and_never_cancelled(daemon, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_STARTUP_MS", "1500")
    path = write_script(GOOD_SCRIPT)
    early = daemon.call(m.Diagnostics(str(path), wait=0.2))
    assert early.verdict == "INCOMPLETE" and "still starting" in early.headline
    goal = daemon.call(m.GoalState(str(path), 7, 3, wait=0.1))
    assert goal.state == "starting" and "ask again" in goal.message
    # On a loaded machine the early answer may come before the process exists (pid 0).
    wait_until(lambda: sessions(daemon)["demoScript.sml"].pid, what="the server's process to exist")
    starting = sessions(daemon)["demoScript.sml"].pid
    done = daemon.call(m.Diagnostics(str(path), wait=20))
    assert done.verdict == "OK" and done.server.pid == starting and early.server.pid in (0, starting)


def test_a_hol_that_cannot_start_is_reported_with_its_stderr_and_backs_off(daemon_factory, write_script, tmp_path):
    broken = tmp_path / "hol"
    broken.write_text("#!/bin/sh\necho 'Unrecognized option: --lsp-check-proofs' >&2\nexit 1\n")
    broken.chmod(0o755)
    daemon = daemon_factory(hol_bin=str(broken), restart_backoff_s=30)
    path = write_script(GOOD_SCRIPT)
    for _ in range(2):
        with pytest.raises(errors.ServerDied) as caught:
            daemon.call(m.Diagnostics(str(path), wait=10))
        assert "did not start" in str(caught.value)
        assert "Unrecognized option" in caught.value.detail
    with pytest.raises(errors.ServerDied, match="not restarting for another"):
        daemon.call(m.Diagnostics(str(path), wait=10))


def test_a_server_that_stops_reading_its_input_is_killed_not_waited_on_forever(
    daemon_factory, write_script, monkeypatch
):
    monkeypatch.setenv("FAKE_HOL_HANG_ON", "textDocument/didChange")
    # Long enough for a loaded machine to write 400 kB to a pipe the fake still reads.
    daemon = daemon_factory(request_timeout_s=2.0)
    path = write_script(GOOD_SCRIPT)
    first = daemon.call(m.Diagnostics(str(path), wait=20))
    padding = "(* " + "x" * 400_000 + " *)\n"
    path.write_text(GOOD_SCRIPT + padding)  # read whole; the fake then stops reading
    daemon.call(m.Diagnostics(str(path), wait=0.3))
    path.write_text(GOOD_SCRIPT + padding + padding)  # larger than any pipe buffer
    # Given up after request_timeout_s, not after the call's wait nor never.
    with pytest.raises(errors.ServerDied, match=r"stopped reading its input \(nothing taken for 2s\)"):
        daemon.call(m.Diagnostics(str(path), wait=600))
    assert not pid_alive(first.server.pid)


def test_a_handshake_answered_with_an_error_is_a_failed_start_not_a_stuck_one(daemon_factory, write_script, tmp_path):
    rude = tmp_path / "hol"
    rude.write_text(
        "#!/usr/bin/env python3\n"
        "import sys, json\n"
        "hdr = sys.stdin.buffer.readline(); sys.stdin.buffer.readline()\n"
        "body = json.loads(sys.stdin.buffer.read(int(hdr.split(b':')[1])))\n"
        "out = json.dumps({'jsonrpc': '2.0', 'id': body['id'], 'error': {'code': -32603, 'message': 'boom'}})\n"
        "sys.stdout.buffer.write(b'Content-Length: %d\\r\\n\\r\\n' % len(out) + out.encode()); sys.stdout.flush()\n"
        "sys.stdin.buffer.read()\n"
    )
    rude.chmod(0o755)
    daemon = daemon_factory(hol_bin=str(rude))
    with pytest.raises(errors.ServerDied, match="did not start.*boom"):
        daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=10))
    [session] = daemon.call(m.Status()).sessions
    assert session.state == "dead" and not pid_alive(session.pid)


def test_a_megabyte_stderr_line_neither_kills_the_reader_nor_blocks_hol(daemon_factory, write_script, tmp_path):
    noisy = tmp_path / "hol"
    noisy.write_text(
        "#!/bin/sh\n"
        "head -c 3000000 /dev/zero | tr '\\\\0' x >&2\n"  # one 3 MB line, no newline
        f'exec {sys.executable} {FAKE_HOL} "$@"\n'
    )
    noisy.chmod(0o755)
    daemon = daemon_factory(hol_bin=str(noisy))
    result = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20))
    assert result.verdict == "OK"
    [session] = daemon.daemon.pool.sessions.values()
    tail = session.tail()
    assert "…(cut)" in tail and "LSP-init" in tail.split("…(cut)")[-1], "the reader stopped at the long line"


def test_a_compiling_server_is_not_evicted_for_another_file(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_DECL_MS", "1500")
    daemon = daemon_factory(max_servers=1)
    compiling = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "aScript.sml")), wait=0.3))
    assert compiling.verdict == "INCOMPLETE"
    # On a loaded machine the answer may come before the process exists (pid 0).
    wait_until(lambda: sessions(daemon)["aScript.sml"].pid, what="the server's process to exist")
    pid = sessions(daemon)["aScript.sml"].pid
    with pytest.raises(errors.ServerBusy):
        daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "bScript.sml")), wait=1))
    assert pid_alive(pid) and compiling.server.pid in (0, pid)


def test_a_call_waiting_on_a_server_that_is_restarted_is_told_so(daemon_factory, write_script):
    # Nothing timed (a quiet period, slowness, looping, its own wait) could end
    # the waiting call before the join below gives up: only being told can.
    daemon = daemon_factory(slow_after_s=3600, quiet_s=0.01, quiet_clean_s=0.01)
    path = write_script(LOOPING)
    daemon.call(m.Diagnostics(str(path), wait=0.3))
    wait_until(lambda: sessions(daemon)["demoScript.sml"].tally.proved == 1, timeout=20,
               what="HOL to say all it will say: add0 proved, conj_comm checking")
    waiter, outcome = waiting_call(daemon, m.Diagnostics(str(path), wait=600))
    daemon.call(m.Restart(str(path)))
    waiter.join(30)
    assert not waiter.is_alive(), "the waiting call was not told of the restart"
    err = outcome.get("error")
    assert err is not None and err.code == "server_stopped", outcome
    assert "restart requested" in str(err)


def test_the_daemon_records_its_servers_so_a_successor_can_clean_up(daemon, write_script):
    pid = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20)).server.pid
    record = json.loads(paths.servers_record(daemon.socket).read_text())
    owner = process.owner_marker()  # the daemon runs in this process
    assert record == [{"pid": pid, "create_time": psutil.Process(pid).create_time(), "owner": owner}]
    assert psutil.Process(pid).environ()[process.OWNER_ENV] == owner
    daemon.call(m.Restart(str(write_script(GOOD_SCRIPT))))
    [entry] = json.loads(paths.servers_record(daemon.socket).read_text())
    assert entry["pid"] != pid


def test_a_server_that_finishes_starting_after_its_caller_left_compiles_the_file(
    daemon, write_script, monkeypatch
):
    monkeypatch.setenv("FAKE_HOL_STARTUP_MS", "800")
    path = write_script(GOOD_SCRIPT)
    assert daemon.call(m.Diagnostics(str(path), wait=0.1)).verdict == "INCOMPLETE"
    wait_until(lambda: sessions(daemon)["demoScript.sml"].state == "settled", timeout=20,
               what="the file to compile with no further call")


def test_restarting_a_server_that_is_still_starting_leaves_no_stray_server(daemon, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_STARTUP_MS", "1500")
    monkeypatch.setenv("FAKE_HOL_PIDFILE", str(write_script("", "pids.txt")))
    path = write_script(GOOD_SCRIPT)
    pids = path.parent / "pids.txt"
    daemon.call(m.Diagnostics(str(path), wait=0.1))
    # Each fake records its pid as its process starts, then takes 1.5 s to answer initialize: wait
    # (bounded) for the record, which a loaded machine writes late, not for the server to start.
    wait_until(lambda: len(pids.read_text().split()) == 1, what="the first server's process to run")
    reply = daemon.call(m.Restart(str(path)))
    wait_until(lambda: len(pids.read_text().split()) >= 2, what="the fresh server's process to run")
    spawned = [int(p) for p in pids.read_text().split()]
    # The fake records its own pid; the server's pid is its watchdog's, its parent.
    assert len(spawned) == 2 and reply.new_pid == psutil.Process(spawned[1]).ppid()
    wait_until(lambda: not pid_alive(spawned[0]), what="the first server to go")
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert after.verdict == "OK" and after.server.pid == reply.new_pid
    assert "died" not in after.server.note


def test_restart_of_a_deleted_file_stops_its_server(daemon, write_script):
    path = write_script(BUSY)
    pid = daemon.call(m.Diagnostics(str(path), wait=0.5)).server.pid
    path.unlink()
    reply = daemon.call(m.Restart(str(path)))
    assert reply.old_pid == pid and reply.new_pid == 0 and "no longer exists" in reply.message
    assert not pid_alive(pid)
    with pytest.raises(errors.FileNotFound, match="no HOL server is running for it"):
        daemon.call(m.Restart(str(path)))
