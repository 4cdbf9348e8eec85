"""No server outlives its daemon: each HOL server and Holmake run is the child
of a watchdog, which exits as its command does and, when the daemon dies,
ends the command's whole process group, whatever `hol` or Holmake is.

Every process a test starts is killed by its pid at the end, should it survive.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from holsrv import errors, facilities
from holsrv.process import watchdog
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages as m

from conftest import FAKE_HOL, GOOD_SCRIPT, living, wait_until

# The promise: every process a server starts is gone this soon after the daemon.
WITHIN_S = 5.0
HELPER = "holsrv-test-helper"  # marks the TERM-ignoring helpers a wrapper starts, in their argv


def _wrapper(path: Path, real: str) -> Path:
    """A `hol` (or Holmake) as packaged installs have them: a shell script running `real` as its child.

    It ignores SIGTERM, and so does everything it starts; beside the real
    program it starts a helper that also ignores end of input.
    """
    helper = shlex.quote(f"import time; time.sleep(600)  # {HELPER}")
    path.write_text(
        "#!/bin/sh\n"
        "trap '' TERM\n"
        "exec 3<&0\n"  # a background job's stdin would be /dev/null
        f"{shlex.quote(sys.executable)} -c {helper} &\n"
        f'{real} "$@" <&3 3<&- &\n'
        "exec 3<&-\n"
        "wait\n"
    )
    path.chmod(0o755)
    return path


def _helpers(procs: list[psutil.Process]) -> list[psutil.Process]:
    found = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            argv = proc.cmdline()
            if argv[:2] == [sys.executable, "-c"] and HELPER in argv[2]:
                found.append(proc)
    return found


def _kill_all(procs: list[psutil.Process]) -> None:
    for proc in living(procs):
        with contextlib.suppress(psutil.Error):
            proc.kill()


def _tree(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


@pytest.mark.parametrize("portable", ["0", "1"], ids=["linux", "portable"])
def test_every_process_of_wrapped_hol_servers_is_gone_within_5s_of_the_daemons_sigkill(
    short_tmp, write_script, monkeypatch, portable
):
    # Portable: no parent-death signal is armed, so the watchdog's parent poll alone ends each group.
    monkeypatch.setenv(facilities.PORTABLE_ENV, portable)
    monkeypatch.setenv("FAKE_HOL_IGNORE_SIGTERM", "1")
    monkeypatch.setenv("HOL_BIN", str(_wrapper(short_tmp / "hol", shlex.quote(str(FAKE_HOL)))))
    monkeypatch.setenv("HOLSRV_MAX_HEAP_MB", "1024")  # room for all three, on any machine
    monkeypatch.setenv("HOLSRV_MAX_SERVERS", "3")
    client = rpc_client.connect(short_tmp / "w.sock", name="test", autostart=True)
    daemon = psutil.Process(client.welcome.pid)
    tree: list[psutil.Process] = []
    try:
        try:
            for name in ("aScript.sml", "bScript.sml", "cScript.sml"):
                reply = client.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, name)), wait=20), 60)
                assert reply.verdict == "OK", reply.headline
            said = client.call(m.Status(), 60).facilities["parent death"]
            assert said == ("polling" if portable == "1" else "PR_SET_PDEATHSIG and polling")
            tree = _tree(daemon.pid)
        finally:
            client.close()
            daemon.kill()  # checks it is still the daemon's process, by its start time
        assert len(_helpers(tree)) == 3, [p.cmdline() for p in tree]  # one TERM-ignoring helper per server
        wait_until(lambda: not living([daemon]), timeout=30, what="the daemon to die")
        wait_until(lambda: not living(tree), timeout=WITHIN_S,
                   what=f"every process the servers started to go: {living(tree)}")
    finally:
        _kill_all(tree)


def test_a_holmake_that_ignores_sigterm_and_its_helper_are_gone_within_5s_of_the_daemons_sigkill(
    short_tmp, write_script, monkeypatch
):
    fake_holmake = Path(FAKE_HOL).parent / "Holmake"
    monkeypatch.setenv("HOL_BIN", str(FAKE_HOL))
    monkeypatch.setenv("HOLSRV_HOLMAKE_BIN", str(_wrapper(short_tmp / "Holmake", shlex.quote(str(fake_holmake)))))
    path = write_script(GOOD_SCRIPT)
    os.mkfifo(path.parent / "holmake.gate")  # the fake Holmake waits there until the end
    rpc_client.connect(short_tmp / "h.sock", name="test", autostart=True).close()  # starts the daemon
    # The call is asked again when its daemon dies: of none, so no second daemon runs a Holmake after the test.
    client = rpc_client.connect(short_tmp / "h.sock", name="test", autostart=False)
    daemon = psutil.Process(client.welcome.pid)
    tree: list[psutil.Process] = []

    def build() -> None:
        with contextlib.suppress(errors.HolsrvError, OSError):
            client.call(m.Holmake(str(path)), 120)

    caller = threading.Thread(target=build, daemon=True)
    caller.start()
    try:
        try:
            wait_until(lambda: len(_helpers(_tree(daemon.pid))) == 1, timeout=30, what="Holmake to start")
            tree = _tree(daemon.pid)
        finally:
            daemon.kill()
        wait_until(lambda: not living([daemon]), timeout=30, what="the daemon to die")
        wait_until(lambda: not living(tree), timeout=WITHIN_S,
                   what=f"every process Holmake started to go: {living(tree)}")
    finally:
        _kill_all(tree)
        caller.join(30)
        client.close()


# -- the watchdog on its own ---------------------------------------------------------


def _watched(argv: list[str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen(watchdog.command(argv), start_new_session=True, **kwargs)


@pytest.mark.parametrize(("script", "status"), [("exit 3", 3), ("kill -TERM $$", -signal.SIGTERM)])
def test_the_watchdog_exits_as_its_command_did(script, status):
    proc = _watched(["sh", "-c", script])
    assert proc.wait(timeout=30) == status


def test_the_command_gets_the_watchdogs_pipes_itself_and_the_watchdog_keeps_none_of_them():
    proc = _watched(["sh", "-c", "read line; echo \"got $line\"; echo oops >&2; cat"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(b"hello\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == b"got hello\n"
        assert proc.stderr.readline() == b"oops\n"
        # Straight through, with no copying: the watchdog lets go of its own stdin and stdout.
        wait_until(lambda: [os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in (0, 1)] == [os.devnull] * 2,
                   what="the watchdog to hold /dev/null instead of the pipes")
        proc.stdin.close()  # end of input reaches the command
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def test_sigterm_to_the_group_is_the_commands_to_obey_and_the_watchdog_waits_for_its_exit():
    proc = _watched(["sh", "-c", "trap 'exit 7' TERM; echo ready; while :; do sleep 0.1; done"],
                    stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 7
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_command_that_cannot_be_started_is_said_on_stderr_with_status_127(tmp_path):
    proc = _watched([str(tmp_path / "no-such-hol")], stderr=subprocess.PIPE)
    _, said = proc.communicate(timeout=30)
    assert proc.returncode == 127
    assert said.startswith(b"holsrv watchdog: could not start ") and b"no-such-hol" in said


def test_without_a_parent_death_signal_the_watchdog_sees_its_parent_change_and_ends_its_group():
    # A shell parent that arms no parent-death signal: only the watchdog's look at its parent is left.
    ignoring = shlex.join([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                           f"signal.SIG_IGN); print('ready', flush=True); time.sleep(600)  # {HELPER}"])
    argv = watchdog.command(["sh", "-c", ignoring], daemon_pid=0)
    at = len(watchdog.command([], daemon_pid=0)) - 1  # where the parent's pid goes: the shell's, $$
    line = f'{shlex.join(argv[:at])} "$$" {shlex.join(argv[at + 1:])} & wait'
    parent = subprocess.Popen(["sh", "-c", line], start_new_session=True, stdout=subprocess.PIPE)
    tree: list[psutil.Process] = []
    try:
        assert parent.stdout is not None and parent.stdout.readline() == b"ready\n"
        tree = _tree(parent.pid)
        assert len(_helpers(tree)) == 1
        parent.kill()
        parent.wait()
        wait_until(lambda: not living(tree), timeout=WITHIN_S,
                   what=f"the watchdog to end its group: {living(tree)}")
    finally:
        _kill_all(tree)
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
