"""holmake: Holmake in the script's directory, with progress, one run per directory, failures with their log.

The Holmake is tests/fake_hol/Holmake, found beside the fake `hol` as a real
one is beside a real `hol`.  It waits at a FIFO named `holmake.gate` until
the test opens it for writing, so a test can hold a run while it looks.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import psutil
import pytest

from holctl.render import render
from holsrv import errors
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, wait_until

DEADLINE_S = 30.0
FAILING_BUILD = GOOD_SCRIPT + "\n(* FAKE_HOLMAKE_FAIL *)\n"


class Follower:
    """One holmake call in a thread, with the progress frames it got."""

    def __init__(self, daemon, request: m.Holmake) -> None:
        self.frames: list[m.Progress] = []
        self.got_frame = threading.Event()
        self.outcome: dict = {}
        self.thread = threading.Thread(target=self._call, args=(daemon, request))
        self.thread.start()

    def _on_progress(self, frame: m.Progress) -> None:
        self.frames.append(frame)
        self.got_frame.set()

    def _call(self, daemon, request) -> None:
        try:
            with rpc_client.connect(daemon.socket, name="holmake-test", autostart=False) as conn:
                self.outcome["reply"] = conn.call(request, DEADLINE_S, on_progress=self._on_progress)
        except errors.HolsrvError as err:
            self.outcome["error"] = err

    def wait_for(self, text: str) -> None:
        wait_until(lambda: any(text in f.message for f in self.frames), DEADLINE_S, f"a progress frame with {text!r}")

    def result(self) -> m.HolmakeResult:
        self.thread.join(DEADLINE_S)
        assert not self.thread.is_alive(), "the holmake call did not end"
        if "error" in self.outcome:
            raise self.outcome["error"]
        return self.outcome["reply"]


def open_gate(directory: Path) -> None:
    """Let a fake Holmake waiting at the gate go on (it waits for a writer to open the FIFO)."""
    fd = os.open(directory / "holmake.gate", os.O_WRONLY | os.O_NONBLOCK)
    os.close(fd)


def runs(directory: Path) -> int:
    return len((directory / ".holmake-runs").read_text().splitlines())


def test_holmake_builds_the_directory_and_reports_progress(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    follower = Follower(daemon, m.Holmake(str(path), progress=True))
    reply = follower.result()
    assert reply.ok and reply.exit_code == 0, reply
    assert (path.parent / ".hol" / "objs" / "demoTheory.uo").exists()
    assert reply.directory == str(path.parent)
    assert render(reply).startswith(f"OK: Holmake built {path.parent}")
    assert any("Holmake: " in f.message for f in follower.frames)


def test_a_failed_build_names_the_theory_and_shows_its_logs_tail(daemon, write_script):
    path = write_script(FAILING_BUILD)
    reply = daemon.call(m.Holmake(str(path), jobs=2))
    assert not reply.ok and reply.exit_code == 1
    assert reply.failed == "demo"
    assert reply.log_tail.splitlines()[-1] == "Exception raised at Tactical.FAIL_TAC: fake failure in demo"
    assert reply.command[1:] == ["-j", "2"]
    text = render(reply)
    assert "FAILED: Holmake in" in text and "demo failed to build" in text
    assert "failed: demo" in text and "fake failure in demo" in text


def test_one_holmake_per_directory_a_second_caller_shares_the_run(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    os.mkfifo(path.parent / "holmake.gate")
    first = Follower(daemon, m.Holmake(str(path), progress=True))
    first.wait_for("waiting at the gate")
    second = Follower(daemon, m.Holmake(str(path), progress=True))
    second.wait_for("waiting at the gate")  # the second caller follows the same run
    open_gate(path.parent)
    replies = [first.result(), second.result()]
    assert all(r.ok for r in replies)
    assert [r.shared for r in replies] == [False, True]
    assert runs(path.parent) == 1
    assert "joined the Holmake another call had started" in render(replies[1])


def test_answers_about_a_script_are_marked_possibly_stale_while_holmake_runs_there(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    before = daemon.call(m.Diagnostics(str(path)))
    assert before.verdict == "OK" and before.freshness is not None and not before.freshness.may_be_stale
    os.mkfifo(path.parent / "holmake.gate")
    build = Follower(daemon, m.Holmake(str(path), progress=True))
    build.wait_for("waiting at the gate")
    during = daemon.call(m.Diagnostics(str(path)))
    hover = daemon.call(m.Hover(str(path), 5, 3))
    open_gate(path.parent)
    assert build.result().ok
    after = daemon.call(m.Hover(str(path), 5, 3))
    assert during.verdict == "OK"  # it still answers
    for reply in (during, hover):
        assert reply.freshness is not None and reply.freshness.may_be_stale
        assert any(r.startswith(f"Holmake running in {path.parent}") for r in reply.freshness.reasons)
        assert f"MAY BE STALE: Holmake running in {path.parent}" in render(reply)
    assert after.freshness is not None and not after.freshness.may_be_stale


def test_a_holmake_past_its_time_limit_is_killed_with_its_process_group(daemon_factory, write_script):
    daemon = daemon_factory(holmake_timeout_s=1.0)
    path = write_script(GOOD_SCRIPT)
    os.mkfifo(path.parent / "holmake.gate")
    reply = daemon.call(m.Holmake(str(path)))
    assert not reply.ok and reply.timed_out and reply.exit_code is None
    assert "ran past the daemon's limit (HOLSRV_HOLMAKE_TIMEOUT_S) and was killed" in reply.message
    assert "waiting at the gate" in reply.log_tail
    assert daemon.daemon.pool.builds.running == {}
    assert _processes_in(path.parent) == [], "the killed Holmake left processes behind"


def _processes_in(directory: Path) -> list[int]:
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.cwd() == str(directory):
                found.append(proc.pid)
    return found


def test_a_daemon_shutting_down_kills_a_running_holmake_and_tells_its_caller(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    os.mkfifo(path.parent / "holmake.gate")
    build = Follower(daemon, m.Holmake(str(path), progress=True))
    build.wait_for("waiting at the gate")
    assert _processes_in(path.parent), "the fake Holmake should be running"
    daemon.stop()
    with pytest.raises(errors.DaemonStopping):
        build.result()
    assert _processes_in(path.parent) == [], "the daemon stopped but its Holmake runs on"


@pytest.mark.parametrize("target", ["-k", "a b", "../x;rm"])
def test_a_target_that_is_not_a_plain_name_is_refused(daemon, write_script, target):
    path = write_script(GOOD_SCRIPT)
    with pytest.raises(errors.BadRequest, match="is not a Holmake target"):
        daemon.call(m.Holmake(str(path), target=target))


def test_no_holmake_found_is_a_hol_not_found_error_saying_what_to_set(daemon_factory, write_script, tmp_path):
    daemon = daemon_factory(holmake_bin=str(tmp_path / "no-such-Holmake"))
    path = write_script(GOOD_SCRIPT)
    with pytest.raises(errors.HolNotFound, match="HOLSRV_HOLMAKE_BIN"):
        daemon.call(m.Holmake(str(path)))
