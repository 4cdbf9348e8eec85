"""One daemon per socket, and its files are its own: the lock, leftover reaping,
the socket directory, files that are never written through a symlink, the
private log, and peer credentials.

Reaping tests plant their own decoy processes (marked or not) and check which
survive; every decoy is killed at the end by the pid the test recorded.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import psutil
import pytest

import holsrv.daemon
from holsrv import errors, facilities, main
from holsrv.process import process
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages as m
from holsrv.rpc import paths

from conftest import FAKE_HOL, GOOD_SCRIPT, _start_in_thread, fake_settings, pid_alive, wait_until

BUSY = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC")
# The marker of a daemon that no longer runs: no pid is above pid_max (at most 2**22).
GONE_OWNER = f"{2**22 + 1}:1000.00"


@contextlib.contextmanager
def decoys(*argvs: list[str], env: dict[str, str] | None = None):
    """Processes of our own, each in its own session, killed (by pid) at the end."""
    procs = [subprocess.Popen(argv, start_new_session=True, env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE) for argv in argvs]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()


def _record(sock: Path, *entries: dict) -> None:
    paths.servers_record(sock).write_text(json.dumps(list(entries)))


def _entry(proc: subprocess.Popen, owner: str | None) -> dict:
    entry = {"pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time()}
    return entry if owner is None else {**entry, "owner": owner}


# -- one daemon per socket ------------------------------------------------------


def test_a_second_daemon_refuses_to_start_while_the_first_runs_even_with_its_socket_deleted(
    daemon, write_script, daemon_loop
):
    hol = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20)).server.pid
    daemon.socket.unlink()
    with pytest.raises(errors.AlreadyRunning) as refused:
        _start_in_thread(daemon.settings, daemon_loop)
    assert f"pid {os.getpid()}" in str(refused.value) and "holds" in str(refused.value)
    assert pid_alive(hol), "the second daemon killed the first one's HOL server"


def test_a_daemon_makes_its_deleted_socket_again(daemon_factory, write_script, monkeypatch):
    monkeypatch.setattr(holsrv.daemon, "SOCKET_CHECK_S", 0.05)
    daemon = daemon_factory()
    hol = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20)).server.pid
    daemon.socket.unlink()
    wait_until(daemon.socket.exists, what="the daemon to make its socket again")
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600
    assert [s.pid for s in daemon.call(m.Status()).sessions] == [hol]


def test_a_daemon_whose_socket_was_replaced_stops_and_leaves_the_replacement(daemon_factory, monkeypatch):
    monkeypatch.setattr(holsrv.daemon, "SOCKET_CHECK_S", 0.05)
    daemon = daemon_factory()
    daemon.socket.unlink()
    daemon.socket.write_text("not the daemon's")
    daemon.thread.join(20)
    assert not daemon.thread.is_alive(), "a daemon nobody can reach kept running"
    assert daemon.socket.read_text() == "not the daemon's"
    assert _lock_is_free(daemon.socket)


def _lock_is_free(sock: Path) -> bool:
    with open(paths.lock_path(sock), "rb") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def test_a_client_after_the_socket_was_deleted_reaches_the_same_daemon_and_no_call_is_harmed(
    short_tmp, write_script, monkeypatch
):
    monkeypatch.setenv("HOL_BIN", str(FAKE_HOL))
    sock = short_tmp / "s.sock"
    busy = write_script(BUSY, "busyScript.sml")
    first = rpc_client.connect(sock, name="first", autostart=True)
    daemon_pid = first.welcome.pid
    try:
        hol = first.call(m.Diagnostics(str(busy), wait=0.5), 60).server.pid
        outcome: dict = {}

        def call() -> None:
            try:
                outcome["reply"] = first.call(m.Diagnostics(str(busy), wait=6), 60)
            except errors.HolsrvError as err:
                outcome["error"] = err

        caller = threading.Thread(target=call)
        caller.start()
        with rpc_client.connect(sock, name="watch", autostart=False) as watch:
            wait_until(lambda: watch.call(m.Status()).sessions[0].waiting_calls == 1, what="the call to wait")
        sock.unlink()
        with rpc_client.connect(sock, name="second", autostart=True) as second:
            assert second.welcome.pid == daemon_pid, "a second daemon was started"
            assert [s.pid for s in second.call(m.Status()).sessions] == [hol]
        caller.join(30)
        assert outcome.get("reply") is not None, outcome
        assert outcome["reply"].verdict == "INCOMPLETE" and outcome["reply"].server.pid == hol
        assert pid_alive(hol)
    finally:
        first.close()
        with contextlib.suppress(errors.HolsrvError), rpc_client.connect(sock, name="t", autostart=False) as c:
            c.call(m.Shutdown())
        with contextlib.suppress(psutil.Error):
            psutil.Process(daemon_pid).wait(20)
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon_pid, signal.SIGKILL)


# -- leftover reaping -----------------------------------------------------------


def test_reaping_spares_a_recorded_process_without_the_daemons_marker(short_tmp, daemon_loop):
    sock = short_tmp / "d.sock"
    with decoys(["sleep", "60"]) as [stranger]:
        _record(sock, _entry(stranger, None), _entry(stranger, GONE_OWNER))  # old format, and a false owner
        running = _start_in_thread(fake_settings(sock), daemon_loop)
        running.stop()
        assert stranger.poll() is None, "an unmarked process named by the record was killed"


def test_reaping_spares_the_servers_of_a_daemon_that_still_runs(short_tmp, daemon_loop):
    sock = short_tmp / "d.sock"
    live_owner = process.owner_marker()  # this very process: it runs
    with decoys(["sleep", "60"], env={**os.environ, process.OWNER_ENV: live_owner}) as [other]:
        _record(sock, _entry(other, live_owner))
        running = _start_in_thread(fake_settings(sock), daemon_loop)
        running.stop()
        assert other.poll() is None


def test_reaping_kills_a_marked_leftover_and_spares_a_reused_pid(short_tmp, daemon_loop):
    sock = short_tmp / "d.sock"
    marked = {**os.environ, process.OWNER_ENV: GONE_OWNER}
    with decoys(["sleep", "60"], ["sleep", "60"], env=marked) as [leftover, reused]:
        stale = {**_entry(reused, GONE_OWNER), "create_time": psutil.Process(reused.pid).create_time() - 100}
        _record(sock, _entry(leftover, GONE_OWNER), stale)
        running = _start_in_thread(fake_settings(sock), daemon_loop)
        try:
            assert leftover.wait(timeout=30) == -signal.SIGKILL  # a bound for a loaded machine, not a speed
            assert reused.poll() is None
        finally:
            running.stop()


def test_reaping_kills_the_group_of_a_leftover_whose_leader_died(short_tmp, daemon_loop):
    # A `hol` wrapper that forked the real server and died: only its group remains.
    sock = short_tmp / "d.sock"
    wrapper = (
        "import subprocess, sys; child = subprocess.Popen(['sleep', '60']); "
        "print(child.pid, flush=True); sys.stdin.readline()"
    )
    with decoys([sys.executable, "-c", wrapper], env={**os.environ, process.OWNER_ENV: GONE_OWNER}) as [leader]:
        assert leader.stdout is not None and leader.stdin is not None
        member = int(leader.stdout.readline())
        try:
            _record(sock, _entry(leader, GONE_OWNER))
            leader.stdin.close()  # the wrapper exits; its child stays in its group
            leader.wait(10)
            assert pid_alive(member) and os.getpgid(member) == leader.pid
            running = _start_in_thread(fake_settings(sock), daemon_loop)
            try:
                wait_until(lambda: not pid_alive(member), timeout=30, what="the group member to be killed")
            finally:
                running.stop()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGKILL)


# -- paths ------------------------------------------------------------------------


def test_a_world_writable_socket_directory_is_refused_and_never_chmodded(short_tmp, daemon_loop):
    shared = short_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp
    with pytest.raises(PermissionError) as refused:
        _start_in_thread(fake_settings(shared / "x.sock"), daemon_loop)
    assert str(shared) in str(refused.value) and "HOLSRV_SOCKET" in str(refused.value)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    with pytest.raises(PermissionError):
        rpc_client.start_daemon(shared / "x.sock")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777


def test_a_symlinked_socket_directory_is_refused(short_tmp, daemon_loop):
    real = short_tmp / "real"
    real.mkdir(mode=0o700)
    link = short_tmp / "link"
    link.symlink_to(real)
    with pytest.raises(PermissionError, match="symbolic link"):
        _start_in_thread(fake_settings(link / "x.sock"), daemon_loop)
    assert not (real / "x.sock").exists()


def test_a_socket_directory_of_another_user_is_refused(short_tmp):
    if os.getuid() == 0:
        foreign = short_tmp / "foreign"
        foreign.mkdir(mode=0o700)
        os.chown(foreign, 65534, 65534)
    else:
        foreign = Path("/")
    with pytest.raises(PermissionError, match="belongs to uid"):
        paths.private_dir(foreign)


def test_a_new_socket_directory_is_made_private_whatever_the_umask(short_tmp):
    old = os.umask(0o000)
    try:
        made = paths.private_dir(short_tmp / "new")
    finally:
        os.umask(old)
    assert stat.S_IMODE(made.stat().st_mode) == 0o700


def test_a_symlink_planted_at_a_lock_file_truncates_nothing(short_tmp, daemon_loop):
    sock = short_tmp / "d.sock"
    target = short_tmp / "precious"
    target.write_text("keep me")
    for lock in (paths.lock_path(sock), paths.start_lock_path(sock)):
        lock.symlink_to(target)
    with pytest.raises(PermissionError, match="symbolic link"):
        rpc_client.start_daemon(sock)
    with pytest.raises(PermissionError, match="symbolic link"):
        _start_in_thread(fake_settings(sock), daemon_loop)
    assert target.read_text() == "keep me"


def test_a_symlink_planted_at_the_servers_record_is_not_written_through(short_tmp, daemon_factory, write_script):
    sock = short_tmp / "d.sock"
    target = short_tmp / "precious"
    target.write_text("keep me")
    record = paths.servers_record(sock)
    for planted in (record.with_name(record.name + ".tmp"), record.with_suffix(".tmp"), record):
        planted.symlink_to(target)
    daemon = daemon_factory(socket=sock)
    daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20))
    daemon.stop()
    assert target.read_text() == "keep me"


def test_the_log_directory_and_files_of_a_started_daemon_are_private(short_tmp, monkeypatch):
    runtime, state = short_tmp / "run", short_tmp / "state"
    runtime.mkdir(mode=0o700)
    monkeypatch.delenv(paths.SOCKET_ENV, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.setenv("HOL_BIN", str(FAKE_HOL))
    old = os.umask(0o022)
    try:
        client = rpc_client.connect(name="test", autostart=True)
    finally:
        os.umask(old)
    daemon_pid = client.welcome.pid
    try:
        log = state / "holsrv" / "holsrv.log"
        assert paths.log_path(paths.default_socket()) == log
        assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
        for file in (log, log.with_name("holsrv.log.stderr")):
            assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    finally:
        with contextlib.suppress(errors.HolsrvError):
            client.call(m.Shutdown())
        client.close()
        with contextlib.suppress(psutil.Error):
            psutil.Process(daemon_pid).wait(20)
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon_pid, signal.SIGKILL)


def test_a_rotated_log_stays_private(short_tmp):
    log = short_tmp / "logs" / "holsrv.log"
    old = os.umask(0o022)
    try:
        handler = main.log_handler(log)
        try:
            handler.emit(logging.LogRecord("t", logging.INFO, __file__, 1, "proof text", None, None))
            assert isinstance(handler, logging.handlers.RotatingFileHandler)
            handler.doRollover()
        finally:
            handler.close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    for file in (log, log.with_name("holsrv.log.1")):
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file


# -- peer credentials ---------------------------------------------------------------


NO_PEER_CHECK = pytest.mark.skipif(facilities.peer_check() != "SO_PEERCRED",
                                   reason="no SO_PEERCRED here (portable mode): test_portable covers the fallback")


@NO_PEER_CHECK
def test_a_connection_from_another_uid_is_refused_with_a_clear_error(daemon, caplog):
    daemon.daemon.connections.owner_uid = os.getuid() + 1  # as if the peer were another user
    with caplog.at_level(logging.WARNING, logger="holsrv.daemon"):
        with pytest.raises(errors.PeerRefused) as refused:
            daemon.call(m.Status())
    assert refused.value.code == "peer_refused"
    assert f"you are uid {os.getuid()}" in str(refused.value) and "HOLSRV_SOCKET" in str(refused.value)
    assert any("refused a connection from pid" in r.getMessage() for r in caplog.records)


@NO_PEER_CHECK
@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("python3"), reason="needs root to run a client as nobody")
def test_a_real_client_of_another_user_gets_an_error_frame_even_through_an_open_socket(daemon):
    daemon.socket.chmod(0o666)  # a permissive socket: the peer check is what is left
    daemon.socket.parent.chmod(0o711)
    probe = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
             "print(s.recv(65536).hex())")
    out = subprocess.run(["/usr/bin/python3", "-c", probe, str(daemon.socket)], user=65534,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    frame = bytes.fromhex(out.stdout.strip())
    reply = msgspec.msgpack.decode(frame[4:])
    assert reply["code"] == "peer_refused" and "uid 65534" in reply["message"]
    assert isinstance(daemon.call(m.Status()), m.StatusResult)  # the owner still gets in


def test_a_client_arriving_while_a_daemon_shuts_down_ends_up_with_a_new_one(short_tmp, write_script, monkeypatch):
    # Its servers ignore SIGTERM, so the old daemon holds the lock for a while after it stopped listening.
    monkeypatch.setenv("HOL_BIN", str(FAKE_HOL))
    monkeypatch.setenv("FAKE_HOL_IGNORE_SIGTERM", "1")
    monkeypatch.setenv("HOLSRV_STOP_TIMEOUT_S", "4")
    sock = short_tmp / "r.sock"
    pids = []
    try:
        with rpc_client.connect(sock, name="first", autostart=True) as first:
            pids.append(first.welcome.pid)
            first.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20), 60)
        os.kill(pids[0], signal.SIGTERM)
        wait_until(lambda: _refuses(sock), what="the old daemon to stop listening")
        assert not _lock_is_free(sock)
        with rpc_client.connect(sock, name="second", autostart=True) as second:
            pids.append(second.welcome.pid)
            assert second.welcome.pid != pids[0]
            assert isinstance(second.call(m.Status()), m.StatusResult)
            second.call(m.Shutdown())
    finally:
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).wait(20)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _refuses(sock: Path) -> bool:
    try:
        rpc_client.connect(sock, name="probe", autostart=False).close()
    except errors.DaemonUnreachable:
        return True
    return False
