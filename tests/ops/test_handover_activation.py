"""Restarting in place under systemd socket activation: `systemctl --user reload holsrv` (SIGHUP) keeps
the servers and the socket systemd passed, which stays systemd's.

systemd is played by this test: it listens on the socket and starts `holsrv` with it as fd 3 and
LISTEN_FDS/LISTEN_PID set, as sd_listen_fds(3) has it.  Every process is killed by its pid at the end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import psutil

from holsrv import errors
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages as m

from conftest import FAKE_HOL, GOOD_SCRIPT, SYSTEMD_ACTIVATE, wait_until


def _call(path: Path, request: m.Request, timeout: float = 90.0):
    sock = rpc_client.open_socket(path)
    sock.settimeout(60)  # in the backlog while the daemon restarts, slow under load
    with rpc_client._handshake(sock, "test", None) as conn:
        return conn.call(request, timeout)


def test_sighup_under_socket_activation_keeps_the_servers_and_systemds_socket(short_tmp, write_script):
    path = short_tmp / "run" / "holsrv.sock"
    path.parent.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("HOLSRV_SOCKET", "JOURNAL_STREAM", "INVOCATION_ID")}
    env.update(HOL_BIN=str(FAKE_HOL), XDG_CONFIG_HOME=str(short_tmp / "config"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    daemon = subprocess.Popen([sys.executable, "-c", SYSTEMD_ACTIVATE, str(listener.fileno())],
                              pass_fds=(listener.fileno(),), env=env, stderr=subprocess.DEVNULL)
    tree: list[psutil.Process] = []
    try:
        script = write_script(GOOD_SCRIPT)
        first = _call(path, m.Diagnostics(str(script), wait=30))
        tree = psutil.Process(daemon.pid).children(recursive=True)
        os.kill(daemon.pid, signal.SIGHUP)  # ExecReload=

        def restarted() -> bool:
            try:
                return _call(path, m.Status(), 30).restarts == 1
            except (errors.HolsrvError, OSError):
                return False  # the switch

        wait_until(restarted, timeout=60, what="the daemon to restart on SIGHUP")
        status = _call(path, m.Status())
        assert (status.pid, status.adopted, status.socket) == (daemon.pid, 1, str(path))
        assert {s.name: s.source for s in status.settings}["HOLSRV_SOCKET"] == "systemd socket activation"
        again = _call(path, m.Diagnostics(str(script), wait=30))
        assert (again.server.pid, again.server.start) == (first.server.pid, "warm")
        _call(path, m.Shutdown())
        assert daemon.wait(60) == 0
        assert stat.S_ISSOCK(os.lstat(path).st_mode)  # systemd's file: left where it was
    finally:
        with contextlib.suppress(psutil.Error):
            tree += psutil.Process(daemon.pid).children(recursive=True)
        if daemon.poll() is None:
            daemon.kill()
        daemon.wait()
        for proc in tree:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        listener.close()
