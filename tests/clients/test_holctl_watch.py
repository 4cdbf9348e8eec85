"""`holctl watch` and what it loops on: `diagnostics` waiting for a file's next text (`changed_since`)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading

import pytest

from holsrv import errors
from holsrv.disk import watching
from holsrv.disk.files import content_hash
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT

BROKEN = GOOD_SCRIPT.replace("gen_tac >> simp[]", 'FAIL_TAC "no"')
# holctl as a terminal runs it: Ctrl-C raises KeyboardInterrupt even where the
# test runner was started with SIGINT ignored (a background job), as a child
# of a non-interactive shell is.
HOLCTL = "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); " \
         "from holctl.cli import main; sys.argv[0] = 'holctl'; main()"


def lines_of(stream) -> queue.Queue:
    """The stream's lines as they come, read by a thread (so every wait for one is bounded)."""
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def test_holctl_watch_json_prints_a_verdict_then_another_after_a_write_and_ends_cleanly_on_ctrl_c(
    daemon, write_script
):
    path = write_script(GOOD_SCRIPT)
    watcher = subprocess.Popen(
        [sys.executable, "-c", HOLCTL, "--socket", str(daemon.socket), "--no-start", "watch", "--json", str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        lines = lines_of(watcher.stdout)
        first = json.loads(lines.get(timeout=60))
        assert first["verdict"] == "OK" and first["content_hash"] == content_hash(GOOD_SCRIPT.encode())
        path.write_text(BROKEN, encoding="utf-8")
        second = json.loads(lines.get(timeout=60))
        assert second["verdict"] == "FAILED" and second["content_hash"] == content_hash(BROKEN.encode())
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(30) == 0
        assert lines.get(timeout=10) is None  # nothing more after the two verdicts
        assert watcher.stderr.read() == ""  # no traceback
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait(10)
        watcher.stdout.close()
        watcher.stderr.close()


def test_diagnostics_changed_since_waits_for_the_file_s_next_text(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    before = daemon.call(m.Diagnostics(str(path), wait=20))
    assert before.complete
    box: dict = {}

    def waiting() -> None:
        box["reply"] = daemon.call(m.Diagnostics(str(path), wait=120, changed_since=before.content_hash), 180)

    thread = threading.Thread(target=waiting)
    thread.start()
    try:
        # Not answered while the file keeps its text: the call is still waiting.
        thread.join(1.0)
        assert thread.is_alive()
        path.write_text(BROKEN, encoding="utf-8")
    finally:
        thread.join(150)
    after = box["reply"]
    assert after.content_hash == content_hash(BROKEN.encode()) and after.verdict == "FAILED", after.headline


def test_diagnostics_changed_since_a_hash_the_file_no_longer_has_answers_at_once(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    # Were it to wait for a write, the call would outlast its 120 s reply timeout.
    reply = daemon.call(m.Diagnostics(str(path), wait=600, changed_since="0123456789abcdef"), 120)
    assert reply.complete and reply.content_hash == content_hash(GOOD_SCRIPT.encode())


def test_diagnostics_changed_since_that_is_not_a_hash_is_refused(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    with pytest.raises(errors.BadRequest, match="changed_since"):
        daemon.call(m.Diagnostics(str(path), wait=5, changed_since="nope"))


def test_diagnostics_changed_since_without_file_watching_still_sees_the_write(daemon_factory, write_script,
                                                                             monkeypatch):
    monkeypatch.setattr(watching, "create", lambda *args, **kwargs: None)  # neither inotify nor a poll
    daemon = daemon_factory()
    path = write_script(GOOD_SCRIPT)
    before = daemon.call(m.Diagnostics(str(path), wait=20))
    os.utime(path)  # touched, not changed: still the same text
    box: dict = {}

    def waiting() -> None:
        box["reply"] = daemon.call(m.Diagnostics(str(path), wait=120, changed_since=before.content_hash), 180)

    thread = threading.Thread(target=waiting)
    thread.start()
    try:
        thread.join(1.0)
        assert thread.is_alive()
        path.write_text(BROKEN, encoding="utf-8")
    finally:
        thread.join(150)
    assert box["reply"].content_hash == content_hash(BROKEN.encode()) and box["reply"].verdict == "FAILED"
