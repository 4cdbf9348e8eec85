"""Running holsrv for real: socket activation as systemd does it, idle exit, the
journald log form, log rotation, server stderr through `logs`, and the units
`holctl install-service` writes (with a fake systemctl, never the real user manager)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from holctl import service
from holsrv import main
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages as m
from holsrv.serve import activation

from conftest import FAKE_HOL, GOOD_SCRIPT, SYSTEMD_ACTIVATE, pid_alive, wait_until

ROOT = Path(__file__).resolve().parent.parent.parent
EXIT_DEADLINE_S = 30.0



def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HOLSRV_SOCKET", "JOURNAL_STREAM", "INVOCATION_ID")}
    # A config file of the developer's must not change what these daemons do.
    return {**env, "HOL_BIN": str(FAKE_HOL), "XDG_CONFIG_HOME": str(tmp / "config"), **extra}


def _activated(listener: socket.socket, env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SYSTEMD_ACTIVATE, str(listener.fileno()), *args],
        pass_fds=(listener.fileno(),), env=env, stderr=subprocess.PIPE, text=True,
    )


def _listening(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(16)
    return sock


def _exit_status(proc: subprocess.Popen) -> int:
    try:
        return proc.wait(EXIT_DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"holsrv (pid {proc.pid}) did not exit within {EXIT_DEADLINE_S:g}s")


@contextlib.contextmanager
def _reaped(proc: subprocess.Popen):
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


# -- socket activation ----------------------------------------------------------


def test_a_socket_activated_daemon_serves_on_the_socket_it_was_given_and_leaves_it_to_systemd(
    short_tmp, write_script
):
    path = short_tmp / "run" / "holsrv.sock"
    path.parent.mkdir(mode=0o700)
    runtime = short_tmp / "xdg"
    runtime.mkdir(mode=0o700)  # the default socket would be here: the passed one must win
    env = _env(short_tmp, XDG_RUNTIME_DIR=str(runtime))
    listener = _listening(path)
    try:
        with _reaped(_activated(listener, env)) as first:
            first_call = rpc_client.open_socket(path)
            first_call.settimeout(EXIT_DEADLINE_S)  # in the backlog until the daemon has started, slow under load
            with rpc_client._handshake(first_call, "test", None) as conn:
                status = conn.call(m.Status())
                assert (status.pid, status.socket) == (first.pid, str(path))
                source = {s.name: s.source for s in status.settings}["HOLSRV_SOCKET"]
                assert source == "systemd socket activation"
                conn.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=30))
                [server] = conn.call(m.Status()).sessions
                # The HOL server must not think systemd passed it a socket.
                environ = Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
                assert not [v for v in environ if v.startswith((b"LISTEN_PID=", b"LISTEN_FDS="))]
                conn.call(m.Shutdown())
            assert _exit_status(first) == 0
            assert "socket from systemd" in first.stderr.read()
            assert not pid_alive(server.pid)
        # The socket file is systemd's: still there, and still listening (in
        # this test's hands, as in systemd's), so a client that connects
        # before the next daemon starts waits in the backlog, not refused.
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        waiting = rpc_client.open_socket(path)
        waiting.settimeout(EXIT_DEADLINE_S)  # it waits out the next daemon's start, slow under load
        with _reaped(_activated(listener, env)) as second:
            with rpc_client._handshake(waiting, "test", None) as conn:
                assert conn.call(m.Status()).pid == second.pid
                conn.call(m.Shutdown())
            assert _exit_status(second) == 0
    finally:
        listener.close()


@pytest.mark.skipif(shutil.which("systemd-socket-activate") is None,
                    reason="systemd-socket-activate (systemd's own activation tool) is not installed here")
def test_systemds_own_activation_tool_starts_a_daemon_that_serves(short_tmp):
    path = short_tmp / "sd.sock"
    proc = subprocess.Popen(["systemd-socket-activate", "-l", str(path), sys.executable, "-m", "holsrv"],
                            env=_env(short_tmp), stderr=subprocess.PIPE, text=True)
    with _reaped(proc):
        wait_until(lambda: path.exists() or proc.poll() is not None, EXIT_DEADLINE_S, "the socket")
        with rpc_client.connect(path, name="test", autostart=False) as conn:
            status = conn.call(m.Status())
            assert status.pid == proc.pid and status.socket == str(path)  # the tool execs holsrv in place
            conn.call(m.Shutdown())
        assert _exit_status(proc) == 0
        assert "socket from systemd" in proc.stderr.read()


def test_listen_variables_for_another_process_are_ignored_and_removed():
    env = {"LISTEN_PID": str(os.getpid() + 1), "LISTEN_FDS": "1", "LISTEN_FDNAMES": "holsrv.socket", "HOME": "/h"}
    assert activation.listening_socket(env) is None
    assert env == {"HOME": "/h"}


def test_a_socket_activated_daemon_still_refuses_to_run_beside_another_on_its_socket(short_tmp):
    path = short_tmp / "holsrv.sock"
    listener = _listening(path)
    # The test plays the other daemon: it holds the socket's lock, as a live daemon does for life.
    lock = os.open(rpc_client.paths.lock_path(path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.write(lock, b"4242\n")
        with _reaped(_activated(listener, _env(short_tmp))) as proc:
            assert _exit_status(proc) != 0
            assert "another holsrv daemon (pid 4242) holds" in proc.stderr.read()
    finally:
        os.close(lock)
        listener.close()


# -- idle exit -------------------------------------------------------------------


def _foreground(sock: Path, env: dict[str, str], *args: str, stderr=subprocess.PIPE) -> subprocess.Popen:
    """`holsrv` in the foreground on `sock`; returns once it listens."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "holsrv", "--socket", str(sock), "--ready-fd", str(write_fd), *args],
        pass_fds=(write_fd,), stderr=stderr, env=env, text=True,
    )
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as ready:
        if not select.select([ready], [], [], EXIT_DEADLINE_S)[0] or not ready.readline().startswith(b"ready"):
            proc.kill()
            proc.wait()
            pytest.fail("the daemon never said it was ready")
    return proc


def test_an_idle_daemon_exits_cleanly_but_not_while_a_client_is_connected(short_tmp):
    sock = short_tmp / "idle.sock"
    with _reaped(_foreground(sock, _env(short_tmp), "--idle-exit", "0.2")) as proc:
        with rpc_client.connect(sock, name="test", autostart=False) as conn:
            # A correct daemon never exits with a connection open, however
            # long this takes, so the pause cannot make the test flaky.
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(1.0)
            assert conn.call(m.Status()).pid == proc.pid
        assert _exit_status(proc) == 0
        assert "no HOL server and no client for 0.2s (idle_exit_s): exiting" in proc.stderr.read()
    assert not sock.exists()


def test_a_live_hol_server_keeps_an_idle_exit_daemon_running_and_a_dead_one_does_not(short_tmp, write_script):
    sock = short_tmp / "idle.sock"
    with _reaped(_foreground(sock, _env(short_tmp), "--idle-exit", "0.2")) as proc:
        with rpc_client.connect(sock, name="test", autostart=False) as conn:
            conn.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=30))
            [server] = conn.call(m.Status()).sessions
        with pytest.raises(subprocess.TimeoutExpired):  # as above: never exits while a server lives
            proc.wait(1.0)
        os.kill(server.pid, signal.SIGKILL)  # a crash: the daemon keeps the dead session until a call
        assert _exit_status(proc) == 0


def test_a_daemon_started_on_demand_exits_when_idle_by_default_and_says_where_that_came_from(short_tmp):
    sock = short_tmp / "od.sock"
    env = {k: v for k, v in _env(short_tmp).items() if not k.startswith("HOLSRV_")}
    code = (
        "import sys; from pathlib import Path; from holsrv.rpc import client, messages as m\n"
        "with client.connect(Path(sys.argv[1]), name='test') as c:\n"
        "    st = c.call(m.Status())\n"
        "    print(st.pid, [(s.value, s.source) for s in st.settings if s.name == 'HOLSRV_IDLE_EXIT_S'])\n"
        "    c.call(m.Shutdown())\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(sock)], capture_output=True, text=True, timeout=60,
                          env=env)
    assert done.returncode == 0, done.stderr
    pid, shown = done.stdout.split(" ", 1)
    wait_until(lambda: not pid_alive(int(pid)), EXIT_DEADLINE_S, "the daemon to stop")
    assert shown.strip() == "[('3600.0', 'default for a daemon started on demand')]"


# -- logs ------------------------------------------------------------------------


def test_under_systemd_the_log_has_no_timestamps_and_carries_syslog_priorities(short_tmp):
    sock = short_tmp / "j.sock"
    proc = _foreground(sock, _env(short_tmp, INVOCATION_ID="0123abcd"))
    with _reaped(proc):
        proc.send_signal(signal.SIGTERM)
        assert _exit_status(proc) == 0
        lines = proc.stderr.read().splitlines()
    assert lines[0].startswith("<6>INFO holsrv.daemon: holsrv ") and f"listening on {sock}" in lines[0]
    assert "<6>INFO holsrv.daemon: SIGTERM: stopping" in lines
    assert not [line for line in lines if re.search(r"\d\d:\d\d:\d\d", line)]


def test_journal_stream_counts_only_when_it_is_our_stderr(short_tmp):
    out = short_tmp / "stderr"
    code = "from holsrv.serve import activation; import sys; print(activation.under_systemd(), file=sys.__stdout__)"
    with open(out, "w") as err:
        info = os.fstat(err.fileno())
        ours = f"{info.st_dev}:{info.st_ino}"

        def run(stream: str) -> str:
            env = {**_env(short_tmp), "JOURNAL_STREAM": stream}
            return subprocess.run([sys.executable, "-c", code], stderr=err, stdout=subprocess.PIPE, text=True,
                                  env=env, timeout=60, check=True).stdout.strip()

        # A shell started from a systemd service inherits the variable, not the stream.
        assert (run(ours), run(f"{info.st_dev}:{info.st_ino + 1}")) == ("True", "False")


def test_a_warning_under_systemd_gets_the_warning_priority():
    record = logging.LogRecord("holsrv.pool.pool", logging.WARNING, __file__, 1, "SERVER LARGE: %s", ("x",), None)
    assert main.JournalFormatter().format(record) == "<4>WARNING holsrv.pool.pool: SERVER LARGE: x"


def test_the_log_file_rotates_within_its_bounds(short_tmp):
    log = short_tmp / "logs" / "holsrv.log"
    handler = main.log_handler(log, max_bytes=2000, backups=2)
    handler.setFormatter(logging.Formatter("%(message)s"))
    try:
        for n in range(400):
            handler.emit(logging.LogRecord("t", logging.INFO, __file__, 1, "line %04d " + "x" * 80, (n,), None))
    finally:
        handler.close()
    files = sorted(p.name for p in log.parent.iterdir())
    assert files == ["holsrv.log", "holsrv.log.1", "holsrv.log.2"]
    assert all((log.parent / f).stat().st_size <= 2000 for f in files)
    assert "line 0399" in log.read_text()  # the newest is kept, the oldest dropped
    assert "line 0000" not in "".join((log.parent / f).read_text() for f in files)


def holctl(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "holctl", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_holctl_logs_prints_what_the_files_hol_server_wrote_to_stderr_and_a_dead_ones_last_words(
    daemon, write_script, tmp_path
):
    script = write_script(GOOD_SCRIPT)
    env = _env(tmp_path, HOLSRV_SOCKET=str(daemon.socket))
    daemon.call(m.Diagnostics(str(script), wait=30))
    [server] = daemon.call(m.Status()).sessions
    [fake] = psutil.Process(server.pid).children()  # under the server's watchdog, which has its pid
    shown = holctl("logs", str(script), env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"[LSP-init] fake hol lsp, pid {fake.pid}" in shown.stdout
    assert f"HOL server for demoScript.sml (pid {server.pid}, running) wrote to stderr" in shown.stdout
    os.kill(server.pid, signal.SIGKILL)
    wait_until(lambda: not daemon.call(m.Logs(str(script))).running, what="the daemon to see the death")
    dead = holctl("logs", str(script), env=env).stdout
    assert f"(pid {server.pid}, died: " in dead and f"fake hol lsp, pid {fake.pid}" in dead


def test_holctl_logs_of_a_file_without_a_server_says_how_to_start_one(daemon, write_script, tmp_path):
    script = write_script(GOOD_SCRIPT)
    shown = holctl("logs", str(script), env=_env(tmp_path, HOLSRV_SOCKET=str(daemon.socket)))
    assert shown.returncode == 0
    assert "no HOL server runs for demoScript.sml, and none died for it" in shown.stdout


def test_holctl_logs_daemon_prints_the_log_of_a_daemon_started_on_demand(short_tmp, tmp_path):
    sock = short_tmp / "l.sock"
    env = _env(tmp_path)
    with _reaped(_foreground(sock, env, "--log-file", str(rpc_client.paths.log_path(sock)))) as proc:
        shown = holctl("--socket", str(sock), "logs", "--daemon", "-n", "1", env=env)
        proc.send_signal(signal.SIGTERM)
        _exit_status(proc)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("\n") == 1 and f"listening on {sock}" in shown.stdout


# -- install-service ---------------------------------------------------------------

FAKE_SYSTEMCTL = """#!/bin/sh
# Records its arguments, one call a line; fails like a missing user manager if told to.
echo "$*" >> "$FAKE_SYSTEMCTL_LOG"
if [ -n "$FAKE_SYSTEMCTL_NO_MANAGER" ]; then
    echo "Failed to connect to bus: No medium found" >&2
    exit 1
fi
"""


@pytest.fixture
def fake_systemctl(tmp_path):
    tool = tmp_path / "systemctl"
    tool.write_text(FAKE_SYSTEMCTL)
    tool.chmod(0o755)
    return tool


def _service_env(tmp_path: Path, tool: Path, **extra: str) -> dict[str, str]:
    return _env(tmp_path, **{
        service.SYSTEMCTL_ENV: str(tool), "FAKE_SYSTEMCTL_LOG": str(tmp_path / "calls"),
        "HOLSRV_SOCKET": str(tmp_path / "none.sock"), "HOLDIR": "/srv/HOL 4", "HOLSRV_MAX_SERVERS": "3",
        **extra,
    })


def test_install_service_writes_units_for_this_installation_and_enables_the_socket(tmp_path, fake_systemctl):
    env = _service_env(tmp_path, fake_systemctl)
    done = holctl("install-service", env=env)
    assert done.returncode == 0, done.stderr
    units = tmp_path / "config" / "systemd" / "user"
    unit, sock = (units / "holsrv.service").read_text(), (units / "holsrv.socket").read_text()
    holsrv = Path(sys.executable).parent / "holsrv"
    assert f"ExecStart={holsrv}\n" in unit
    assert 'Environment="HOLDIR=/srv/HOL 4"\n' in unit and "Environment=HOLSRV_MAX_SERVERS=3\n" in unit
    assert f"Environment=XDG_CONFIG_HOME={tmp_path / 'config'}\n" in unit
    assert "KillMode=mixed\n" in unit and "TimeoutStopSec=30\n" in unit
    assert "ExecReload=/bin/kill -HUP $MAINPID\n" in unit  # reload: a restart in place, the servers kept
    assert f"ListenStream={tmp_path / 'none.sock'}\n" in sock and "SocketMode=0600\n" in sock
    assert (tmp_path / "calls").read_text().splitlines() == [
        "--user show-environment", "--user daemon-reload", "--user enable --now holsrv.socket"]
    assert f"wrote {units / 'holsrv.service'}" in done.stdout
    assert "ran " + str(fake_systemctl) + " --user enable --now holsrv.socket" in done.stdout
    verify = shutil.which("systemd-analyze")
    if verify is not None:
        checked = subprocess.run([verify, "verify", "--user", str(units / "holsrv.socket"),
                                  str(units / "holsrv.service")], capture_output=True, text=True, timeout=120,
                                 env={**env, "XDG_RUNTIME_DIR": str(tmp_path)})
        assert checked.returncode == 0 and "holsrv" not in checked.stderr, checked.stderr

    # Again, with a changed setting: a daemon the old units started is restarted to take it.
    again = holctl("install-service", env={**env, "HOLSRV_MAX_SERVERS": "5"})
    assert again.returncode == 0, again.stderr
    assert "Environment=HOLSRV_MAX_SERVERS=5\n" in (units / "holsrv.service").read_text()
    assert (tmp_path / "calls").read_text().splitlines()[3:] == [
        "--user show-environment", "--user daemon-reload", "--user enable --now holsrv.socket",
        "--user try-restart holsrv.service"]

    undone = holctl("uninstall-service", env=env)
    assert undone.returncode == 0, undone.stderr
    assert not (units / "holsrv.service").exists() and not (units / "holsrv.socket").exists()
    assert (tmp_path / "calls").read_text().splitlines()[7:] == [
        "--user disable --now holsrv.socket holsrv.service", "--user daemon-reload"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_systemd_analyze_accepts_the_units_and_the_stop_timeout_covers_the_daemons_budget(tmp_path):
    made = service.units({"PATH": "", "HOLSRV_STOP_TIMEOUT_S": "25"}, 25.0, exec_start=[sys.executable])
    (tmp_path / "holsrv.socket").write_text(made.socket)
    (tmp_path / "holsrv.service").write_text(made.service)
    assert "TimeoutStopSec=60\n" in made.service  # the drain, the servers, the reaping of SIGKILLed ones
    checked = subprocess.run(["systemd-analyze", "verify", "--user", str(tmp_path / "holsrv.socket"),
                              str(tmp_path / "holsrv.service")], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)})
    assert checked.returncode == 0 and "holsrv" not in checked.stderr, checked.stderr


def test_without_a_user_manager_install_service_says_so_installs_nothing_and_explains_on_demand(
    tmp_path, fake_systemctl
):
    env = _service_env(tmp_path, fake_systemctl, FAKE_SYSTEMCTL_NO_MANAGER="1")
    done = holctl("install-service", env=env)
    assert done.returncode == 1
    assert "no systemd user instance answers here" in done.stderr and "Failed to connect to bus" in done.stderr
    assert "the first holctl or holmcp call that finds no daemon starts one" in done.stderr
    assert not (tmp_path / "config" / "systemd").exists()


def test_the_units_in_the_repository_are_the_ones_install_service_writes():
    made = service.units({"PATH": ""}, 10.0, exec_start=["EXEC"])
    for name, text in (("holsrv.service", made.service), ("holsrv.socket", made.socket)):
        shipped = (ROOT / "systemd" / name).read_text()
        body = [line for line in shipped.splitlines() if not line.startswith(("#", "ExecStart="))]
        assert body == [line for line in text.splitlines() if not line.startswith(("#", "ExecStart="))], name


def test_exec_start_and_environment_are_quoted_for_systemd():
    made = service.units({"PATH": "", "HOL_BIN": "/srv/50%/hol", "HOLSRV_X": 'a"b'}, 10.0,
                         exec_start=["/srv/my env/bin/python", "-m", "holsrv"])
    assert 'ExecStart="/srv/my env/bin/python" -m holsrv\n' in made.service
    assert "Environment=HOL_BIN=/srv/50%%/hol\n" in made.service
    assert 'Environment="HOLSRV_X=a\\"b"\n' in made.service


def test_a_constant_in_the_shell_is_left_out_of_the_unit_with_a_note_and_a_setting_kept():
    made = service.units({"PATH": "", "HOL_BIN": "/srv/hol", "HOLSRV_QUIET_S": "2", "HOLSRV_DIAGNOSTICS_WAIT_S": "9",
                          "HOLSRV_LETGO_S": "20"}, 10.0, exec_start=["EXEC"])
    assert "Environment=HOLSRV_LETGO_S=20\n" in made.service
    assert "QUIET_S" not in made.service and "DIAGNOSTICS_WAIT_S" not in made.service
    assert made.notes == [
        "HOLSRV_DIAGNOSTICS_WAIT_S left out: it is no longer a setting but a constant (docs/settings.md)",
        "HOLSRV_QUIET_S left out: it is no longer a setting but a constant (docs/settings.md)",
    ]


def test_holctl_logs_never_starts_a_daemon(write_script, tmp_path):
    shown = holctl("--socket", str(tmp_path / "nobody.sock"), "logs", str(write_script(GOOD_SCRIPT)),
                   env=_env(tmp_path))
    assert shown.returncode == 5 and "no holsrv daemon is listening" in shown.stderr
    assert not (tmp_path / "nobody.sock").exists()
