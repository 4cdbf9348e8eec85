"""`holctl logs --daemon` finds the log of the daemon that runs, even after its directory was deleted under it.

A daemon started on demand logs beside its socket (or in the state
directory); a directory deleted under it takes its socket and its log.
The daemon makes the socket again once the directory is back, and its log
with it; until then `holctl logs --daemon` reads the deleted file it still
writes, and never says no daemon was started while one runs.
"""

from __future__ import annotations

import shutil
import signal

from test_ops import _env, _exit_status, _foreground, _reaped, holctl

from holsrv.rpc import client as rpc_client
from holsrv.rpc import paths
from tests.conftest import wait_until

# Bounds, generous for a loaded machine: the daemon looks at its socket every 2 s.
MADE_AGAIN_S = 60.0


def test_after_the_socket_directory_was_deleted_and_made_again_holctl_logs_daemon_shows_the_running_daemons_log(
        short_tmp, tmp_path):
    run = short_tmp / "run"
    run.mkdir(mode=0o700)
    sock = run / "l.sock"
    log = paths.log_path(sock)
    assert log.parent == run  # a socket of one's own: the log is beside it, and goes with the directory
    env = _env(tmp_path)
    with _reaped(_foreground(sock, env, "--log-file", str(log))) as proc:
        shutil.rmtree(run)
        gone = holctl("--socket", str(sock), "logs", "--daemon", env=env)
        run.mkdir(mode=0o700)  # as a client starting a daemon makes it again
        wait_until(lambda: sock.exists() and log.exists(), timeout=MADE_AGAIN_S,
                   what="the daemon to make its socket and its log again")
        with rpc_client.connect(sock, name="test", autostart=False) as conn:
            assert conn.welcome.pid == proc.pid
        shown = holctl("--socket", str(sock), "logs", "--daemon", env=env)
        proc.send_signal(signal.SIGTERM)
        _exit_status(proc)
    assert gone.returncode == 1
    assert f"its directory {run} does not exist" in gone.stderr and f"mkdir -m 700 {run}" in gone.stderr
    assert shown.returncode == 0, shown.stderr
    assert f"the log file {log} was deleted while this daemon (pid {proc.pid}) ran" in shown.stdout
    assert f"the socket {sock} was deleted: listening on a new one" in shown.stdout


def test_holctl_logs_daemon_reads_the_deleted_log_a_running_daemon_still_writes(short_tmp, tmp_path):
    runtime, state = short_tmp / "xdg", tmp_path / "state"
    runtime.mkdir(mode=0o700)
    env = _env(tmp_path, XDG_RUNTIME_DIR=str(runtime), XDG_STATE_HOME=str(state))
    sock = runtime / "holsrv" / "holsrv.sock"  # the built-in socket of this environment: its log is the state dir's
    log = state / "holsrv" / "holsrv.log"
    with _reaped(_foreground(sock, env, "--log-file", str(log))) as proc:
        shutil.rmtree(log.parent)  # the state directory cleaned under a running daemon
        shown = holctl("--socket", str(sock), "logs", "--daemon", env=env)
        proc.send_signal(signal.SIGTERM)
        _exit_status(proc)
    assert shown.returncode == 0, shown.stderr
    assert f"listening on {sock}" in shown.stdout  # the lines logged before the file was deleted
    assert f"{log} was deleted while the daemon (pid {proc.pid}) ran" in shown.stderr
    assert f"mkdir -m 700 {log.parent}" in shown.stderr
