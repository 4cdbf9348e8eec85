"""Shutdown drains: calls in flight get a deadline to finish, then `daemon_stopping`;
HOL servers are stopped within the budget even when they ignore SIGTERM; a
second signal forces."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from holsrv import errors
from holsrv.rpc import client as rpc_client
from holsrv.rpc import framing
from holsrv.rpc import messages as m

from conftest import FAKE_HOL, GOOD_SCRIPT, pid_alive, wait_until, waiting_call

BUSY = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC")  # checking until edited


def test_a_call_still_waiting_when_the_daemon_stops_gets_daemon_stopping(daemon, write_script):
    waiter, outcome = waiting_call(daemon, m.Diagnostics(str(write_script(BUSY)), wait=600))
    daemon.stop()
    waiter.join(30)
    err = outcome.get("error")
    assert isinstance(err, errors.DaemonStopping), outcome
    assert "shutting down" in str(err) and "call again" in str(err)


def test_a_call_that_finishes_within_the_drain_gets_its_answer(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_STARTUP_MS", "1000")  # still starting when the stop comes
    daemon = daemon_factory(stop_timeout_s=10)
    waiter, outcome = waiting_call(daemon, m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20))
    daemon.stop()
    waiter.join(30)
    assert outcome.get("reply") is not None, outcome
    assert outcome["reply"].verdict == "OK"


def test_a_request_pipelined_behind_the_last_answered_one_is_told_the_daemon_is_stopping(
    daemon_factory, write_script, monkeypatch
):
    from test_fairness import _open_hello, _reply

    monkeypatch.setenv("FAKE_HOL_STARTUP_MS", "1000")  # still starting when the stop comes
    daemon = daemon_factory(stop_timeout_s=10)
    sock = _open_hello(daemon)
    try:
        diagnostics = m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20)
        sock.sendall(framing.encode(diagnostics) + framing.encode(m.Status()))
        wait_until(lambda: any(s.waiting_calls for s in daemon.call(m.Status()).sessions), what="the first call")
        daemon.stop()
        sock.settimeout(30)
        first, second = _reply(sock), _reply(sock)
        assert isinstance(first, m.DiagnosticsResult) and first.verdict == "OK"
        assert isinstance(second, m.ErrorReply) and second.code == "daemon_stopping", second
        assert "send it again" in second.message
    finally:
        sock.close()


def _daemon_process(sock: Path, env: dict[str, str]) -> subprocess.Popen:
    """`holsrv` in the foreground on `sock`; returns once it listens."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "holsrv", "--socket", str(sock), "--ready-fd", str(write_fd)],
        pass_fds=(write_fd,), stderr=subprocess.DEVNULL, env={**os.environ, "HOL_BIN": str(FAKE_HOL), **env},
    )
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as ready:
        assert select.select([ready], [], [], 30)[0], "the daemon never said it was ready"
        assert ready.readline().startswith(b"ready")
    return proc


def _call_in_thread(sock: Path, request: m.Request) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def call() -> None:
        try:
            with rpc_client.connect(sock, name="waiter", autostart=False) as client:
                outcome["reply"] = client.call(request, 120)
        except errors.HolsrvError as err:
            outcome["error"] = err

    thread = threading.Thread(target=call)
    thread.start()
    return thread, outcome


def _hol_pids_once_waiting(sock: Path) -> list[int]:
    with rpc_client.connect(sock, name="watch", autostart=False) as watch:
        wait_until(lambda: any(s.waiting_calls for s in watch.call(m.Status()).sessions), timeout=30,
                   what="the call to wait on its server")
        return [s.pid for s in watch.call(m.Status()).sessions if s.pid]


def test_sigterm_stops_everything_within_the_budget_even_when_hol_ignores_sigterm(short_tmp, write_script):
    budget = 3.0
    sock = short_tmp / "t.sock"
    daemon = _daemon_process(sock, {"FAKE_HOL_IGNORE_SIGTERM": "1", "HOLSRV_STOP_TIMEOUT_S": str(budget)})
    try:
        waiter, outcome = _call_in_thread(sock, m.Diagnostics(str(write_script(BUSY)), wait=600))
        hol = _hol_pids_once_waiting(sock)
        began = time.monotonic()
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
        # The budget, plus starting and ending an interpreter; escalating step
        # by step (shutdown, end of input, SIGTERM, each 3 s) would take over 6 s.
        assert time.monotonic() - began < budget + 1.5
        waiter.join(30)
        assert isinstance(outcome.get("error"), errors.DaemonStopping), outcome
        assert not sock.exists() and not any(pid_alive(pid) for pid in hol)
    finally:
        daemon.kill()
        daemon.wait()


def test_a_second_signal_stops_at_once(short_tmp, write_script):
    sock = short_tmp / "f.sock"
    # A drain of 30 s and steps of 15 s: only the second signal can make this quick.
    daemon = _daemon_process(sock, {"FAKE_HOL_IGNORE_SIGTERM": "1", "HOLSRV_STOP_TIMEOUT_S": "60"})
    try:
        waiter, outcome = _call_in_thread(sock, m.Diagnostics(str(write_script(BUSY)), wait=600))
        hol = _hol_pids_once_waiting(sock)
        daemon.send_signal(signal.SIGTERM)
        wait_until(lambda: _refused(sock), what="the daemon to stop accepting connections")
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=20) == 0, "the daemon did not stop cleanly on the second signal"
        waiter.join(30)
        err = outcome.get("error")
        assert isinstance(err, errors.DaemonStopping) and "told twice" in str(err), outcome
        assert not sock.exists() and not any(pid_alive(pid) for pid in hol)
    finally:
        daemon.kill()
        daemon.wait()


def _refused(sock: Path) -> bool:
    try:
        rpc_client.connect(sock, name="probe", autostart=False).close()
    except errors.DaemonUnreachable:
        return True
    return False
